#!/usr/bin/env node
// memd_slow_clients.mjs — tmcra-memd keeps answering while slow clients hold connections.
//
//   node tests/integration/memd_slow_clients.mjs <tmcra-memd>
//
// 200 clients from eight 127.0.0.x source addresses trickle a byte a second over TLS (half of
// them inside the TLS handshake, half inside a request head) and reconnect at once when the
// server closes them. Meanwhile /healthz and an authenticated recall, each on a new connection,
// must be answered. The bound is generous (the suite also runs this under sanitizers); the
// latency figures are bench/memd_slow_clients.mjs's. Bounded: about 20 s, 200 clients.
import fs from 'node:fs';
import path from 'node:path';

import { Runner, assert, tmpDir, serverEnv, sleep } from '../peer/lib.mjs';
import { makeCertificate, createKey, startMemd, stopMemd, request, slowClients, loopbackAddresses } from './memd_lib.mjs';

const BIN = process.argv[2] ? path.resolve(process.argv[2]) : '';
if (!BIN || !fs.existsSync(BIN)) {
  console.error('usage: node memd_slow_clients.mjs <tmcra-memd binary>');
  console.log('0 passed, 1 failed');
  process.exit(2);
}

const r = new Runner('memd_slow_clients', { budgetMs: 120_000 });
const TMP = tmpDir('tmcra-memd-slow-');
const ENV = serverEnv();
const DATA = path.join(TMP, 'data');
let srv;
let slow;
r.onCleanup(async () => {
  if (slow) slow.stop();
  if (srv && !srv.exit) { srv.proc.kill('SIGKILL'); await srv.exited; }
});

const RECALL = { query: 'which deployment failed', max_windows: 8 };

await r.test('200 slow TLS clients from 8 addresses: healthz and an authenticated recall are still answered', async () => {
  const tlsFiles = await makeCertificate(TMP);
  const key = await createKey(BIN, DATA, ENV);
  // A short head deadline, so that every slow client is closed and reconnects during the test.
  srv = await startMemd(BIN, ['--data-dir', DATA, '--tls-cert', tlsFiles.cert, '--tls-key', tlsFiles.key,
    '--head-timeout', '3'], { env: ENV });
  const fds = () => fs.readdirSync(`/proc/${srv.proc.pid}/fd`).length;
  const before = fds();
  slow = slowClients({ port: srv.port, ca: tlsFiles.ca, count: 200, addresses: loopbackAddresses(8) });
  await sleep(2000);
  assert.ok(fds() - before >= 150, `the server holds ${fds() - before} slow connections`);
  const answered = [];
  const end = Date.now() + 8000;  // past the head deadline: the slow clients reconnect meanwhile
  while (Date.now() < end) {
    const health = await request(srv.port, tlsFiles.ca, 'GET', '/healthz', { timeoutMs: 10_000 });
    assert.equal(health.status, 200, `healthz: ${health.error || health.text}`);
    const recall = await request(srv.port, tlsFiles.ca, 'POST', '/v1/scopes/team/recall',
      { key, body: RECALL, timeoutMs: 10_000 });
    assert.equal(recall.status, 200, `recall: ${recall.error || recall.text}`);
    answered.push(health.ms, recall.ms);
    await sleep(200);
  }
  const stats = { ...slow.stats };
  slow.stop();
  assert.ok(stats.closes >= 150, `the server closed slow clients past --head-timeout: ${JSON.stringify(stats)}`);
  assert.ok(answered.length >= 10, `${answered.length} answers`);
  console.log(`# ${answered.length} answers while slow clients held on; slowest ${Math.max(...answered).toFixed(1)} ms; ${JSON.stringify(stats)}`);
  const exit = await stopMemd(srv);
  assert.deepEqual(exit, { code: 0, signal: null });
  assert.match(srv.stderr, /closed \d+ connection\(s\) that took too long to send a request \(head 3 s/);
});

await r.finish();
