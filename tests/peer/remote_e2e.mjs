#!/usr/bin/env node
// remote_e2e.mjs — tmcra-mcp in remote mode against a real tmcra-memd over real HTTPS on
// 127.0.0.1, driven by the official SDK client (@modelcontextprotocol/sdk 1.32.2).
//
//   node remote_e2e.mjs <tmcra-mcp> <tmcra-mcp-testserver>      (TMCRA_MEMD, TMCRA_STORE_CHECK set)
//
// A CA and a leaf certificate are generated with openssl for this run; tmcra-mcp trusts the CA
// through SSL_CERT_FILE, as a user with a private CA would. Proved:
//   1. service mode (TMCRA_API_KEY + TMCRA_BASE_URL=https://127.0.0.1:<port>): tmcra_status
//      names the service endpoint and never the key; tmcra_turn_prepare → tmcra_turn_commit
//      (read_your_writes: succeeded) → tmcra_recall finds the committed turn; tmcra_feedback
//      (the user accepts through elicitation) hides it from recall; memd's store holds each
//      message exactly once.
//   2. a wrong key: the tool call fails with isError naming 401/unauthorized, the key is not in
//      the text, and the turn stays in the outbox (pending), delivered once the key is right.
//   3. --local discovery: tmcra-memd --local writes the local binding and identity files (0600 in
//      0700 directories); a tmcra-mcp with the same HOME and no key at all finds it, reports mode
//      "local", and commits and recalls through it over numeric-loopback HTTP.
//   Every tmcra-mcp runs behind the stdout tap: stdout carried only JSON-RPC.
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';

import {
  Runner, assert, parseBins, requireNodeModules, connectV1, assertAllStdoutPure, textOf, tmpDir,
  serverEnv,
} from './lib.mjs';
import { makeCerts, createKey, startMemd, storeCheck, remoteEnv, findSecret } from './remote_lib.mjs';

const NAME = 'remote_e2e.mjs';
requireNodeModules(NAME, ['@modelcontextprotocol/sdk']);
const bins = parseBins(NAME);
const { ElicitRequestSchema } = await import('@modelcontextprotocol/sdk/types.js');
const r = new Runner(NAME, { budgetMs: 180_000 });
const logs = [];
const sessions = [];
const servers = [];
r.onCleanup(async () => {
  for (const s of sessions) await s.closeQuietly();
  for (const m of servers) await m.stop('SIGKILL');
});
const answers = [];  // every tool answer and error text, for the canary sweep
const extraKeys = [];
const track = (s, env) => { s.home = env?.HOME; logs.push(s.logPath); sessions.push(s); return s; };
const hex = (n = 6) => crypto.randomBytes(n).toString('hex');

async function call(s, name, args, what = name) {
  const res = await s.call({ name, arguments: args });
  answers.push(textOf(res));
  assert.notEqual(res.isError, true, `${what}: isError: ${textOf(res)}`);
  return res.structuredContent ?? JSON.parse(textOf(res));
}

function recordsOf(recall) {
  return (recall.evidence?.windows ?? []).flatMap((w) => w.records ?? []);
}

const certs = makeCerts();
const memdData = path.join(tmpDir(), 'memd-data');
let key;
let memd;

await r.test('tmcra-memd starts over HTTPS with a key made by `tmcra-memd keys create`', async () => {
  key = createKey(memdData);
  memd = await startMemd({ dataDir: memdData, certs });
  servers.push(memd);
  assert.match(memd.url, /^https:\/\/127\.0\.0\.1:\d+$/);
});

const marker = `zq${hex()}`;
const USER = `Remember that the ${marker} deploy window is Thursday at 06:00 UTC.`;
const ASSISTANT = `Noted: the ${marker} deploy window is Thursday 06:00 UTC.`;
let remote;
let memoryId;

if (memd) {
  await r.test('service mode: status, prepare, commit (read_your_writes), recall', async () => {
    const accept = { asked: 0 };
    const env = remoteEnv({ url: memd.url, key, ca: certs.ca });
    remote = track(await connectV1({
      bin: bins.server, label: 'remote', env,
      capabilities: { elicitation: {} },
      setup: (c) => c.setRequestHandler(ElicitRequestSchema, async () => {
        accept.asked += 1;
        return { action: 'accept', content: { confirm: true } };
      }),
    }), env);
    remote.accept = accept;
    const status = await call(remote, 'tmcra_status', {});
    const text = JSON.stringify(status);
    assert.ok(!text.includes(key.split('.')[1]), 'tmcra_status must never show the key');
    assert.ok(text.includes(memd.url), `tmcra_status names the endpoint: ${text.slice(0, 600)}`);
    const session = `s-${marker}`;
    const prep = await call(remote, 'tmcra_turn_prepare', {
      turn_id: `t-${marker}`, session_id: session, user_message_id: `u-${marker}`, user_content: USER,
    });
    assert.equal(prep.status, 'prepared', JSON.stringify(prep).slice(0, 400));
    const commit = await call(remote, 'tmcra_turn_commit', {
      turn_id: `t-${marker}`, assistant_message_id: `a-${marker}`, assistant_content: ASSISTANT,
    });
    assert.equal(commit.status, 'succeeded', `commit: ${JSON.stringify(commit).slice(0, 600)}`);
    // The commit echoes the prepared turn's whole recall receipt (§2.4), capture included.
    assert.deepEqual(commit.recall, prep.recall, 'the commit echoes the prepared recall receipt');
    assert.equal(commit.recall.receipt_type, 'recall');
    assert.ok(commit.recall._local_capture, 'the echoed recall keeps its _local_capture');
    const prep2 = await call(remote, 'tmcra_turn_prepare', {
      turn_id: `t2-${marker}`, session_id: session, user_message_id: `u2-${marker}`, user_content: 'and the rollback plan?',
    });
    const eventual = await call(remote, 'tmcra_turn_commit', {
      turn_id: `t2-${marker}`, assistant_message_id: `a2-${marker}`, assistant_content: 'noted', consistency: 'eventual',
    });
    assert.ok(['pending', 'submitted', 'succeeded'].includes(eventual.status), JSON.stringify(eventual).slice(0, 400));
    assert.deepEqual(eventual.recall, prep2.recall, 'an eventual commit echoes the prepared recall receipt too');
    const recall = await call(remote, 'tmcra_recall', { query: `When is the ${marker} deploy window?`, session_id: session, include_structured_evidence: true });
    const hit = recordsOf(recall).find((rec) => rec.text === USER);
    assert.ok(hit, `recall finds the committed user turn: ${JSON.stringify(recall.evidence).slice(0, 1500)}`);
    memoryId = hit.memory_id;
    assert.equal(recall.trust_boundary, 'untrusted_memory_data');
    // Without the structured evidence, tmcra-mcp asks tmcra-memd for prompt_only (its answers
    // have said it keeps the snapshot): the same receipt but for the evidence it drops. (Both
    // once the eventual turn is in, so that they see one snapshot.)
    const settled = await call(remote, 'tmcra_reconcile', {});
    assert.equal(settled.queue_counts.pending + settled.queue_counts.submitted, 0, JSON.stringify(settled.queue_counts));
    const full = await call(remote, 'tmcra_recall', { query: `When is the ${marker} deploy window?`, session_id: session, include_structured_evidence: true });
    const light = await call(remote, 'tmcra_recall', { query: `When is the ${marker} deploy window?`, session_id: session });
    assert.equal(light.evidence, undefined);
    assert.ok(Number.isInteger(light.watermarks.source_event_seq), JSON.stringify(light.watermarks));
    for (const field of ['watermarks', 'prompt_evidence', 'injectable_context', 'evidence_sha256', 'evidence_route', 'index_job_id']) {
      assert.deepEqual(light[field], full[field], `${field} with and without the structured evidence`);
    }
  });
}

if (remote && memoryId) {
  await r.test('service mode: feedback confirmed through elicitation hides the memory', async () => {
    const fb = await call(remote, 'tmcra_feedback', {
      session_id: `s-${marker}`, memory_ids: [memoryId], action: 'ignore', idempotency_key: `fb-${hex()}`,
    });
    assert.equal(remote.accept.asked, 1, 'the user was asked once');
    assert.equal(fb.effective, true, JSON.stringify(fb));
    const recall = await call(remote, 'tmcra_recall', { query: `When is the ${marker} deploy window?`, session_id: `s-${marker}`, include_structured_evidence: true });
    assert.ok(!recordsOf(recall).some((rec) => rec.memory_id === memoryId), 'hidden after feedback');
  });

  await r.test("memd's store holds each committed message exactly once", async () => {
    const check = storeCheck(memdData);
    assert.equal(check.memory_integrity, 'ok');
    assert.equal(check.message_counts?.[`u-${marker}`], 1, JSON.stringify(check).slice(0, 600));
    assert.equal(check.message_counts?.[`a-${marker}`], 1, JSON.stringify(check).slice(0, 600));
  });
}

if (memd) {
  await r.test('a wrong key: isError names 401, the key is not shown, the turn waits in the outbox', async () => {
    const home = path.join(tmpDir(), 'badkey-home');
    const queue = path.join(home, 'queue.sqlite3');
    const bad = `tmcra_nosuchkey.${hex(16)}`;
    extraKeys.push(bad);
    const extra = { HOME: home, TMCRA_MCP_QUEUE_FILE: queue };
    fs.mkdirSync(home, { recursive: true });
    const badEnv = remoteEnv({ url: memd.url, key: bad, ca: certs.ca, extra });
    const s = track(await connectV1({ bin: bins.server, label: 'badkey', env: badEnv }), badEnv);
    const m2 = `wk${hex()}`;
    const res = await s.call({ name: 'tmcra_recall', arguments: { query: 'anything' } });
    answers.push(textOf(res));
    assert.equal(res.isError, true, 'recall with a wrong key fails');
    assert.match(textOf(res), /401|unauthorized/i);
    assert.ok(!textOf(res).includes(bad.split('.')[1]), 'the key is never in an error');
    await call(s, 'tmcra_turn_prepare', {
      turn_id: `t-${m2}`, session_id: `s-${m2}`, user_message_id: `u-${m2}`, user_content: `the ${m2} marker`,
    }).catch(() => null);  // prepare recalls first; with a wrong key that recall fails
    const ing = await s.call({ name: 'tmcra_ingest', arguments: {
      session_id: `s-${m2}`, messages: [{ message_id: `u-${m2}`, role: 'user', content: `the ${m2} marker` }],
    } });
    assert.notEqual(ing.isError, true, `ingest is accepted into the outbox: ${textOf(ing)}`);
    const rec = await call(s, 'tmcra_reconcile', {});
    const counts = rec.queue_counts;
    assert.equal(counts.dead_letter, 0, `a credential problem never dead-letters: ${JSON.stringify(rec).slice(0, 600)}`);
    assert.ok(counts.pending >= 1, `the item stays pending: ${JSON.stringify(counts)}`);
    await s.closeAndCheckExit();
    // The right key now: the same outbox delivers the waiting item once.
    const goodEnv = remoteEnv({ url: memd.url, key, ca: certs.ca, extra });
    const s2 = track(await connectV1({ bin: bins.server, label: 'goodkey', env: goodEnv }), goodEnv);
    const rec2 = await call(s2, 'tmcra_reconcile', {});
    assert.equal(rec2.queue_counts.pending, 0, JSON.stringify(rec2.queue_counts));
    assert.equal(rec2.queue_counts.submitted, 0, JSON.stringify(rec2.queue_counts));
    const sc = storeCheck(memdData);
    assert.equal(sc.memory_integrity, 'ok');
    assert.equal(sc.message_counts?.[`u-${m2}`], 1, `delivered exactly once: ${JSON.stringify(Object.keys(sc.message_counts))} ${JSON.stringify(sc).slice(0, 300)}`);
  });
}

await r.test('--local: tmcra-memd writes the binding and identity; tmcra-mcp finds it with no key', async () => {
  const home = path.join(tmpDir(), 'local-home');
  fs.mkdirSync(home, { recursive: true });
  const data = path.join(tmpDir(), 'local-data');
  const env = { HOME: home };
  const local = await startMemd({ dataDir: data, local: true, env });
  servers.push(local);
  assert.match(local.url, /^http:\/\/127\.0\.0\.1:\d+$/, local.url);
  const binding = path.join(home, '.config', 'tmcra', 'local-memory.json');
  const b = JSON.parse(fs.readFileSync(binding, 'utf8'));
  assert.equal(b.mode, 'local');
  assert.equal(b.schemaVersion, 1);
  const identity = path.join(b.dataRoot, 'state', b.profile, 'secrets', 'client-plugin.json');
  const id = JSON.parse(fs.readFileSync(identity, 'utf8'));
  assert.equal(id.deploymentMode, 'local');
  assert.equal(id.baseUrl, local.url);
  for (const f of [binding, identity]) assert.equal(fs.statSync(f).mode & 0o777, 0o600, `${f} is 0600`);
  assert.equal(fs.statSync(path.dirname(identity)).mode & 0o777, 0o700, 'the secrets directory is 0700');
  const s = track(await connectV1({ bin: bins.server, label: 'local', env: serverEnv({ HOME: home }) }));
  const status = await call(s, 'tmcra_status', {});
  assert.match(JSON.stringify(status), /"local"/, `status says local: ${JSON.stringify(status).slice(0, 600)}`);
  assert.ok(!JSON.stringify(status).includes(id.apiKey), 'the local key is never shown');
  const m3 = `lc${hex()}`;
  await call(s, 'tmcra_turn_prepare', { turn_id: `t-${m3}`, session_id: `s-${m3}`, user_message_id: `u-${m3}`, user_content: `the ${m3} local marker` });
  const c = await call(s, 'tmcra_turn_commit', { turn_id: `t-${m3}`, assistant_message_id: `a-${m3}`, assistant_content: 'ok' });
  assert.equal(c.status, 'succeeded', JSON.stringify(c).slice(0, 400));
  const recall = await call(s, 'tmcra_recall', { query: `${m3} local marker`, session_id: `s-${m3}`, include_structured_evidence: true });
  assert.ok(recordsOf(recall).some((rec) => rec.text === `the ${m3} local marker`), 'recalled through the local memd');
  await s.closeAndCheckExit();
  const exit = await local.stop('SIGTERM');
  assert.equal(exit.code, 0, `tmcra-memd exits 0 on SIGTERM: ${JSON.stringify(exit)}`);
});

await r.test('stdout of every tmcra-mcp carried only JSON-RPC', async () => {
  for (const s of sessions) await s.closeQuietly();
  assertAllStdoutPure(logs);
});

if (memd) {
  await r.test('tmcra-memd exits 0 on SIGTERM', async () => {
    const exit = await memd.stop('SIGTERM');
    assert.equal(exit.code, 0, `exit: ${JSON.stringify(exit)}\n${memd.stderr().slice(-2000)}`);
  });

  await r.test('secret canary: the keys are nowhere in stdout, stderr, outboxes, state or memd files', async () => {
    const homes = sessions.map((x) => x.home).filter(Boolean);
    const texts = [...sessions.map((x) => x.stderr()), ...servers.map((m) => m.stderr()), ...answers];
    const hits = [key, ...extraKeys].flatMap((k) => findSecret(k, {
      dirs: [...homes, memdData, ...sessions.map((x) => path.dirname(x.logPath))], texts,
    }));
    assert.deepEqual(hits, [], 'traces of a key');
  });
}

await r.finish();
