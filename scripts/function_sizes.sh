#!/usr/bin/env bash
# Counts the lines of every function (and lambda-free method body) in production code with
# universal-ctags' end lines, and checks the limits of docs/architecture.md ("Function sizes"):
# no function over 100 lines unless the line just above it says why it reads best whole
# (a comment holding "reads best whole"), and at most 20 over 60 lines.
#
# Usage: function_sizes.sh [--list N]   prints the functions over N lines (default 60), longest
# first, then the counts; exits 1 when a limit is broken.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
show=60
if [ "${1:-}" = "--list" ]; then show="${2:-60}"; fi

production=(base filter memory queue receipts src setup memd)
mapfile -t files < <(git ls-files "${production[@]}" | grep -E '\.(cc|h)$')

# name<TAB>file<TAB>start<TAB>end for every function definition.
ctags --fields=+ne --c++-kinds=f --kinds-c++=f -o - "${files[@]}" 2>/dev/null |
  awk -F'\t' '{
    start = ""; end = ""; scope = "";
    for (i = 4; i <= NF; i++) {
      if ($i ~ /^line:/) start = substr($i, 6);
      if ($i ~ /^end:/) end = substr($i, 5);
      if ($i ~ /^(class|struct|namespace):/) { scope = $i; sub(/^[a-z]+:/, "", scope); }
    }
    if (start != "" && end != "") {
      name = $1;
      if (scope != "" && scope !~ /__anon/) { n = split(scope, parts, "::"); name = parts[n] "::" $1; }
      print name "\t" $2 "\t" start "\t" end;
    }
  }' | sort -u >"${TMPDIR:-/tmp}/function_sizes.$$"
trap 'rm -f "${TMPDIR:-/tmp}/function_sizes.$$"' EXIT

over60=0; over100=0; unexplained=0
report=""
while IFS=$'\t' read -r name file start end; do
  lines=$((end - start + 1))
  [ "$lines" -gt 60 ] || continue
  over60=$((over60 + 1))
  note=""
  if [ "$lines" -gt 100 ]; then
    over100=$((over100 + 1))
    above="$(sed -n "$((start - 1))p" "$file")"
    if grep -q 'reads best whole' <<<"$above"; then
      note="  (reads best whole)"
    else
      unexplained=$((unexplained + 1))
      note="  OVER 100 WITHOUT A REASON"
    fi
  fi
  if [ "$lines" -gt "$show" ]; then report+="$lines"$'\t'"$name"$'\t'"$file:$start$note"$'\n'; fi
done <"${TMPDIR:-/tmp}/function_sizes.$$"

printf '%s' "$report" | sort -t$'\t' -k1,1nr | column -t -s$'\t'
echo "functions over 60 lines: $over60 (limit 20); over 100: $over100, of which without a" \
     "'reads best whole' comment: $unexplained (limit 0)"
[ "$over60" -le 20 ] && [ "$unexplained" -eq 0 ]
