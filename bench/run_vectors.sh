#!/usr/bin/env bash
# One command for the vectors' cost at scale (docs/benchmarks.md, "Vectors"):
#
#   bash bench/run_vectors.sh [MESSAGES]     (default 100000)
#
# Builds the Release `bench` preset and runs bench/vector_bench: store size without and with
# 384-dimension vectors, the time to embed them (an instant in-process embedder: the engine's
# own cost), the HNSW graph's build time, resident memory, and recall latency with exact
# vector search against the graph, alternating on one store, beside the words-only floor.
# Result: one JSON line on stdout and in bench/results/vectors-*.jsonl.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"
cd "$root"
messages="${1:-100000}"
tmp="${TMPDIR:-/tmp}"
cmake --preset bench >/dev/null
cmake --build --preset bench --target vector_bench >&2
mkdir -p "$here/results"
out="$here/results/vectors-$(date -u +%Y-%m-%dT%H-%M-%SZ).jsonl"
"$root/build/bench/bench/vector_bench" --messages "$messages" --queries 300 \
  --dir "$tmp/tmcra-vector-bench" | tee -a "$out"
rm -rf "$tmp/tmcra-vector-bench"
