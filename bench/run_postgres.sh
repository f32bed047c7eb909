#!/usr/bin/env bash
# One command for the PostgreSQL benchmark of tmcra-memd:
#
#   bash bench/run_postgres.sh [memd_postgres.mjs options]   e.g. --messages 20000
#
# Installs bench/node_modules with `npm ci` if it is missing, builds tmcra-memd in the Release
# `bench` preset, and runs bench/memd_postgres.mjs: ingest throughput and recall latency with
# 16 clients, one memd on SQLite against one and two memd on PostgreSQL (a private cluster it
# starts and stops, as root under `nobody`), in one run. Needs Debian's postgresql-15.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"
cd "$root"
log() { printf '[pg-bench] %s\n' "$*" >&2; }
# shellcheck source=bench/lib.sh
. "$here/lib.sh"
ensure_node_modules
cmake --preset bench >/dev/null
cmake --build --preset bench -j "${JOBS:-$(nproc)}" --target tmcra-memd >&2
exec node "$here/memd_postgres.mjs" --memd "$root/build/bench/memd/tmcra-memd" "$@"
