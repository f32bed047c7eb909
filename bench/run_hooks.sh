#!/usr/bin/env bash
# One command for the hook start-up benchmark (bench/hook_bench.mjs):
#
#   bash bench/run_hooks.sh [hook_bench.mjs options]      e.g. bash bench/run_hooks.sh --runs 50
#
# Builds the Release `bench` preset (tmcra-mcp, memory_bench), the do-nothing hook floor
# (bench/hook_floor.c, static) and the launcher (bench/hook_spawn.c) with cc, installs
# bench/node_modules (with claude-mem, pinned in package.json) if needed, builds a 10k- and a
# 100k-message store with memory_bench (scope "bench", questions for the prompts), and runs
# hook_bench.mjs on both side by side with the floor and claude-mem's hooks. Results: a Markdown
# table on stdout, every sample in bench/results/hooks-*.json. Never fails on a figure.
#
# Environment: JOBS (build parallelism, default 2), SIZES (default "10000 100000"),
# KEEP_STORES=DIR (build the stores there once and reuse them on later runs).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"
log() { printf '[bench] %s\n' "$*" >&2; }
# shellcheck source=bench/lib.sh
. "$here/lib.sh"
cd "$root"

cmake --preset bench >/dev/null
cmake --build --preset bench -j "${JOBS:-2}" --target tmcra-mcp memory_bench >&2
bin="$root/build/bench"
mkdir -p "$bin/bench"
cc -O2 -static -o "$bin/bench/hook_floor" "$here/hook_floor.c"
cc -O2 -o "$bin/bench/hook_spawn" "$here/hook_spawn.c"

ensure_node_modules
claude_mem="$here/node_modules/claude-mem"

work="${KEEP_STORES:-$(mktemp -d "${TMPDIR:-/tmp}/tmcra-hook-stores-XXXXXX")}"
[ -n "${KEEP_STORES:-}" ] || trap 'rm -rf "$work"' EXIT
stores=""
for n in ${SIZES:-10000 100000}; do
  if [ ! -f "$work/$n/store/memory.db" ]; then
    mkdir -p "$work/$n"
    build_store "$bin" "$n" "$work/$n"
  fi
  stores="${stores:+$stores,}$n:$work/$n/store"
done

args=(--build-dir "$bin" --stores "$stores")
[ -d "$claude_mem/plugin" ] && args+=(--claude-mem "$claude_mem")
log "running bench/hook_bench.mjs ${args[*]} $*"
node "$here/hook_bench.mjs" "${args[@]}" "$@"
