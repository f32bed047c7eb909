#!/usr/bin/env node
// memd_slow_clients.mjs — tmcra-memd's recall latency for a well-behaved client while 0, 50
// and 200 slow clients hold connections, in one run.
//
//   node bench/memd_slow_clients.mjs --memd build/bench/memd/tmcra-memd
//                                    [--baseline OTHER-MEMD] [--calls 300] [--warmup 50] [--out DIR]
//
// With --baseline, the same run against another tmcra-memd binary first (e.g. a build of an
// earlier commit), side by side. A request unanswered within 3 s counts as an error, and a row
// stops after 5 errors in a row (the server is taken as offline for that count).
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
const MEMD = path.resolve(args.memd || 'build/bench/memd/tmcra-memd');
const CALLS = Number(args.calls || 300);
const WARMUP = Number(args.warmup || 50);
const OUT = path.resolve(args.out || path.join(path.dirname(new URL(import.meta.url).pathname), 'results'));
const COUNTS = [0, 50, 200];
const GOAL_MS = 1000;

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'tmcra-slow-bench-'));
fs.chmodSync(tmp, 0o700);
const env = { ...process.env, TMCRA_LOG_LEVEL: 'warn' };
const tlsFiles = await makeCertificate(tmp);
const ca = tlsFiles.ca;
const topics = ['billing API deployment failed', 'the doctor prescribed rest', 'invoice service latency',
  'database migration rolled back', 'weekly planning notes'];

// 400 messages in scope "bench", their jobs run.
async function seed(port, key) {
  for (let i = 0; i < 400; i += 50) {
    const messages = Array.from({ length: 50 }, (_, j) => ({ message_id: `m${i + j}`, role: 'user',
      content: `${topics[(i + j) % topics.length]} (note ${i + j})`, timestamp: '2026-07-15T00:00:00Z' }));
    const res = await request(port, ca, 'POST', '/v1/scopes/bench/ingest', { key, body: { session_id: `s${i}`, messages },
      headers: { 'Idempotency-Key': `bench-seed-${i}` } });
    if (res.status !== 202) throw new Error(`seed: ${res.status} ${res.text}`);
  }
  await sleep(1500);
}

// `n` requests made by `send(i)`; the answered ones' times (after `warmup`), errors, and whether
// the row was cut short by 5 errors in a row.
async function measure(n, warmup, send) {
  const times = [];
  let errors = 0;
  let streak = 0;
  for (let i = 0; i < n; i += 1) {
    const res = await send(i);
    if (res.status === 200) {
      streak = 0;
      if (i >= warmup) times.push(res.ms);
    } else {
      errors += 1;
      streak += 1;
      if (streak >= 5) return { times, errors, offline: true };
    }
  }
  return { times, errors, offline: false };
}

async function runServer(label, bin) {
  const data = path.join(tmp, `data-${label}`);
  const key = await createKey(bin, data, env);
  const srv = await startMemd(bin, ['--data-dir', data, '--tls-cert', tlsFiles.cert, '--tls-key', tlsFiles.key], { env });
  const { port } = srv;
  await seed(port, key);
  const rows = [];
  for (const count of COUNTS) {
    const slow = count > 0 ? slowClients({ port, ca, count, addresses: loopbackAddresses(8) }) : null;
    await sleep(count > 0 ? 3000 : 200);
    const held = fs.readdirSync(`/proc/${srv.proc.pid}/fd`).length;
    const agent = new https.Agent({ keepAlive: true, maxSockets: 1 });
    const recall = await measure(WARMUP + CALLS, WARMUP, (i) => request(port, ca, 'POST', '/v1/scopes/bench/recall',
      { key, agent, body: { query: topics[i % topics.length], max_windows: 8 }, timeoutMs: 3000 }));
    agent.destroy();
    const health = await measure(50, 0, () => request(port, ca, 'GET', '/healthz', { timeoutMs: 3000 }));
    const stats = slow ? { ...slow.stats } : null;
    if (slow) slow.stop();
    await sleep(500);
    const row = { server: label, slow_clients: count, server_descriptors: held, slow_stats: stats,
      recall: { ...summarize(recall.times), errors: recall.errors, offline: recall.offline },
      healthz_new_connection: { ...summarize(health.times), errors: health.errors, offline: health.offline },
      recall_samples: recall.times, healthz_samples: health.times };
    rows.push(row);
    process.stderr.write(`[slow] ${label}, ${count} slow clients: recall p50 ${f(row.recall.p50)} ms p99 ${f(row.recall.p99)} ms, ` +
      `errors ${recall.errors}${recall.offline ? ' (offline)' : ''}\n`);
  }
  await stopMemd(srv);
  return rows;
}

const rows = [];
if (args.baseline) rows.push(...await runServer('baseline', path.resolve(args.baseline)));
rows.push(...await runServer('tmcra-memd', MEMD));
fs.rmSync(tmp, { recursive: true, force: true });

const cell = (m) => (m.offline ? `offline (${m.errors} unanswered in 3 s)` : f(m.p99));
console.log('| server | slow clients | memd descriptors | recall p50 ms | recall p99 ms | p99 / no slow clients | healthz (new TLS connection) p50 ms | p99 ms | errors |');
console.log('|---|---|---|---|---|---|---|---|---|');
for (const row of rows) {
  const base = rows.find((r) => r.server === row.server && r.slow_clients === 0);
  console.log(`| ${row.server} | ${row.slow_clients} | ${row.server_descriptors} | ${f(row.recall.p50)} | ${cell(row.recall)} | ` +
    `${row.recall.offline ? 'n/a' : `${f(row.recall.p99 / base.recall.p99)}×`} | ${f(row.healthz_new_connection.p50)} | ` +
    `${cell(row.healthz_new_connection)} | ${row.recall.errors + row.healthz_new_connection.errors} |`);
}
const worst = rows.at(-1);
const met = (m) => (m.offline ? 'MISSED: offline' : verdict(m.p99, GOAL_MS));
console.log(`\nGoal, 200 slow clients: recall p99 ${cell(worst.recall)} ms (${met(worst.recall)}), ` +
  `healthz p99 ${cell(worst.healthz_new_connection)} ms (${met(worst.healthz_new_connection)})`);
fs.mkdirSync(OUT, { recursive: true });
const file = path.join(OUT, `slow-clients-${new Date().toISOString().replace(/[:.]/g, '-')}.json`);
fs.writeFileSync(file, JSON.stringify({ machine: describeMachine(MEMD), baseline: args.baseline || null, calls: CALLS,
  warmup: WARMUP, rows }, null, 2));
console.log(`\nsamples: ${path.relative(process.cwd(), file)}`);
