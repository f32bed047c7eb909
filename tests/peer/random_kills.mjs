#!/usr/bin/env node
// random_kills.mjs — SIGKILL tmcra-mcp at random moments during bursts of turn commits from the
// official SDK v1 client, many times over one data directory, then let it recover.
//
//   node random_kills.mjs <tmcra-mcp> <tmcra-mcp-testserver>
//   RANDOM_KILLS=2000 node random_kills.mjs ...      (a longer run; default 200)
//
// Each round starts the server on the shared data dir, fires a burst of prepare+commit turns
// (3 at once) and kills the server process with SIGKILL after a random 0..250 ms. A turn whose
// commit answered is "acknowledged". After the last round a clean server lets delivery finish,
// then the host retries every unacknowledged turn exactly as before, and reconciles.
// Pass rule (checked in the SQLite files with tmcra-store-check): every acknowledged turn is
// stored without any retry, every turn is stored exactly once (each message_id once), every
// outbox item succeeded with exactly one job, and integrity_check is ok on both files.
import { spawnSync } from 'node:child_process';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { Runner, assert, parseBins, requireNodeModules, serverEnv, tmpDir, sleep } from './lib.mjs';

const NAME = 'random_kills.mjs';
requireNodeModules(NAME, ['@modelcontextprotocol/sdk']);
const bins = parseBins(NAME);
// A stress run: the optimised product binary when the test command built one (a sanitizer
// build is too slow for thousands of durable commits on two cores); else the one given.
const serverBin = process.env.TMCRA_STRESS_BIN || bins.server;
console.log(`note: server ${serverBin}`);
const r = new Runner(NAME, { budgetMs: 290_000 });
const KILLS = Number.parseInt(process.env.RANDOM_KILLS ?? '200', 10);
const BURST = 3;
const home = tmpDir('tmcra-kills-');
const env = serverEnv({ HOME: home, TMCRA_DATA_DIR: `${home}/data`,
                        TMCRA_MEMORY_STATE_DIR: `${home}/controls`, TMCRA_LOG_LEVEL: 'error' });

const prepareArgs = (t) => ({ turn_id: `turn-${t}`, session_id: 'kills',
  user_message_id: `u${t}`, user_content: `user turn ${t} says killmark${t}` });
const commitArgs = (t) => ({ turn_id: `turn-${t}`, assistant_message_id: `a${t}`,
  assistant_content: `assistant turn ${t} answers killmark${t}` });

async function start() {
  const transport = new StdioClientTransport({ command: serverBin, args: [], env, stderr: 'ignore' });
  const client = new Client({ name: 'random-kills', version: '0' }, { capabilities: {} });
  client.onerror = () => {};
  await client.connect(transport);
  return { client, transport };
}

async function turn(client, t) {
  const opts = { timeout: 20_000 };
  const p = await client.callTool({ name: 'tmcra_turn_prepare', arguments: prepareArgs(t) }, undefined, opts);
  if (p.isError) throw new Error(`prepare ${t}: ${p.content?.[0]?.text}`);
  const c = await client.callTool({ name: 'tmcra_turn_commit', arguments: commitArgs(t) }, undefined, opts);
  if (c.isError) throw new Error(`commit ${t}: ${c.content?.[0]?.text}`);
  return t;
}

function storeCheck() {
  const tool = process.env.TMCRA_STORE_CHECK;
  assert.ok(tool, 'TMCRA_STORE_CHECK (the tmcra-store-check binary) must be set; CTest sets it');
  const out = spawnSync(tool, [`${home}/data`], { encoding: 'utf8' });
  assert.equal(out.status, 0, `tmcra-store-check failed: ${out.stderr}`);
  return JSON.parse(out.stdout);
}

const acknowledged = new Set();
const errors = [];
let next = 1;
let kills = 0;

await r.test(`${KILLS} SIGKILLs at random moments during commit bursts`, async () => {
  for (let round = 0; round < KILLS; round += 1) {
    const { client, transport } = await start();
    const burst = [];
    for (let i = 0; i < BURST; i += 1) burst.push(next++);
    const inflight = burst.map((t) => turn(client, t).then((done) => acknowledged.add(done),
      (e) => { if (!/closed|terminated|Connection|ECONNRESET|EPIPE|aborted/i.test(String(e?.message))) errors.push(String(e?.message)); }));
    await sleep(Math.floor(Math.random() * 250));
    const pid = transport.pid;
    if (pid) { try { process.kill(pid, 'SIGKILL'); kills += 1; } catch { /* already gone */ } }
    await Promise.allSettled(inflight);
    await client.close().catch(() => {});
  }
  assert.ok(kills >= KILLS * 0.9, `only ${kills} kills landed`);
  assert.deepEqual(errors, [], 'no tool error other than the killed connection');
}, { timeoutMs: 220_000 });

const turns = next - 1;

await r.test('after the kills, acknowledged turns come back without any retry', async () => {
  const { client } = await start();
  const rec = await client.callTool({ name: 'tmcra_reconcile', arguments: {} }, undefined, { timeout: 120_000 });
  assert.ok(!rec.isError, `reconcile failed: ${rec.content?.[0]?.text}`);
  await client.close();
  const check = storeCheck();
  for (const t of acknowledged) {
    assert.equal(check.message_counts[`u${t}`], 1, `acknowledged turn ${t}: user message`);
    assert.equal(check.message_counts[`a${t}`], 1, `acknowledged turn ${t}: assistant message`);
  }
  console.log(`note: ${kills} kills, ${turns} turns, ${acknowledged.size} acknowledged`);
});

await r.test('the host retries the rest: every turn stored exactly once, nothing left over', async () => {
  const { client } = await start();
  const retry = [];
  for (let t = 1; t <= turns; t += 1) if (!acknowledged.has(t)) retry.push(t);
  for (let at = 0; at < retry.length; at += 8) {
    await Promise.all(retry.slice(at, at + 8).map((t) => turn(client, t)));
  }
  const rec = await client.callTool({ name: 'tmcra_reconcile', arguments: {} }, undefined, { timeout: 120_000 });
  assert.ok(!rec.isError);
  await client.close();
  const check = storeCheck();
  assert.equal(check.memory_integrity, 'ok');
  assert.equal(check.outbox_integrity, 'ok');
  for (let t = 1; t <= turns; t += 1) {
    assert.equal(check.message_counts[`u${t}`], 1, `turn ${t}: user message stored once`);
    assert.equal(check.message_counts[`a${t}`], 1, `turn ${t}: assistant message stored once`);
  }
  assert.equal(check.records, turns * 2, 'no other record');
  assert.equal(check.outbox_not_succeeded, 0, 'every outbox item succeeded');
  assert.equal(check.jobs, check.outbox_items, 'one job per outbox item');
  assert.equal(check.jobs_not_succeeded, 0);
}, { timeoutMs: 150_000 });

await r.finish();
