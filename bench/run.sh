#!/usr/bin/env bash
# One command for the startup / call-latency / memory benchmark:
#
#   bash bench/run.sh [startup_latency.mjs options]     e.g. bash bench/run.sh --starts 50 --calls 500
#
# Installs what is missing (Node.js from Debian if there is none; bench/node_modules with `npm ci`
# when absent or when package-lock.json changed), builds the Release `bench` preset, then runs
# bench/startup_latency.mjs. Works on a fresh Debian 12 as root once `scripts/bootstrap.sh` has
# installed the build dependencies. Only the npm registry is contacted (by npm ci), and only on
# the first run; the servers talk to the script over pipes.
#
# Environment: JOBS (build parallelism, default nproc).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"
cd "$root"

log() { printf '[bench] %s\n' "$*" >&2; }
# shellcheck source=bench/lib.sh
. "$here/lib.sh"

for tool in cmake ninja c++; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    log "'$tool' not found: install the build dependencies first (bash scripts/bootstrap.sh test, or see README)"
    exit 1
  fi
done

# Node.js: keep a newer one if the machine has it (as scripts/bootstrap.sh does); else Debian's.
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
  if [ "$(id -u)" -ne 0 ]; then
    log "node/npm missing: run as root or install Node.js >= 18 and npm"
    exit 1
  fi
  log "installing nodejs and npm from Debian"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends nodejs npm >&2
fi
node_major="$(node -p 'process.versions.node.split(".")[0]')"
if [ "$node_major" -lt 18 ]; then
  log "Node.js $(node --version) is too old: @modelcontextprotocol/sdk needs >= 18"
  exit 1
fi

ensure_node_modules

log "building the bench preset (Release)"
cmake --preset bench >/dev/null
cmake --build --preset bench -j "${JOBS:-$(nproc)}" --target tmcra-mcp >&2

log "running bench/startup_latency.mjs $*"
exec node "$here/startup_latency.mjs" --build-dir "$root/build/bench" "$@"
