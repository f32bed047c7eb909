#!/usr/bin/env bash
# One command for the slow-clients benchmark of tmcra-memd:
#
#   bash bench/run_slow_clients.sh [memd_slow_clients.mjs options]   e.g. --calls 500
#
# Installs bench/node_modules with `npm ci` if it is missing, builds tmcra-memd in the Release
# `bench` preset, and runs bench/memd_slow_clients.mjs: recall
# latency of a well-behaved client while 0, 50 and 200 slow clients hold connections, in one
# run. Nothing leaves 127.0.0.1; the certificate and the key live and die in a temp dir.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"
cd "$root"
log() { printf '[slow-clients] %s\n' "$*" >&2; }
# shellcheck source=bench/lib.sh
. "$here/lib.sh"
ensure_node_modules
cmake --preset bench >/dev/null
cmake --build --preset bench -j "${JOBS:-$(nproc)}" --target tmcra-memd >&2
exec node "$here/memd_slow_clients.mjs" --memd "$root/build/bench/memd/tmcra-memd" "$@"
