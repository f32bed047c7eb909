#!/usr/bin/env node
// shared_outbox.mjs — four tmcra-mcp processes (four official SDK v1 clients) share one data
// directory, and so one outbox, and commit 2,000 turns between them while their deliveries
// contend: commits are `eventual`, so each is durable in the outbox when it answers and is
// delivered in the background by whichever process holds the delivery lease (or by a later
// reconcile), with per-item claims keeping deliverers apart.
//
//   node shared_outbox.mjs <tmcra-mcp> <tmcra-mcp-testserver>
//
// Pass rule: every prepare and commit succeeds with no lock error reaching the host; afterwards
// (checked in the SQLite files with tmcra-store-check) every outbox item succeeded, each was
// delivered once (one job per item), no turn is lost or stored twice, integrity_check is ok.
import { spawnSync } from 'node:child_process';
import crypto from 'node:crypto';
import { Runner, assert, parseBins, requireNodeModules, connectV1, serverEnv, tmpDir } from './lib.mjs';

const NAME = 'shared_outbox.mjs';
requireNodeModules(NAME, ['@modelcontextprotocol/sdk']);
const bins = parseBins(NAME);
// A stress run: the optimised product binary when the test command built one (a sanitizer
// build is too slow for thousands of durable commits on two cores); else the one given.
const serverBin = process.env.TMCRA_STRESS_BIN || bins.server;
console.log(`note: server ${serverBin}`);
const r = new Runner(NAME, { budgetMs: 290_000 });
const sessions = [];
r.onCleanup(async () => { await Promise.all(sessions.map((s) => s.closeQuietly())); });

const CLIENTS = 4;
const TURNS = Number.parseInt(process.env.SHARED_OUTBOX_TURNS ?? '2000', 10);
const IN_FLIGHT = 8;  // turns in flight per process
const run = crypto.randomBytes(3).toString('hex');
const home = tmpDir('tmcra-shared-');
const env = serverEnv({ HOME: home, TMCRA_DATA_DIR: `${home}/data`,
                        TMCRA_MEMORY_STATE_DIR: `${home}/controls`, TMCRA_LOG_LEVEL: 'warn' });

async function turn(client, i) {
  const opts = { timeout: 120_000 };
  const p = await client.callTool({ name: 'tmcra_turn_prepare', arguments: {
    turn_id: `t${i}-${run}`, session_id: `shared-s${i % 16}`, user_message_id: `u${i}`,
    user_content: `turn ${i} user text sharedmark${i}` } }, undefined, opts);
  if (p.isError) return `prepare ${i}: ${p.content?.[0]?.text}`;
  const c = await client.callTool({ name: 'tmcra_turn_commit', arguments: {
    turn_id: `t${i}-${run}`, assistant_message_id: `a${i}`, consistency: 'eventual',
    assistant_content: `turn ${i} assistant text sharedmark${i}` } }, undefined, opts);
  if (c.isError) return `commit ${i}: ${c.content?.[0]?.text}`;
  return null;
}

await r.test(`${CLIENTS} processes commit ${TURNS} turns through one outbox`, async () => {
  for (let k = 0; k < CLIENTS; k += 1) sessions.push(await connectV1({ bin: serverBin, label: `shared-${k}`, env }));
  const started = Date.now();
  const problems = [];
  await Promise.all(sessions.map(async (s, k) => {
    const mine = [];
    for (let i = k; i < TURNS; i += CLIENTS) mine.push(i);
    for (let at = 0; at < mine.length; at += IN_FLIGHT) {
      const res = await Promise.all(mine.slice(at, at + IN_FLIGHT).map((i) => turn(s.client, i)));
      problems.push(...res.filter(Boolean));
    }
  }));
  console.log(`note: ${TURNS} turns in ${((Date.now() - started) / 1000).toFixed(1)} s`);
  assert.deepEqual(problems.slice(0, 5), [], `${problems.length} calls failed`);
  // Let background delivery finish anything a commit left submitted, then look.
  const rec = await sessions[0].client.callTool({ name: 'tmcra_reconcile', arguments: {} }, undefined, { timeout: 120_000 });
  assert.ok(!rec.isError, `reconcile: ${rec.content?.[0]?.text}`);
  const status = await sessions[1].client.callTool({ name: 'tmcra_status', arguments: {} });
  const holder = status.structuredContent?.delivery?.lease_holder;
  console.log(`note: delivery lease holder ${JSON.stringify(holder)}`);
  await Promise.all(sessions.map((s) => s.client.close()));
  sessions.length = 0;
}, { timeoutMs: 260_000 });

await r.test('each item delivered once; none lost; none written twice; files intact', async () => {
  const out = spawnSync(process.env.TMCRA_STORE_CHECK, [`${home}/data`], { encoding: 'utf8' });
  assert.equal(out.status, 0, `tmcra-store-check: ${out.stderr}`);
  const check = JSON.parse(out.stdout);
  if (check.outbox_not_succeeded !== 0) console.log(`note: outbox errors ${JSON.stringify(check.outbox_errors)}`);
  assert.equal(check.memory_integrity, 'ok');
  assert.equal(check.outbox_integrity, 'ok');
  assert.equal(check.outbox_items, TURNS, 'one outbox item per turn');
  assert.equal(check.outbox_not_succeeded, 0, 'every item succeeded');
  assert.equal(check.jobs, TURNS, 'one job per item: each delivered once');
  assert.equal(check.jobs_not_succeeded, 0);
  assert.equal(check.records, TURNS * 2, 'every message stored once');
  const twice = Object.entries(check.message_counts).filter(([, n]) => n !== 1);
  assert.deepEqual(twice, [], 'messages stored more than once');
});

await r.finish();
