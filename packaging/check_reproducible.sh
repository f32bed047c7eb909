#!/usr/bin/env bash
# Builds the packages twice from one commit, in the same build path, and checks that the two
# .deb files (and the two tarballs) are byte-identical (packaging/README.md, "Reproducible").
#
#   bash packaging/check_reproducible.sh [COMMIT]     (default HEAD; about 10 minutes)
#
# Each build is a fresh clone of COMMIT at /tmp/tmcra-reproducible/src, configured with the
# package preset and packed by CPack, with SOURCE_DATE_EPOCH set to the commit's time (the
# files' times in the archives, the man pages' and the Debian changelog's dates). It is not
# part of the test command: two full release builds do not fit its time.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
commit="$(git -C "$repo" rev-parse "${1:-HEAD}")"
work=/tmp/tmcra-reproducible
src="$work/src"
export SOURCE_DATE_EPOCH
SOURCE_DATE_EPOCH="$(git -C "$repo" log -1 --format=%ct "$commit")"

build_once() {
  local out="$1"
  rm -rf "$src"
  git clone -q "$repo" "$src"
  git -C "$src" checkout -q "$commit"
  (cd "$src" && cmake --preset package >/dev/null && cmake --build --preset package >/dev/null &&
   cpack --preset package >/dev/null)
  mkdir -p "$out"
  cp "$src"/build/package/*.deb "$src"/build/package/*.tar.gz "$out"/
}

rm -rf "$work"
mkdir -p "$work"
echo "building $commit twice in $src (SOURCE_DATE_EPOCH=$SOURCE_DATE_EPOCH)" >&2
build_once "$work/first"
build_once "$work/second"

status=0
for first in "$work"/first/*; do
  name="$(basename "$first")"
  if cmp -s "$first" "$work/second/$name"; then
    echo "identical: $name $(sha256sum "$first" | cut -d' ' -f1)"
  else
    echo "DIFFERENT: $name" >&2
    status=1
    if command -v diffoscope >/dev/null; then
      diffoscope "$first" "$work/second/$name" >&2 || true
    fi
  fi
done
exit "$status"
