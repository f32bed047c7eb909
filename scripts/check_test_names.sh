#!/usr/bin/env bash
# Catch2 test names become CTest names through catch_discover_tests, which passes them around as
# CMake lists: a ';' splits a name, and an unbalanced '[' or ']' glues the following names into
# one test that runs none of them (it happened once: eight cases ran as one empty entry). This
# refuses such names in tests/.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
status=0
while IFS= read -r hit; do
  file="${hit%%:*}"
  name="$(sed -E 's/.*TEST_CASE\("(([^"\\]|\\.)*)".*/\1/' <<<"$hit")"
  opens="${name//[^\[]/}"
  closes="${name//[^\]]/}"
  if [[ "$name" == *";"* || ${#opens} -ne ${#closes} ]]; then
    echo "test names: $file: \"$name\" has a ';' or unbalanced brackets (CTest would mangle it)"
    status=1
  fi
done < <(grep -rnE 'TEST_CASE\("' tests --include='*.cc' || true)
if [ "$status" -eq 0 ]; then echo "test names: ok"; fi
exit "$status"
