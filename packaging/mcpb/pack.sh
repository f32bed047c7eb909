#!/usr/bin/env bash
# Builds the MCPB bundle (a .mcpb for Claude Desktop and other MCPB hosts) from a built
# tmcra-mcp: server/tmcra-mcp, manifest.json (version and tools asked of the binary; platform,
# CPU, glibc and libraries read from its ELF headers), LICENSE and NOTICE. The manifest is
# validated and the bundle packed with the pinned mcpb CLI (package.json here; installed with
# `npm ci` on first use). Beside the bundle it writes server.json, the MCP Registry's
# description of it (make_server_json.mjs: its download URL and SHA-256, checked against the
# registry's rules by check_server_json.mjs), for `mcp-publisher publish`.
#
#   bash packaging/mcpb/pack.sh [--bin PATH] [--out DIR] [--registry-name NAME]
#                               [--release-url URL_PREFIX] [--repository URL] [--website-url URL]
#
# Defaults: --bin build/release/src/app/tmcra-mcp, --out build/mcpb. --registry-name and
# --release-url may also come from TMCRA_REGISTRY_NAME and TMCRA_RELEASE_URL; without either the
# server.json holds placeholders (io.github.OWNER/tmcra-mcp, https://github.com/OWNER/tmcra-mcp/
# releases/download/v<version>/) and a warning says so. The bundle's URL is URL_PREFIX followed
# by its file name. Prints the bundle's path.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
bin="$root/build/release/src/app/tmcra-mcp"
out="$root/build/mcpb"
registry_name="${TMCRA_REGISTRY_NAME:-}"
release_url="${TMCRA_RELEASE_URL:-}"
repository=""
website_url=""
usage() {
  echo "usage: bash packaging/mcpb/pack.sh [--bin PATH] [--out DIR] [--registry-name NAME]" \
       "[--release-url URL_PREFIX] [--repository URL] [--website-url URL]" >&2
  exit 2
}
while [ $# -gt 0 ]; do
  case "$1" in
    --bin) [ $# -ge 2 ] || usage; bin="$2"; shift 2 ;;
    --out) [ $# -ge 2 ] || usage; out="$2"; shift 2 ;;
    --registry-name) [ $# -ge 2 ] || usage; registry_name="$2"; shift 2 ;;
    --release-url) [ $# -ge 2 ] || usage; release_url="$2"; shift 2 ;;
    --repository) [ $# -ge 2 ] || usage; repository="$2"; shift 2 ;;
    --website-url) [ $# -ge 2 ] || usage; website_url="$2"; shift 2 ;;
    *) usage ;;
  esac
done
for tool in node npm strip; do
  command -v "$tool" >/dev/null 2>&1 || { echo "pack.sh: needs $tool" >&2; exit 1; }
done
if [ ! -x "$bin" ]; then
  echo "pack.sh: $bin is not an executable; build it first (cmake --preset release &&" \
       "cmake --build --preset release)" >&2
  exit 1
fi
# The pinned CLI, installed again whenever package-lock.json changed (as bootstrap.sh does).
mcpb="$here/node_modules/.bin/mcpb"
stamp="$here/node_modules/.tmcra-lock-sha256"
want="$(sha256sum "$here/package-lock.json" | cut -d' ' -f1)"
if [ ! -x "$mcpb" ] || [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
  (cd "$here" && npm ci --no-audit --no-fund --loglevel=error >&2)
  echo "$want" > "$stamp"
fi

stage="$(mktemp -d)"
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/server" "$out"
install -m 0755 -s "$bin" "$stage/server/tmcra-mcp"   # stripped: a third of the size
cp "$root/LICENSE" "$root/NOTICE" "$stage/"
node "$here/make_manifest.mjs" "$stage/server/tmcra-mcp" "$stage/manifest.json"
"$mcpb" validate "$stage/manifest.json" >&2
version="$(node -e 'process.stdout.write(JSON.parse(require("fs").readFileSync(process.argv[1])).version)' "$stage/manifest.json")"
# The CPU in the name is the binary's (x64, arm64: Node's names), not this machine's.
arch="$(node "$here/elf_info.mjs" "$stage/server/tmcra-mcp" |
        node -e 'process.stdout.write(JSON.parse(require("fs").readFileSync(0)).nodeArch)')"
bundle="$out/tmcra-mcp-$version-linux-$arch.mcpb"
rm -f "$bundle" "$out/server.json"
"$mcpb" pack "$stage" "$bundle" >&2
args=(--manifest "$stage/manifest.json" --bundle "$bundle" --out "$out/server.json")
[ -z "$registry_name" ] || args+=(--registry-name "$registry_name")
[ -z "$release_url" ] || args+=(--release-url "$release_url")
[ -z "$repository" ] || args+=(--repository "$repository")
[ -z "$website_url" ] || args+=(--website-url "$website_url")
node "$here/make_server_json.mjs" "${args[@]}" >&2
echo "$bundle"
