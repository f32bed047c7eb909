#!/usr/bin/env bash
# scripts/check_layers.sh must fail on a planted upward include, a sideways include between
# libraries of one layer, and an upward library dependency, each planted alone in a copy of the
# production tree; and pass on the unchanged copy.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

fresh_copy() {
  rm -rf "$work/tree"
  mkdir -p "$work/tree"
  # tests/ without its node_modules (the pinned peers: hundreds of MB, no layer of ours)
  (cd "$repo" && tar -c --exclude=node_modules base filter memory queue receipts src setup memd \
     tests | tar -x -C "$work/tree")
}

expect_failure() {
  local what="$1" want="$2" out
  if out="$(bash "$repo/scripts/check_layers.sh" "$work/tree" 2>&1)"; then
    echo "FAIL: check_layers.sh passed with $what"
    exit 1
  fi
  if ! grep -qF "$want" <<<"$out"; then
    echo "FAIL: check_layers.sh did not name $what; it said:"
    echo "$out"
    exit 1
  fi
  echo "ok: $what refused"
}

fresh_copy
bash "$repo/scripts/check_layers.sh" "$work/tree" >/dev/null
echo "ok: the unchanged tree passes"

echo '#include "src/tools/tool_support.h"' >>"$work/tree/base/clock.cc"
expect_failure "an include from base up to src/tools" 'base/clock.cc (base, layer 1) includes "src/tools/tool_support.h"'

fresh_copy
echo '#include "memd/memd_server.h"' >>"$work/tree/src/api/http_wire.h"
expect_failure "an include from src/api up to memd" 'src/api/http_wire.h (src/api'

fresh_copy
echo '#include "memory/engine.h"' >>"$work/tree/queue/outbox.cc"
expect_failure "a sideways include from queue to memory" 'queue/outbox.cc (queue'

fresh_copy
sed -i 's/DEPS tmcra::common/DEPS tmcra::tools tmcra::common/' "$work/tree/receipts/CMakeLists.txt"
expect_failure "an upward library dependency" 'receipts/CMakeLists.txt (receipts) links tmcra::tools'

fresh_copy
echo '#include "memory/engine_impl.h"' >>"$work/tree/src/api/embedded_memory_api.cc"
expect_failure "a private header included from another folder" 'a private header of memory/'
