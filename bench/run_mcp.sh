#!/usr/bin/env bash
# One command for the benchmark of tmcra-memd's MCP endpoint:
#
#   bash bench/run_mcp.sh [memd_mcp.mjs options]   e.g. --messages 5000 --recalls 200
#
# Installs bench/node_modules with `npm ci` if it is missing, builds tmcra-memd in the Release
# `bench` preset, and runs bench/memd_mcp.mjs: recall over /mcp (tools/call tmcra_recall)
# against the same recall over memd's REST API, one memd, in one run.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"
cd "$root"
# shellcheck source=bench/lib.sh
. "$here/lib.sh"
ensure_node_modules
cmake --preset bench >/dev/null
cmake --build --preset bench -j "${JOBS:-$(nproc)}" --target tmcra-memd >&2
exec node "$here/memd_mcp.mjs" --memd "$root/build/bench/memd/tmcra-memd" "$@"
