#!/usr/bin/env bash
# One-command set-up for a fresh Debian 12 machine (as root, apt reachable). Idempotent: what is
# already installed or built is left alone, so a second run is fast.
#
#   bash scripts/bootstrap.sh serve   install what is missing, build (release), start tmcra-mcp on
#                                     stdio with its embedded default
#   bash scripts/bootstrap.sh test    install what is missing, build, run the whole test suite
#                                     (fuzz smoke; unit, integration and peers under ASan+UBSan,
#                                     with the Debian package built and installed into a
#                                     debootstrap root; then again under ThreadSanitizer)
#
# In `serve` mode everything but the server's own JSON-RPC goes to stderr, so the command can be
# used as an MCP host's server command.
set -euo pipefail

mode="${1:-}"
case "$mode" in
  serve|test) ;;
  *) echo "usage: bash scripts/bootstrap.sh serve|test" >&2; exit 2 ;;
esac

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

if [ "$mode" = serve ]; then
  exec 3>&1 1>&2   # keep stdout for JSON-RPC only
fi

log() { printf '[bootstrap] %s\n' "$*" >&2; }

build_packages=(build-essential cmake ninja-build pkg-config libsqlite3-dev libcurl4-openssl-dev
                libssl-dev nlohmann-json3-dev libspdlog-dev libfmt-dev catch2 ca-certificates
                zlib1g-dev libtomlplusplus-dev libcpp-httplib-dev
                libstemmer-dev wordnet-base   # stems and WordNet's synonyms (docs/recall.md)
                libhnswlib-dev                # the vectors' approximate index (docs/recall.md)
                libpq-dev)                    # tmcra-memd on PostgreSQL (docs/memd.md)
test_packages=(clang-14 libclang-rt-14-dev clang-format-14 universal-ctags openssl util-linux chromium postgresql-15 debootstrap lintian)  # postgresql-15: the private cluster the memd tests start (tests/support/pg_cluster.sh); clang-format-14: the format test; universal-ctags: the function_sizes test; openssl: test certificates (memd); util-linux: unshare and nsenter (memd's full-disk test); chromium: the console's browser test (playwright-core drives it); debootstrap, lintian: the Debian package's test (tests/packaging/debian_package.mjs)

apt_updated=0
install_missing() {
  local missing=()
  local pkg
  for pkg in "$@"; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" \
      || missing+=("$pkg")
  done
  [ "${#missing[@]}" -eq 0 ] && return 0
  if [ "$(id -u)" -ne 0 ]; then
    log "missing packages: ${missing[*]} (run as root, or install them with apt-get)"
    exit 1
  fi
  if [ "$apt_updated" -eq 0 ]; then
    log "apt-get update"
    apt-get update -qq
    apt_updated=1
  fi
  log "installing: ${missing[*]}"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
}

ensure_node() {
  # The machine image may carry a newer Node.js than Debian's; keep it if present.
  if ! command -v node >/dev/null 2>&1; then
    install_missing nodejs npm
  elif ! command -v npm >/dev/null 2>&1; then
    install_missing npm
  fi
}

# npm ci only when the lock file changed since the last install.
ensure_npm_deps() {
  local dir="$1"
  local stamp="$dir/node_modules/.tmcra-lock-sha256"
  local want
  want="$(sha256sum "$dir/package-lock.json" | cut -d' ' -f1)"
  if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
    return 0
  fi
  log "npm ci in $dir"
  (cd "$dir" && npm ci --no-audit --no-fund --loglevel=error >&2)
  echo "$want" > "$stamp"
}

install_missing "${build_packages[@]}"

if [ "$mode" = serve ]; then
  cmake --preset release >/dev/null
  cmake --build --preset release
  log "starting tmcra-mcp (embedded memory); it waits for an MCP client on stdin"
  exec "$root/build/release/src/app/tmcra-mcp" 1>&3 3>&-
fi

install_missing "${test_packages[@]}"
ensure_node
ensure_npm_deps "$root/tests/peer"
ensure_npm_deps "$root/packaging/mcpb"   # the mcpb CLI: mcpb_bundle.mjs packs and checks the bundle

jobs="$(nproc)"
# Configures a preset; a tree an earlier version configured with another compiler is
# configured afresh (CMake would otherwise drop its cache and keep none of the preset's
# settings: no sanitizers, no -Werror).
configure() {
  local preset="$1" compiler="$2" cache="build/$1/CMakeCache.txt"
  if [ -f "$cache" ] && ! grep -q "^CMAKE_CXX_COMPILER:[A-Z]*=\(.*/\)\{0,1\}$compiler\$" "$cache"; then
    log "configuring $preset afresh (its tree was made with another compiler)"
    cmake --preset "$preset" --fresh >/dev/null
  else
    cmake --preset "$preset" >/dev/null
  fi
}

# Three builds (docs/architecture.md, "Test builds"): ci is clang-14 with ASan+UBSan and holds
# the fuzz targets too; tsan is gcc 12, so both compilers build everything with -Werror; the
# package tree (gcc release, hardened) is what the Debian package's test packs and installs,
# and its tmcra-mcp drives the two stress tests. All three are built before any test runs, so
# a compile error of either compiler shows first.
log "building the ci preset (clang-14 Debug, ASan+UBSan, -Werror, with the libFuzzer targets)"
configure ci clang++-14
cmake --build --preset ci -j "$jobs"

log "building the tsan preset (gcc Debug, ThreadSanitizer, -Werror)"
configure tsan g++
cmake --build --preset tsan -j "$jobs"

log "building the package preset (gcc release, hardened: the Debian package's test, and the stress tests' tmcra-mcp)"
configure package g++
cmake --build --preset package -j "$jobs"
export TMCRA_STRESS_BIN="$root/build/package/src/app/tmcra-mcp"
export TMCRA_RELEASE_BIN="$TMCRA_STRESS_BIN"   # the MCPB bundle's test packs what ships
export TMCRA_REQUIRE_PACKAGE_TEST=1   # the Debian package's test fails, never skips, here

log "fuzz smoke (three targets, 40 s each, two at a time)"
ctest --preset fuzz
log "unit, integration and peer tests (ASan + UBSan)"
ctest --preset ci

# Every process of the tsan run (tests and the servers they start) writes its reports to
# build/tsan/tsan-report.<pid> (CMakePresets.json), so a race in a child process whose exit
# code a test does not look at still fails the run.
log "unit, integration and peer tests again under ThreadSanitizer (not the stress tests, which drive the package tree's release tmcra-mcp, nor the heavy end-to-end tests, label e2e)"
rm -f build/tsan/tsan-report.*
tsan_rc=0
ctest --preset tsan || tsan_rc=$?
if compgen -G "build/tsan/tsan-report.*" >/dev/null; then
  log "ThreadSanitizer reported (a race, or a fatal error of its own):"
  cat build/tsan/tsan-report.* >&2
  exit 1
fi
exit "$tsan_rc"
