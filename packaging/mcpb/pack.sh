#!/usr/bin/env bash
# Builds the MCPB bundle (a .mcpb for Claude Desktop and other MCPB hosts) from a built
# tmcra-mcp: server/tmcra-mcp, manifest.json (version and tools asked of the binary), LICENSE
# and NOTICE. The manifest is validated and the bundle packed with the pinned mcpb CLI
# (package.json here; installed with `npm ci` on first use).
#
#   bash packaging/mcpb/pack.sh [--bin PATH] [--out DIR]
#
# Defaults: --bin build/release/src/app/tmcra-mcp, --out build/mcpb. Prints the bundle's path.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
bin="$root/build/release/src/app/tmcra-mcp"
out="$root/build/mcpb"
usage() { echo "usage: bash packaging/mcpb/pack.sh [--bin PATH] [--out DIR]" >&2; exit 2; }
while [ $# -gt 0 ]; do
  case "$1" in
    --bin) [ $# -ge 2 ] || usage; bin="$2"; shift 2 ;;
    --out) [ $# -ge 2 ] || usage; out="$2"; shift 2 ;;
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
arch="$(node -e 'process.stdout.write(process.arch)')"
bundle="$out/tmcra-mcp-$version-linux-$arch.mcpb"
rm -f "$bundle"
"$mcpb" pack "$stage" "$bundle" >&2
echo "$bundle"
