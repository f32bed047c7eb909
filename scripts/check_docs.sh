#!/usr/bin/env bash
# Checks the docs against the tree: docs/benchmarks.md stays under 400 lines; its charts are
# what bench/charts.mjs draws from bench/results.json; and every image and every relative link
# to a file in README.md, SECURITY.md, CHANGELOG.md and docs/*.md names a file that exists.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
status=0

lines=$(wc -l <docs/benchmarks.md)
if [ "$lines" -ge 400 ]; then
  echo "docs: docs/benchmarks.md has $lines lines (under 400: current results only)"
  status=1
fi

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
node bench/charts.mjs --out "$work"
for svg in "$work"/*.svg; do
  committed="docs/benchmarks/$(basename "$svg")"
  if ! cmp -s "$svg" "$committed"; then
    echo "docs: $committed differs from what bench/charts.mjs draws (run: node bench/charts.mjs)"
    status=1
  fi
done

for doc in README.md SECURITY.md CHANGELOG.md docs/*.md; do
  dir="$(dirname "$doc")"
  while IFS= read -r target; do
    target="${target%%#*}"
    [ -n "$target" ] || continue
    case "$target" in http://* | https://* | mailto:*) continue ;; esac
    if [ ! -e "$dir/$target" ]; then
      echo "docs: $doc links to $target, which does not exist"
      status=1
    fi
  done < <(grep -oE '\]\([^) ]+\)' "$doc" | sed -E 's/^\]\(//; s/\)$//')
done

if [ "$status" -eq 0 ]; then echo "docs: ok"; fi
exit "$status"
