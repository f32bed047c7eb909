#!/usr/bin/env bash
# Checks the layering rules of docs/architecture.md against the #include lines of the tree:
# each folder may include only the folders listed for it, nothing includes with "../",
# production code never includes tests/, and third-party C headers stay out of our headers.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

declare -A allowed=(
  [src/common]="src/common"
  [filter]="filter"
  [src/db]="src/common src/db"
  [src/mcp]="src/common src/mcp"
  [src/config]="src/common filter src/config"
  [src/api]="src/common src/api src/config memory"
  [src/controls]="src/common src/controls"
  [queue]="src/common src/db queue"
  [receipts]="src/common receipts"
  [memory]="src/common filter src/db memory"
  [memory/server]="src/common filter src/db src/api src/config memory"
  [src/tools]="src/common filter src/mcp src/config src/api src/controls queue receipts src/tools"
  [src/hooks]="src/common filter src/mcp src/config src/api src/controls queue src/tools src/hooks"
  [setup]="src/common setup"
  [src/app]="src filter memory queue receipts setup"
)

status=0
for folder in "${!allowed[@]}"; do
  [ -d "$folder" ] || continue
  while IFS= read -r hit; do
    file="${hit%%:*}"
    # A file in a sub-folder with its own entry (memory/server) obeys that entry only.
    for sub in "${!allowed[@]}"; do
      if [ "$sub" != "$folder" ] && [[ "$sub" == "$folder"/* && "$file" == "$sub"/* ]]; then
        continue 2
      fi
    done
    inc="$(sed -E 's/.*#include "([^"]+)".*/\1/' <<<"$hit")"
    ok=0
    for prefix in ${allowed[$folder]}; do
      case "$inc" in "$prefix"/*) ok=1 ;; esac
    done
    case "$inc" in src/common/version.h) ok=1 ;; esac
    if [ "$ok" -eq 0 ]; then
      echo "layering: $file includes \"$inc\" (allowed for $folder: ${allowed[$folder]})"
      status=1
    fi
  done < <(grep -rnE '^#include "' "$folder" --include='*.h' --include='*.cc' || true)
done

if grep -rnE '^#include "\.\./' src queue receipts memory setup tests 2>/dev/null; then
  echo "layering: includes are written from the repository root, never with ../"
  status=1
fi
if grep -rnE '^#include "tests/' src queue receipts memory setup 2>/dev/null; then
  echo "layering: production code must not include tests/"
  status=1
fi
if grep -rnE '^#include <(curl/|sqlite3\.h|httplib\.h|libpq-fe\.h)' \
     --include='*.h' src queue receipts memory setup 2>/dev/null; then
  echo "layering: third-party C headers belong in adapter .cc files, not headers"
  status=1
fi

if [ "$status" -eq 0 ]; then echo "layering: ok"; fi
exit "$status"
