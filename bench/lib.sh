# Shared by the bench/run*.sh scripts, which source it after setting `here` (this folder) and
# defining `log`.

# bench/node_modules: npm ci when absent or when the lock file changed since the last install.
ensure_node_modules() {
  local stamp="$here/node_modules/.tmcra-lock-sha256"
  local want
  want="$(sha256sum "$here/package-lock.json" | cut -d' ' -f1)"
  if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
    log "npm ci --prefix bench"
    npm ci --prefix "$here" --no-audit --no-fund --loglevel=error >&2
    echo "$want" > "$stamp"
  fi
}

# build_store BIN MESSAGES WORK: a MESSAGES-message store built by memory_bench (scope "bench")
# in WORK/store (its memory.db is exactly the file `tmcra-memd serve --data-dir WORK/store`
# serves), its report in WORK/store-report.json, and its paraphrased questions (the recall
# queries) in WORK/questions.jsonl.
build_store() {
  local bin="$1" messages="$2" work="$3"
  log "building a ${messages}-message store with memory_bench (scope \"bench\")"
  "$bin/bench/memory_bench" --messages "$messages" --dir "$work/store" \
    --export "$work/corpus.jsonl" > "$work/store-report.json"
  grep '"question"' "$work/corpus.jsonl" > "$work/questions.jsonl"
  rm -f "$work/corpus.jsonl"
}
