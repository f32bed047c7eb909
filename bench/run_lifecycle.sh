#!/usr/bin/env bash
# One command for the turn-lifecycle benchmark:
#
#   bash bench/run_lifecycle.sh [lifecycle_latency.mjs options]
#       e.g. bash bench/run_lifecycle.sh --turns 100 --delivery-items 2000    (a quicker look)
#
# Builds the Release `bench` preset (tmcra-mcp, memory_bench, lifecycle_bench), installs
# bench/node_modules with `npm ci` if it is missing, builds a 100k-message store with
# memory_bench (scope "bench"; its paraphrased questions are the prepare queries), then runs
# bench/lifecycle_latency.mjs, which measures in one run: the SQLite floor (BEGIN IMMEDIATE;
# INSERT; COMMIT with synchronous=FULL, on the same disk), tmcra_turn_commit p50/p99 through the
# official SDK client (eventual and read_your_writes) and a raw pipe, tmcra_turn_prepare on the
# 100k store, and background delivery draining 10,000 pending outbox items.
# Results: a Markdown summary on stdout, every sample in bench/results/lifecycle-*.json.
#
# Environment: STORE_MESSAGES (default 100000), WORK (scratch directory on the disk to measure,
# default $TMPDIR or /tmp), JOBS (build parallelism, default nproc). Needs about 200 MB in WORK.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"
cd "$root"
log() { printf '[lifecycle] %s\n' "$*" >&2; }
# shellcheck source=bench/lib.sh
. "$here/lib.sh"

messages="${STORE_MESSAGES:-100000}"
work="$(mktemp -d "${WORK:-${TMPDIR:-/tmp}}/tmcra-lifecycle-XXXXXX")"
trap 'rm -rf "$work"' EXIT

log "building the bench preset (Release)"
cmake --preset bench >/dev/null
cmake --build --preset bench -j "${JOBS:-$(nproc)}" --target tmcra-mcp memory_bench lifecycle_bench >&2

if ! command -v node >/dev/null 2>&1; then
  log "node not found: install Node.js >= 18 (bash bench/run.sh installs it on Debian)"
  exit 1
fi
ensure_node_modules

bin="$root/build/bench"
build_store "$bin" "$messages" "$work"

node "$here/lifecycle_latency.mjs" --bin "$bin/src/app/tmcra-mcp" --driver "$bin/bench/lifecycle_bench" \
  --work "$work/run" --store "$work/store" --questions "$work/questions.jsonl" \
  --store-report "$work/store-report.json" "$@"
