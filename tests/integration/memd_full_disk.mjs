#!/usr/bin/env node
// memd_full_disk.mjs — tmcra-memd on a disk that fills up, then has room again.
//
//   node tests/integration/memd_full_disk.mjs <tmcra-memd>
//
// The data directory is a 4 MiB tmpfs mounted in a private mount namespace (`unshare -m`, as
// root) for the server alone. Ingests of 64 KB fill it: a write that finds no room is a
// retryable 503 with Retry-After (never a 500), and /readyz answers 503 while writes fail.
// The tmpfs is then grown from outside (`nsenter -m ... mount -o remount`): /readyz is 200
// again, and every job accepted before (those whose run the full disk interrupted too)
// succeeds, none failed or left running. Bounded: 200 ingests at most, about 15 s.
import fs from 'node:fs';
import path from 'node:path';

import { Runner, assert, tmpDir, serverEnv, run, sleep } from '../peer/lib.mjs';
import { makeCertificate, startMemd, stopMemd, request } from './memd_lib.mjs';

const BIN = process.argv[2] ? path.resolve(process.argv[2]) : '';
if (!BIN || !fs.existsSync(BIN)) {
  console.error('usage: node memd_full_disk.mjs <tmcra-memd binary>');
  console.log('0 passed, 1 failed');
  process.exit(2);
}

const r = new Runner('memd_full_disk', { budgetMs: 150_000 });
const TMP = tmpDir('tmcra-memd-full-');
const ENV = serverEnv();
const MNT = path.join(TMP, 'mnt');
const KEY_FILE = path.join(TMP, 'key.txt');
let srv;
r.onCleanup(async () => {
  if (srv && !srv.exit) { srv.proc.kill('SIGKILL'); await srv.exited; }
});

// Mounts the tmpfs over MNT in a namespace of its own, makes a key there, then runs memd.
const WRAPPER = ['unshare', '-m', '--propagation', 'private', 'sh', '-c',
  'mount -t tmpfs -o size=4m,mode=0700 tmpfs "$0" && "$1" keys create --data-dir "$0/data" > "$KEY_FILE" && exec "$@"',
  MNT];

let seq = 0;
function bigIngest() {
  seq += 1;
  const words = Array.from({ length: 9000 }, (_, i) => `w${seq}x${i}`).join(' ');  // about 64 KB
  return { session_id: 'full', messages: [{ message_id: `m${seq}`, role: 'user', content: words,
    timestamp: '2026-07-15T00:00:00Z' }] };
}

await r.test('a full disk: ingest 503 + Retry-After, readyz 503; with room again: ready, every accepted job succeeds', async () => {
  if (process.getuid() !== 0) {
    console.log('# not root: a private mount namespace cannot be made here; nothing to check');
    return;
  }
  fs.mkdirSync(MNT, { mode: 0o700 });
  const tlsFiles = await makeCertificate(TMP);
  srv = await startMemd(BIN, ['--data-dir', path.join(MNT, 'data'), '--tls-cert', tlsFiles.cert,
    '--tls-key', tlsFiles.key], { env: { ...ENV, KEY_FILE }, prefix: WRAPPER });
  const key = fs.readFileSync(KEY_FILE, 'utf8').trim();
  const port = srv.port;
  const ca = tlsFiles.ca;
  const jobs = [];
  let full;
  for (let i = 0; i < 200 && !full; i += 1) {
    const res = await request(port, ca, 'POST', '/v1/scopes/team/ingest', { key, body: bigIngest(),
      headers: { 'Idempotency-Key': `full-disk-${String(i).padStart(4, '0')}` } });
    assert.notEqual(res.status, 500, `a full disk is not an internal error: ${res.text}`);
    if (res.status === 202) jobs.push(res.json.job_id);
    else full = res;
  }
  assert.ok(full, `the 4 MiB disk never filled (${jobs.length} ingests accepted)`);
  assert.equal(full.status, 503, full.text);
  assert.equal(full.json.error.code, 'unavailable');
  assert.ok(Number(full.headers['retry-after']) >= 1, `Retry-After: ${full.headers['retry-after']}`);
  assert.match(full.json.error.message, /disk is full/);
  const notReady = await request(port, ca, 'GET', '/readyz');
  assert.equal(notReady.status, 503, notReady.text);
  const health = await request(port, ca, 'GET', '/healthz');
  assert.equal(health.status, 200, 'the process is alive: healthz stays 200');

  const grown = await run('nsenter', ['-t', String(srv.proc.pid), '-m', 'mount', '-o', 'remount,size=64m', MNT]);
  assert.equal(grown.code, 0, grown.stderr);
  let ready;
  for (const end = Date.now() + 10_000; Date.now() < end; await sleep(100)) {
    ready = await request(port, ca, 'GET', '/readyz');
    if (ready.status === 200) break;
  }
  assert.equal(ready.status, 200, `readyz with room again: ${ready.text}`);
  // Every job accepted before succeeds, well before a lease (30 s) would have run out.
  const t0 = Date.now();
  let states;
  for (const end = Date.now() + 15_000; Date.now() < end; await sleep(200)) {
    const res = await request(port, ca, 'POST', '/v1/jobs/batch', { key, body: { job_ids: jobs.slice(0, 100) } });
    assert.equal(res.status, 200, res.text);
    states = res.json.jobs.map((j) => j.job?.status);
    if (states.every((s) => s === 'succeeded' || s === 'failed')) break;
  }
  assert.ok(states.every((s) => s === 'succeeded'), `jobs after the disk had room: ${JSON.stringify(states)}`);
  const interrupted = (srv.stderr.match(/memory job worker: storage_full/g) || []).length;
  console.log(`# ${jobs.length} jobs accepted before the disk filled (job runs that found it full: ${interrupted}); all succeeded ${Date.now() - t0} ms after it had room`);
  const after = await request(port, ca, 'POST', '/v1/scopes/team/ingest', { key, body: bigIngest(),
    headers: { 'Idempotency-Key': 'full-disk-after' } });
  assert.equal(after.status, 202, after.text);
  const exit = await stopMemd(srv);
  assert.deepEqual(exit, { code: 0, signal: null });
});

await r.finish();
