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
while [ $# -gt 0 ]; do
  case "$1" in
    --bin) bin="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    *) echo "usage: bash packaging/mcpb/pack.sh [--bin PATH] [--out DIR]" >&2; exit 2 ;;
  esac
done
if [ ! -x "$bin" ]; then
  echo "pack.sh: $bin is not an executable; build it first (cmake --preset release &&" \
       "cmake --build --preset release)" >&2
  exit 1
fi
mcpb="$here/node_modules/.bin/mcpb"
if [ ! -x "$mcpb" ]; then
  (cd "$here" && npm ci --no-audit --no-fund --loglevel=error >&2)
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
