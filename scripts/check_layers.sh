#!/usr/bin/env bash
# Checks the layers of docs/architecture.md against the tree: every #include of production code
# and every library dependency in CMake runs down the ordered list below, never up or sideways.
#
# LAYERS lists the layers bottom up; one line is one layer, and the folders on a line are
# libraries of that layer that do not depend on each other. A file belongs to the longest folder
# of the list that holds it (src/app before src). Read by top-level folder, the list is
#   base -> filter -> memory, queue, receipts -> src (the MCP application) -> src/app, setup, memd
# and inside src it orders the libraries, which is the library-level view.
#
# Also checked: a private header (*_impl.h) is included only from its own folder; nothing
# includes with "../", production code never includes tests/, and
# third-party C headers stay out of our headers.
#
# Usage: check_layers.sh [ROOT]   (ROOT defaults to the repository; tests plant violations in a
# copy of the tree and expect this script to fail.)
set -euo pipefail
root="${1:-$(dirname "${BASH_SOURCE[0]}")/..}"
cd "$root"

LAYERS=(
  "base"
  "filter"
  "memory queue receipts"
  "src/mcp src/config"
  "src/api src/controls"
  "src/tools"
  "src/hooks"
  "src/app setup memd"
)

declare -A rank=()
for i in "${!LAYERS[@]}"; do
  for folder in ${LAYERS[$i]}; do rank[$folder]=$i; done
done

# Sets OWNER to the folder of the list that holds PATH (the longest match), or to nothing;
# remembered per directory.
declare -A owner_of=()
owner() {
  local dir="${1%/*}" best="" folder
  if [ -z "${owner_of[$dir]+set}" ]; then
    for folder in "${!rank[@]}"; do
      if [[ "$dir/" == "$folder"/* && ${#folder} -gt ${#best} ]]; then best="$folder"; fi
    done
    owner_of[$dir]="$best"
  fi
  OWNER="${owner_of[$dir]}"
}

# OK when FROM (a folder of the list) may depend on TO: itself or any lower layer.
may_depend() {
  local from="$1" to="$2"
  [ "$from" = "$to" ] || [ "${rank[$to]}" -lt "${rank[$from]}" ]
}

status=0
production=(base filter memory queue receipts src setup memd)

# 1. Includes, file by file. base/version.h is generated into the build tree under that name.
while IFS= read -r hit; do
  file="${hit%%:*}"
  inc="${hit#*#include \"}"; inc="${inc%%\"*}"
  owner "$file"; from="$OWNER"
  owner "$inc"; to="$OWNER"
  if [ -z "$from" ]; then
    echo "layering: $file is in no layer of scripts/check_layers.sh"
    status=1
  elif [ -z "$to" ]; then
    echo "layering: $file includes \"$inc\", which is in no layer"
    status=1
  elif ! may_depend "$from" "$to"; then
    echo "layering: $file ($from, layer $((rank[$from] + 1))) includes \"$inc\"" \
         "($to, layer $((rank[$to] + 1))): includes run down only"
    status=1
  fi
done < <(grep -rnE '^#include "' "${production[@]}" --include='*.h' --include='*.cc' || true)

# 2. Library dependencies: a tmcra_library's DEPS and PRIVATE_DEPS name only libraries of its
# own folder or of lower layers.
declare -A lib_folder=()
while IFS= read -r cm; do
  dir="$(dirname "$cm")"
  while IFS= read -r lib; do lib_folder[$lib]="$dir"; done \
    < <(grep -oE 'tmcra_library\(tmcra_[a-z_]+' "$cm" | sed 's/tmcra_library(tmcra_//')
done < <(find "${production[@]}" -name CMakeLists.txt)
while IFS= read -r cm; do
  dir="$(dirname "$cm")"
  owner "$dir/x"; from="$OWNER"
  [ -n "$from" ] || continue
  for dep in $(grep -oE 'tmcra::[a-z_]+' "$cm" | sed 's/tmcra:://' | sort -u); do
    [ -n "${lib_folder[$dep]:-}" ] || continue   # warnings, sanitizers: build options
    owner "${lib_folder[$dep]}/x"; to="$OWNER"
    if ! may_depend "$from" "$to"; then
      echo "layering: $cm ($from) links tmcra::$dep ($to): libraries depend down only"
      status=1
    fi
  done
done < <(find "${production[@]}" -name CMakeLists.txt)

# 3. A header named *_impl.h is a module's private half (memory/engine_impl.h behind
# memory/engine.h): only files of its own folder include it.
while IFS= read -r hit; do
  file="${hit%%:*}"
  inc="${hit#*#include \"}"; inc="${inc%%\"*}"
  if [ "$(dirname "$file")" != "$(dirname "$inc")" ]; then
    echo "layering: $file includes \"$inc\", a private header of $(dirname "$inc")/"
    status=1
  fi
done < <(grep -rnE '^#include "[^"]*_impl\.h"' "${production[@]}" tests --include='*.h' \
           --include='*.cc' --exclude-dir=node_modules || true)

# tests/ holds the peer tests' npm packages (tests/peer/node_modules), whose C++ is not ours.
if grep -rnE '^#include "\.\./' --exclude-dir=node_modules "${production[@]}" tests \
     2>/dev/null; then
  echo "layering: includes are written from the repository root, never with ../"
  status=1
fi
if grep -rnE '^#include "tests/' "${production[@]}" 2>/dev/null; then
  echo "layering: production code must not include tests/"
  status=1
fi
if grep -rnE '^#include <(curl/|sqlite3\.h|httplib\.h|libpq-fe\.h)' \
     --include='*.h' "${production[@]}" 2>/dev/null; then
  echo "layering: third-party C headers belong in adapter .cc files, not headers"
  status=1
fi

if [ "$status" -eq 0 ]; then echo "layering: ok"; fi
exit "$status"
