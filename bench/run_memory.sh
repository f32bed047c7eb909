#!/usr/bin/env bash
# One command for the memory-engine benchmark:
#
#   bash bench/run_memory.sh [SIZES...]        default: 10000 100000 1000000
#
# Builds the Release `bench` preset, runs bench/memory_bench (the engine in-process: ingest
# throughput in batches, recall latency, store size, peak RSS, evidence-hit@8) at each size and
# on a 100k-message Japanese corpus (--language ja),
# then runs the 10k corpus through tmcra-mcp and @modelcontextprotocol/server-memory side by
# side over MCP (bench/recall_side_by_side.mjs). Results: one JSON line per size on stdout and
# bench/results/*.json. The 1M run needs about 1 GB of disk in $TMPDIR and a few minutes.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"
log() { printf '[bench] %s\n' "$*" >&2; }
# shellcheck source=bench/lib.sh
. "$here/lib.sh"
cd "$root"
sizes=("$@")
[ "${#sizes[@]}" -gt 0 ] || sizes=(10000 100000 1000000)
tmp="${TMPDIR:-/tmp}"

cmake --preset bench >/dev/null
cmake --build --preset bench --target memory_bench tmcra-mcp >&2

mkdir -p "$here/results"
stamp="$(date -u +%Y-%m-%dT%H-%M-%SZ)"
for n in "${sizes[@]}"; do
  echo "[bench] memory_bench --messages $n" >&2
  "$root/build/bench/bench/memory_bench" --messages "$n" --dir "$tmp/tmcra-memory-bench-$n" \
    | tee -a "$here/results/memory-$stamp.jsonl"
  rm -rf "$tmp/tmcra-memory-bench-$n"
done

# The CJK index (memory/cjk.h) on a Japanese corpus whose questions share only two-character
# words with their facts.
echo "[bench] memory_bench --messages 100000 --language ja" >&2
"$root/build/bench/bench/memory_bench" --messages 100000 --language ja \
  --dir "$tmp/tmcra-memory-bench-ja" | tee -a "$here/results/memory-$stamp.jsonl"
rm -rf "$tmp/tmcra-memory-bench-ja"

echo "[bench] side by side with @modelcontextprotocol/server-memory on the 10k corpus" >&2
"$root/build/bench/bench/memory_bench" --messages 10000 --dir "$tmp/tmcra-corpus-10k" \
  --export "$tmp/tmcra-corpus-10k.jsonl" >/dev/null
ensure_node_modules
node "$here/recall_side_by_side.mjs" --corpus "$tmp/tmcra-corpus-10k.jsonl" \
  --bin "$root/build/bench/src/app/tmcra-mcp"
rm -rf "$tmp/tmcra-corpus-10k" "$tmp/tmcra-corpus-10k.jsonl"
