#!/usr/bin/env node
// memd_slow_clients.mjs — tmcra-memd's recall latency for a well-behaved client while 0, 50
// and 200 slow clients hold connections, in one run.
//
//   node bench/memd_slow_clients.mjs --memd build/bench/memory/server/tmcra-memd
//                                    [--calls 300] [--warmup 50] [--out DIR]
//
// One memd over TLS on 127.0.0.1 (a test-time certificate) with 400 stored messages. The slow
// clients come from eight 127.0.0.x addresses; half trickle a TLS handshake, half a request
// head, a byte a second, reconnecting at once when closed (tests/integration/memd_lib.mjs).
// For each count: `--calls` recalls on one keep-alive connection (p50/p99), and 50 /healthz
// on new connections (TLS handshake included). Goal (issue "Hardening"): with 200 slow
// connections, /healthz and an authenticated recall answer within 1 s. Prints a Markdown
// table; every sample goes to bench/results/slow-clients-*.json. Never fails on a figure.
import fs from 'node:fs';
import https from 'node:https';
import os from 'node:os';
import path from 'node:path';

import { summarize, f, verdict, describeMachine, sleep } from './bench_lib.mjs';
import { makeCertificate, createKey, startMemd, stopMemd, request, slowClients, loopbackAddresses }
  from '../tests/integration/memd_lib.mjs';

const args = Object.fromEntries(process.argv.slice(2).reduce((out, a, i, all) => {
  if (a.startsWith('--')) out.push([a.slice(2), all[i + 1]]);
  return out;
}, []));
const MEMD = path.resolve(args.memd || 'build/bench/memory/server/tmcra-memd');
const CALLS = Number(args.calls || 300);
const WARMUP = Number(args.warmup || 50);
const OUT = path.resolve(args.out || path.join(path.dirname(new URL(import.meta.url).pathname), 'results'));
const COUNTS = [0, 50, 200];
const GOAL_MS = 1000;

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'tmcra-slow-bench-'));
fs.chmodSync(tmp, 0o700);
const env = { ...process.env, TMCRA_LOG_LEVEL: 'warn' };
const tlsFiles = await makeCertificate(tmp);
const data = path.join(tmp, 'data');
const key = await createKey(MEMD, data, env);
const srv = await startMemd(MEMD, ['--data-dir', data, '--tls-cert', tlsFiles.cert, '--tls-key', tlsFiles.key], { env });
const { port } = srv;
const ca = tlsFiles.ca;
const topics = ['billing API deployment failed', 'the doctor prescribed rest', 'invoice service latency',
  'database migration rolled back', 'weekly planning notes'];
for (let i = 0; i < 400; i += 50) {
  const messages = Array.from({ length: 50 }, (_, j) => ({ message_id: `m${i + j}`, role: 'user',
    content: `${topics[(i + j) % topics.length]} (note ${i + j})`, timestamp: '2026-07-15T00:00:00Z' }));
  const res = await request(port, ca, 'POST', '/v1/scopes/bench/ingest', { key, body: { session_id: `s${i}`, messages },
    headers: { 'Idempotency-Key': `bench-seed-${i}` } });
  if (res.status !== 202) throw new Error(`seed: ${res.status} ${res.text}`);
}
await sleep(1500);  // the jobs run

const agent = new https.Agent({ keepAlive: true, maxSockets: 1 });
const rows = [];
for (const count of COUNTS) {
  const slow = count > 0 ? slowClients({ port, ca, count, addresses: loopbackAddresses(8) }) : null;
  await sleep(count > 0 ? 3000 : 200);
  const held = fs.readdirSync(`/proc/${srv.proc.pid}/fd`).length;
  const recall = [];
  const health = [];
  let errors = 0;
  for (let i = 0; i < WARMUP + CALLS; i += 1) {
    const res = await request(port, ca, 'POST', '/v1/scopes/bench/recall', { key, agent,
      body: { query: topics[i % topics.length], max_windows: 8 }, timeoutMs: 10_000 });
    if (res.status !== 200) errors += 1;
    else if (i >= WARMUP) recall.push(res.ms);
  }
  for (let i = 0; i < 50; i += 1) {
    const res = await request(port, ca, 'GET', '/healthz', { timeoutMs: 10_000 });
    if (res.status !== 200) errors += 1;
    else health.push(res.ms);
  }
  const stats = slow ? { ...slow.stats } : null;
  if (slow) slow.stop();
  await sleep(500);
  rows.push({ slow_clients: count, server_descriptors: held, errors, slow_stats: stats,
    recall: summarize(recall), healthz_new_connection: summarize(health), recall_samples: recall, healthz_samples: health });
  process.stderr.write(`[slow] ${count} slow clients: recall p50 ${f(rows.at(-1).recall.p50)} ms p99 ${f(rows.at(-1).recall.p99)} ms\n`);
}
agent.destroy();
await stopMemd(srv);
fs.rmSync(tmp, { recursive: true, force: true });

const base = rows[0];
console.log('| slow clients | memd descriptors | recall p50 ms | recall p99 ms | p99 / no slow clients | healthz (new TLS connection) p50 ms | p99 ms | errors |');
console.log('|---|---|---|---|---|---|---|---|');
for (const row of rows) {
  console.log(`| ${row.slow_clients} | ${row.server_descriptors} | ${f(row.recall.p50)} | ${f(row.recall.p99)} | ` +
    `${f(row.recall.p99 / base.recall.p99)}× | ${f(row.healthz_new_connection.p50)} | ${f(row.healthz_new_connection.p99)} | ${row.errors} |`);
}
const worst = rows.at(-1);
console.log(`\nGoal, 200 slow clients: recall p99 ${f(worst.recall.p99)} ms (${verdict(worst.recall.p99, GOAL_MS)}), ` +
  `healthz p99 ${f(worst.healthz_new_connection.p99)} ms (${verdict(worst.healthz_new_connection.p99, GOAL_MS)}); errors ${worst.errors}`);
fs.mkdirSync(OUT, { recursive: true });
const file = path.join(OUT, `slow-clients-${new Date().toISOString().replace(/[:.]/g, '-')}.json`);
fs.writeFileSync(file, JSON.stringify({ machine: describeMachine(MEMD), calls: CALLS, warmup: WARMUP, rows }, null, 2));
console.log(`\nsamples: ${path.relative(process.cwd(), file)}`);
