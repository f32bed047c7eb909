#!/usr/bin/env bash
# One command for the remote-memory benchmark (issue #5):
#
#   bash bench/run_remote.sh [remote_latency.mjs options]
#       e.g. bash bench/run_remote.sh --calls 200 --turns 60 --seconds 5 --delivery-items 2000
#
# Builds the Release `bench` preset (tmcra-mcp, tmcra-memd, memory_bench, lifecycle_bench,
# remote_bench), installs bench/node_modules with `npm ci` if it is missing, makes a test CA and
# a certificate for 127.0.0.1 with openssl in a temp dir, builds a 100k-message store with
# memory_bench (scope "bench"; its paraphrased questions are the recall queries), then runs
# bench/remote_latency.mjs, which measures in one run against a real tmcra-memd over HTTPS:
# the floor (plain libcurl keep-alive POST .../recall) against tmcra_recall through tmcra-mcp
# (raw pipe and SDK client, same body, same questions), tmcra-memd's recall throughput with 16
# concurrent clients, tmcra_turn_commit over HTTPS, and delivery of 10,000 outbox items over
# HTTPS (ingest/batch). Results: a Markdown summary on stdout, every sample in
# bench/results/remote-*.json (git-ignored).
#
# Environment: STORE_MESSAGES (default 100000), WORK (scratch directory, default $TMPDIR or
# /tmp), JOBS (build parallelism, default nproc). Needs about 250 MB in WORK. Nothing leaves
# 127.0.0.1; the keys and certificates live and die in the temp dir.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"
cd "$root"
log() { printf '[remote] %s\n' "$*" >&2; }
# shellcheck source=bench/lib.sh
. "$here/lib.sh"

messages="${STORE_MESSAGES:-100000}"
work="$(mktemp -d "${WORK:-${TMPDIR:-/tmp}}/tmcra-remote-XXXXXX")"
chmod 700 "$work"
trap 'rm -rf "$work"' EXIT

for tool in openssl node; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    log "$tool not found (bash bench/run.sh installs Node.js on Debian)"
    exit 1
  fi
done

log "building the bench preset (Release)"
cmake --preset bench >/dev/null
cmake --build --preset bench -j "${JOBS:-$(nproc)}" \
  --target tmcra-mcp tmcra-memd memory_bench lifecycle_bench remote_bench >&2

ensure_node_modules

# A CA and a leaf for IP 127.0.0.1 signed by it (as tests/peer/remote_lib.mjs makes them).
log "making a test CA and a certificate for 127.0.0.1 (openssl)"
pki="$work/pki"
mkdir -m 700 "$pki"
(
  cd "$pki"
  openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj '/CN=tmcra bench CA' \
    -keyout ca.key -out ca.pem -addext 'basicConstraints=critical,CA:TRUE' \
    -addext 'keyUsage=critical,keyCertSign,cRLSign' 2>/dev/null
  openssl req -newkey rsa:2048 -nodes -subj '/CN=127.0.0.1' -keyout leaf.key -out leaf.csr 2>/dev/null
  printf 'subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n' > leaf.ext
  openssl x509 -req -in leaf.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 2 \
    -extfile leaf.ext -out leaf.pem 2>/dev/null
  chmod 600 ca.key leaf.key
)

bin="$root/build/bench"
build_store "$bin" "$messages" "$work"

node "$here/remote_latency.mjs" --bin "$bin/src/app/tmcra-mcp" --memd "$bin/memd/tmcra-memd" \
  --remote-driver "$bin/bench/remote_bench" --lifecycle-driver "$bin/bench/lifecycle_bench" \
  --work "$work/run" --certs "$pki" --store "$work/store" --questions "$work/questions.jsonl" \
  --store-report "$work/store-report.json" "$@"
