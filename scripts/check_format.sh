#!/usr/bin/env bash
# Checks that every C and C++ file of the repository is formatted by .clang-format with
# clang-format 14 (Debian's clang-format-14, the version the tree was formatted with; another
# version may format some lines differently). To format: the same list with -i.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
format="$(command -v clang-format-14 || true)"
if [ -z "$format" ]; then
  echo "format: clang-format-14 is not installed (apt-get install clang-format-14)"
  exit 1
fi
mapfile -t files < <(find base filter memory queue receipts src setup memd tests bench \
  -path '*/node_modules' -prune -o \( -name '*.cc' -o -name '*.h' -o -name '*.c' \) -print | sort)
"$format" --dry-run -Werror "${files[@]}"
echo "format: ok (${#files[@]} files)"
