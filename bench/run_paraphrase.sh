#!/usr/bin/env bash
# One command for the paraphrase benchmark and the cost of the lexical expansion:
#
#   bash bench/run_paraphrase.sh
#
# Builds the Release `bench` preset, then in one run:
#   1. bench/paraphrase_bench: evidence-hit@8 of the stem, synonym and control question sets
#      with recall as before (no stems, no synonyms), with stems, and with stems and synonyms;
#   2. bench/memory_bench at 100k messages, fresh, with the stem index off and on: ingest
#      throughput and store size side by side;
#   3. recall latency at 100k messages on one store, the two configurations alternating three
#      times (the machine is shared: the median of three pairs).
# Results: one JSON line each on stdout and in bench/results/paraphrase-*.jsonl.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"
cd "$root"
tmp="${TMPDIR:-/tmp}"
cmake --preset bench >/dev/null
cmake --build --preset bench --target paraphrase_bench memory_bench >&2
mkdir -p "$here/results"
out="$here/results/paraphrase-$(date -u +%Y-%m-%dT%H-%M-%SZ).jsonl"
bin="$root/build/bench/bench"

echo "[bench] paraphrase_bench" >&2
"$bin/paraphrase_bench" --dir "$tmp/tmcra-paraphrase-bench" | tee -a "$out"
rm -rf "$tmp/tmcra-paraphrase-bench"

for cfg in "none 0" "auto 1"; do
  set -- $cfg
  echo "[bench] memory_bench --messages 100000 --stem-language $1 --synonyms $2" >&2
  "$bin/memory_bench" --messages 100000 --questions 300 --stem-language "$1" --synonyms "$2" \
    --dir "$tmp/tmcra-paraphrase-100k-$1" | tee -a "$out"
  rm -rf "$tmp/tmcra-paraphrase-100k-$1"
done

echo "[bench] recall latency at 100k, alternating" >&2
store="$tmp/tmcra-paraphrase-100k-latency"
"$bin/memory_bench" --messages 100000 --questions 10 --dir "$store" >/dev/null
for round in 1 2 3; do
  for cfg in "none 0" "auto 1"; do
    set -- $cfg
    "$bin/memory_bench" --messages 100000 --questions 300 --stem-language "$1" --synonyms "$2" \
      --dir "$store" --reuse 1 | sed "s/^{/{\"latency_round\":$round,/" | tee -a "$out"
  done
done
rm -rf "$store"
echo "[bench] results in $out" >&2
