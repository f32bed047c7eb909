#!/usr/bin/env node
// remote_faults.mjs — tmcra-mcp against a real tmcra-memd through a fault proxy (remote_lib.mjs
// FaultProxy) that misbehaves on purpose, driven by the official SDK client.
//
//   node remote_faults.mjs <tmcra-mcp> <tmcra-mcp-testserver>     (TMCRA_MEMD, TMCRA_STORE_CHECK set)
//
// Proved (docs/reliability.md rows H1, H2, H8, D4; docs/contract.md §1.2):
//   1. Lost acknowledgement: the proxy forwards every write to tmcra-memd (which applies it) and
//      then resets the connection before the answer reaches tmcra-mcp, the first time each write
//      is seen. 500 turns (TMCRA_LOST_ACK_TURNS; the tsan test preset sets 150, as the ci run
//      has covered the 500) through tmcra_turn_prepare/tmcra_turn_commit: after the drain, memd
//      holds exactly twice as many messages as turns, each once, and answered no
//      idempotency_conflict.
//   2. Status matrix: for each status of H1 the proxy answers tmcra_recall's request with it.
//      Retryable statuses (408 425 429 500 502 503 504) are tried TMCRA_MAX_ATTEMPTS times, all
//      others exactly once (401 and 403 never retried); the tool answers isError; no redirect is
//      followed (the Location target counts 0 connections).
//   3. ≥ 40 invalid 2xx recall bodies (syntax, types, missing fields, wrong sha, wrong scope,
//      200 where 202 is due ...): every one is isError, never a receipt.
//   4. Writes under faults: while statuses, transport faults (reset before / after the write,
//      truncation, stall) and invalid 2xx ingest answers are injected, turns are ingested; then
//      the proxy passes everything and tmcra_reconcile (include_dead_letter) drains the outbox:
//      every turn is in memd exactly once — 0 lost, 0 written twice.
//   5. Job polls under faults: while statuses, transport faults and invalid 2xx answers are
//      injected on delivery's POST /v1/jobs/batch (and a 404 last, as from a memory without it),
//      submitted writes are reconciled; after the drain every one is in memd exactly once.
//   stdout carried only JSON-RPC throughout.
import crypto from 'node:crypto';
import path from 'node:path';

import {
  Runner, assert, parseBins, requireNodeModules, connectV1, assertAllStdoutPure, textOf, tmpDir, sleep,
} from './lib.mjs';
import {
  makeCerts, createKey, startMemd, storeCheck, remoteEnv, FaultProxy, countingListener, findSecret,
} from './remote_lib.mjs';

const NAME = 'remote_faults.mjs';
requireNodeModules(NAME, ['@modelcontextprotocol/sdk']);
const bins = parseBins(NAME);
const r = new Runner(NAME, { budgetMs: 560_000 });
const logs = [];
const sessions = [];
const cleanups = [];
r.onCleanup(async () => {
  for (const s of sessions) await s.closeQuietly();
  for (const c of cleanups) await c();
});
const hex = (n = 6) => crypto.randomBytes(n).toString('hex');
const MAX_ATTEMPTS = 2;
const TURNS = Number(process.env.TMCRA_LOST_ACK_TURNS ?? 500);

async function call(s, name, args, what = name) {
  const res = await s.call({ name, arguments: args }, { timeout: 120_000 });
  assert.notEqual(res.isError, true, `${what}: isError: ${textOf(res)}`);
  return res.structuredContent ?? JSON.parse(textOf(res));
}

const certs = makeCerts();
const memdData = path.join(tmpDir(), 'memd-data');
const key = createKey(memdData);
const memd = await startMemd({ dataDir: memdData, certs, args: ['--max-concurrency', '64'] });
cleanups.push(() => memd.stop('SIGKILL'));

// The proxy's plan is swapped per phase.
let plan = () => 'pass';
const proxy = new FaultProxy({ upstream: memd.url, certs, plan: (req) => plan(req) });
await proxy.listen();
cleanups.push(() => proxy.close());
const isWrite = (req) => req.method === 'POST' && /\/ingest(\/batch)?$/.test(req.path);
const isRecall = (req) => req.method === 'POST' && /\/recall$/.test(req.path);
const writeId = (req) => req.key ?? crypto.createHash('sha256').update(req.body).digest('hex');

const env = remoteEnv({
  url: proxy.url, key, ca: certs.ca,
  extra: { TMCRA_MAX_ATTEMPTS: String(MAX_ATTEMPTS), TMCRA_REQUEST_TIMEOUT_SECONDS: '3' },
});
const s = await connectV1({ bin: bins.server, label: 'faults', env });
sessions.push(s); logs.push(s.logPath);

async function drain(what) {
  const deadline = Date.now() + 120_000;
  let last;
  while (Date.now() < deadline) {
    last = await call(s, 'tmcra_reconcile', { include_dead_letter: true }, `${what}: reconcile`);
    const c = last.queue_counts;
    if (c.pending === 0 && c.submitted === 0 && c.dead_letter === 0) return last;
    await sleep(200);
  }
  throw new Error(`${what}: the outbox did not drain: ${JSON.stringify(last?.queue_counts)}`);
}

// --- 1: lost acknowledgement ---------------------------------------------------------------------
await r.test(`lost acknowledgement: ${TURNS} turns, each write applied then its answer dropped once`, async () => {
  const seen = new Set();
  plan = (req) => {
    if (!isWrite(req)) return 'pass';
    const id = writeId(req);
    if (seen.has(id)) return 'pass';
    seen.add(id);
    return 'drop-after';
  };
  const m = `la${hex()}`;
  const jobsBefore = storeCheck(memdData).jobs;
  for (let i = 0; i < TURNS; i += 1) {
    await call(s, 'tmcra_turn_prepare', {
      turn_id: `${m}-t${i}`, session_id: `${m}-s${i % 10}`, user_message_id: `${m}-u${i}`,
      user_content: `lost ack turn ${i} of ${m}`,
    });
    await call(s, 'tmcra_turn_commit', {
      turn_id: `${m}-t${i}`, assistant_message_id: `${m}-a${i}`, assistant_content: `answer ${i} of ${m}`,
      consistency: 'eventual',
    });
  }
  await drain('lost ack');
  plan = () => 'pass';
  const check = storeCheck(memdData);
  assert.equal(check.memory_integrity, 'ok');
  // One job per turn: a write replayed under a new key would have made a second job (its
  // records deduplicated), so this is the count of writes the memory applied.
  assert.equal(check.jobs - jobsBefore, TURNS, 'ingest jobs created by the turns');
  const counts = check.message_counts;
  const mine = Object.entries(counts).filter(([id]) => id.startsWith(`${m}-`));
  assert.equal(mine.length, 2 * TURNS, `stored writes: ${mine.length} of ${2 * TURNS} messages`);
  const twice = mine.filter(([, n]) => n !== 1);
  assert.deepEqual(twice, [], 'every message stored exactly once');
  const conflicts = proxy.ledger.filter((e) => e.upstreamCode === 'idempotency_conflict');
  assert.equal(conflicts.length, 0, 'memd answered no idempotency_conflict');
  assert.ok(proxy.ledger.filter((e) => e.action === 'drop-after').length >= 1, 'answers were dropped');
}, { timeoutMs: 400_000 });  // ~30 s in a Debug build; several times that under ASan

// --- 2: status matrix on recall ------------------------------------------------------------------
const RETRYABLE = new Set([408, 425, 429, 500, 502, 503, 504]);
const redirectTarget = await countingListener(certs);
cleanups.push(() => redirectTarget.close());
const errorBody = (status, code) => JSON.stringify({ error: { code, message: `injected ${status}`, request_id: 'req-test' } });
const STATUS_CASES = [
  ...[301, 302, 307, 308].flatMap((st) => [
    { st, headers: { location: `${redirectTarget.url}/v1/scopes/team/recall` }, body: '' },
    { st, headers: { location: 'file:///etc/passwd' }, body: '' },
  ]),
  ...[204, 400, 401, 403, 404, 408, 409, 410, 411, 413, 422, 425, 500, 502, 503, 504]
    .map((st) => ({ st, headers: st === 401 ? { 'www-authenticate': 'Bearer' } : {}, body: st === 204 ? '' : errorBody(st, `code_${st}`) })),
  { st: 409, headers: {}, body: errorBody(409, 'idempotency_conflict') },
  { st: 429, headers: { 'retry-after': '1' }, body: errorBody(429, 'rate_limited') },
  { st: 429, headers: {}, body: errorBody(429, 'quota_exceeded') },
];

for (const c of STATUS_CASES) {
  await r.test(`recall answered ${c.st}${c.headers.location ? ` → ${c.headers.location.slice(0, 24)}` : ''}${c.headers['retry-after'] ? ' Retry-After 1' : ''}: isError, ${RETRYABLE.has(c.st) ? `${MAX_ATTEMPTS} attempts` : 'one attempt'}`, async () => {
    let n = 0;
    plan = (req) => {
      if (!isRecall(req)) return 'pass';
      n += 1;
      return { status: c.st, headers: c.headers, body: c.body };
    };
    const res = await s.call({ name: 'tmcra_recall', arguments: { query: 'status matrix probe' } }, { timeout: 60_000 });
    plan = () => 'pass';
    assert.equal(res.isError, true, `isError expected for ${c.st}: ${textOf(res).slice(0, 300)}`);
    assert.equal(n, RETRYABLE.has(c.st) ? MAX_ATTEMPTS : 1, `attempts for ${c.st}`);
    assert.equal(redirectTarget.connections(), 0, 'no redirect followed');
  });
}

// --- 3: invalid 2xx recall bodies ----------------------------------------------------------------
let sample;
await r.test('a valid recall through the proxy (the sample the invalid bodies are made from)', async () => {
  plan = (req) => (isRecall(req) ? { forward: true } : 'pass');
  const orig = proxy.forward.bind(proxy);
  proxy.forward = async (req, body) => {
    const up = await orig(req, body);
    if (/\/recall$/.test(req.url) && up.status === 200) sample = JSON.parse(up.body.toString('utf8'));
    return up;
  };
  await call(s, 'tmcra_recall', { query: 'lost ack turn' });
  proxy.forward = orig;
  plan = () => 'pass';
  assert.ok(sample && sample.prompt_evidence, 'sample recall body');
});

const mutate = (fn) => () => { const x = structuredClone(sample); fn(x); return JSON.stringify(x); };
const INVALID = [
  ['empty body', () => ''],
  ['not JSON', () => 'not json'],
  ['truncated JSON', () => JSON.stringify(sample).slice(0, 40)],
  ['an array', () => '[]'],
  ['a string', () => '"recall"'],
  ['a number', () => '42'],
  ['null', () => 'null'],
  ['an empty object', () => '{}'],
  ['depth 100000', () => '['.repeat(100000) + ']'.repeat(100000)],
  ['invalid UTF-8', () => Buffer.concat([Buffer.from(JSON.stringify(sample).slice(0, -1) + ',"x":"'), Buffer.from([0xff, 0xfe]), Buffer.from('"}')])],
  ['a lone surrogate in content', mutate((x) => { x.prompt_evidence.content = 'x\ud800'; x.prompt_evidence.content_character_count = 2; })],
  ['a BOM before the JSON', () => Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from(JSON.stringify(sample))])],
  ['NaN', () => JSON.stringify(sample).replace(/"content_character_count":\d+/, '"content_character_count":NaN')],
  ['Infinity', () => JSON.stringify(sample).replace(/"content_character_count":\d+/, '"content_character_count":Infinity')],
  ['trailing garbage', () => `${JSON.stringify(sample)} trailing`],
  ['two objects', () => `${JSON.stringify(sample)}${JSON.stringify(sample)}`],
  ['query_id missing', mutate((x) => { delete x.query_id; })],
  ['query_id a number', mutate((x) => { x.query_id = 7; })],
  ['query_id empty', mutate((x) => { x.query_id = ''; })],
  ['scope_name of another scope', mutate((x) => { x.scope_name = 'someone-else'; })],
  ['scope_name missing', mutate((x) => { delete x.scope_name; })],
  ['index_job_id missing', mutate((x) => { delete x.index_job_id; })],
  ['evidence_route missing', mutate((x) => { delete x.evidence_route; })],
  ['evidence_route an array', mutate((x) => { x.evidence_route = []; })],
  ['evidence_route.selected unknown', mutate((x) => { x.evidence_route.selected = 'guessed'; })],
  ['evidence_route.requested empty', mutate((x) => { x.evidence_route.requested = ''; })],
  ['evidence_route.reasons a number inside', mutate((x) => { x.evidence_route.reasons = ['ok', 1]; })],
  ['prompt_evidence missing', mutate((x) => { delete x.prompt_evidence; })],
  ['prompt_evidence a string', mutate((x) => { x.prompt_evidence = 'text'; })],
  ['content a number', mutate((x) => { x.prompt_evidence.content = 5; })],
  ['content_sha256 of another text', mutate((x) => { x.prompt_evidence.content_sha256 = crypto.createHash('sha256').update('another').digest('hex'); })],
  ['content_sha256 upper case', mutate((x) => { x.prompt_evidence.content_sha256 = x.prompt_evidence.content_sha256.toUpperCase(); })],
  ['content_sha256 short', mutate((x) => { x.prompt_evidence.content_sha256 = 'abc'; })],
  ['content changed, sha kept', mutate((x) => { x.prompt_evidence.content += ' injected'; x.prompt_evidence.content_character_count += 9; })],
  ['content_character_count off by one', mutate((x) => { x.prompt_evidence.content_character_count += 1; })],
  ['content_character_count missing', mutate((x) => { delete x.prompt_evidence.content_character_count; })],
  ['content_character_count a string', mutate((x) => { x.prompt_evidence.content_character_count = '12'; })],
  ['format unknown', mutate((x) => { x.prompt_evidence.format = 'text/html'; })],
  ['mode unknown', mutate((x) => { x.prompt_evidence.mode = 'free'; })],
  ['trust_boundary missing', mutate((x) => { delete x.prompt_evidence.trust_boundary; })],
  ['trust_boundary empty', mutate((x) => { x.prompt_evidence.trust_boundary = ''; })],
  ['source_text_verbatim a string', mutate((x) => { x.prompt_evidence.source_text_verbatim = 'yes'; })],
  ['schema_version missing', mutate((x) => { delete x.prompt_evidence.schema_version; })],
  ['evidence an array', mutate((x) => { x.evidence = []; })],
  ['evidence missing', mutate((x) => { delete x.evidence; })],
];

await r.test(`${INVALID.length} invalid 200 recall bodies: every one isError, never a receipt`, async () => {
  assert.ok(INVALID.length >= 40, `${INVALID.length} variants`);
  const accepted = [];
  for (const [what, body] of INVALID) {
    plan = (req) => (isRecall(req) ? { status: 200, headers: {}, body: body() } : 'pass');
    const res = await s.call({ name: 'tmcra_recall', arguments: { query: 'invalid body probe' } }, { timeout: 60_000 });
    if (res.isError !== true) accepted.push(`${what}: ${textOf(res).slice(0, 200)}`);
  }
  plan = () => 'pass';
  assert.deepEqual(accepted, [], 'invalid bodies passed on as receipts');
});

// --- 4: writes under faults, then the final drain --------------------------------------------------
const WRITE_FAULTS = [
  ['500', { status: 500, headers: {}, body: errorBody(500, 'internal_error') }],
  ['503 Retry-After 0', { status: 503, headers: { 'retry-after': '0' }, body: errorBody(503, 'unavailable') }],
  ['429', { status: 429, headers: {}, body: errorBody(429, 'rate_limited') }],
  ['401', { status: 401, headers: { 'www-authenticate': 'Bearer' }, body: errorBody(401, 'unauthorized') }],
  ['403', { status: 403, headers: {}, body: errorBody(403, 'forbidden') }],
  ['302 redirect', { status: 302, headers: { location: `${redirectTarget.url}/v1/scopes/team/ingest` }, body: '' }],
  ['reset before the write', 'drop-before'],
  ['reset after the write', 'drop-after'],
  ['truncated answer after the write', 'truncate-after'],
  ['stall 4 s', { stall: 4000 }],
  ['applied, answered 200 instead of 202', { forward: true, status: 200 }],
  ['applied, answered not JSON', { forward: true, body: 'not json' }],
  ['applied, answered []', { forward: true, body: '[]' }],
  ['applied, answered {}', { forward: true, body: '{}' }],
  ['applied, answered a job without status', { forward: true, mutateJob: (j) => { delete j.status; } }],
  ['applied, answered a job with an unknown status', { forward: true, mutateJob: (j) => { j.status = 'exploded'; } }],
  ['applied, answered a job of another scope', { forward: true, mutateJob: (j) => { j.scope_name = 'other'; } }],
  ['applied, answered depth 100000', { forward: true, body: '['.repeat(100000) + ']'.repeat(100000) }],
];

await r.test(`writes under ${WRITE_FAULTS.length} faults, then the drain: 0 lost, 0 written twice`, async () => {
  const m = `wf${hex()}`;
  const ids = [];
  const jobsBefore = storeCheck(memdData).jobs;
  for (const [what, action] of WRITE_FAULTS) {
    let faults = 0;
    plan = (req) => {
      if (!isWrite(req) || faults >= 3) return 'pass';
      faults += 1;
      if (action && action.mutateJob) {
        return { forward: true, rewrite: action.mutateJob };
      }
      return action;
    };
    const id = `${m}-${ids.length}`;
    ids.push(id);
    const res = await s.call({ name: 'tmcra_ingest', arguments: {
      session_id: `${m}-s`, messages: [{ message_id: id, role: 'user', content: `write under fault: ${what} (${id})` }],
    } }, { timeout: 60_000 });
    // Either queued (durable, not yet delivered) or an error: never a success the memory did
    // not confirm. A receipt that says succeeded must be true: checked after the drain.
    if (res.isError !== true) {
      const body = res.structuredContent ?? {};
      assert.ok(typeof body === 'object', `${what}: structured answer`);
    }
    await sleep(50);
  }
  plan = () => 'pass';
  assert.equal(redirectTarget.connections(), 0, 'no redirect followed');
  await drain('writes under faults');
  const check = storeCheck(memdData);
  assert.equal(check.memory_integrity, 'ok');
  assert.equal(check.jobs - jobsBefore, ids.length, 'one ingest job per write, none applied twice');
  const counts = check.message_counts;
  const lost = ids.filter((id) => !counts[id]);
  const twice = ids.filter((id) => counts[id] > 1);
  assert.deepEqual(lost, [], 'lost writes');
  assert.deepEqual(twice, [], 'writes stored twice');
}, { timeoutMs: 120_000 });

// --- 5: job polls under faults, then the drain ---------------------------------------------------
// Delivery asks tmcra-memd about a round's jobs with POST /v1/jobs/batch. Each fault is injected
// on the first such request after a few items were left submitted (their own polls refused);
// the last one is a 404, as from a memory without the endpoint, after which the jobs are asked
// about one by one.
const isJobsBatch = (req) => req.method === 'POST' && req.path === '/v1/jobs/batch';
const isJobPoll = (req) => isJobsBatch(req) || (req.method === 'GET' && req.path.startsWith('/v1/jobs/'));
const entryRewrite = (edit) => ({ forward: true, rewrite: edit });
const POLL_FAULTS = [
  ['500', { status: 500, headers: {}, body: errorBody(500, 'internal_error') }],
  ['503 Retry-After 0', { status: 503, headers: { 'retry-after': '0' }, body: errorBody(503, 'unavailable') }],
  ['403', { status: 403, headers: {}, body: errorBody(403, 'forbidden') }],
  ['reset before the answer', 'drop-before'],
  ['reset after the answer was made', 'drop-after'],
  ['truncated answer', 'truncate-after'],
  ['stall 4 s', { stall: 4000 }],
  ['answered not JSON', { forward: true, body: 'not json' }],
  ['answered {}', { forward: true, body: '{}' }],
  ['answered no entries', { forward: true, body: '{"jobs":[]}' }],
  ['answered 202', { forward: true, status: 202 }],
  ['an entry naming another job', entryRewrite((e) => { e.job_id = 'job_other'; })],
  ['an entry without status_code', entryRewrite((e) => { delete e.status_code; })],
  ['an entry of status 200 without its job', entryRewrite((e) => { delete e.job; })],
  ['an entry of status 302', entryRewrite((e) => { e.status_code = 302; delete e.job; })],
  ['a job of another id in its entry', entryRewrite((e) => { if (e.job) e.job.job_id = 'job_other'; })],
  ['a job with an unknown status', entryRewrite((e) => { if (e.job) e.job.status = 'exploded'; })],
  ['a job without attempts', entryRewrite((e) => { if (e.job) delete e.job.attempts; })],
  ['an entry of status 503', entryRewrite((e) => { e.status_code = 503; delete e.job; e.error = { code: 'unavailable' }; })],
  ['404: no such endpoint', { status: 404, headers: {}, body: errorBody(404, 'not_found') }],
];

await r.test(`job polls under ${POLL_FAULTS.length} faults, then the drain: 0 lost, 0 written twice`, async () => {
  const m = `jp${hex()}`;
  const ids = [];
  const jobsBefore = storeCheck(memdData).jobs;
  const ledgerFrom = proxy.ledger.length;
  // No answer here may dead-letter a write (the drain replays dead letters, so the count is
  // checked at every step, not only at the end).
  const deadBefore = (await call(s, 'tmcra_reconcile', {})).queue_counts.dead_letter;
  for (const [what, action] of POLL_FAULTS) {
    plan = (req) => (isJobPoll(req) ? { status: 503, headers: {}, body: errorBody(503, 'unavailable') } : 'pass');
    for (let k = 0; k < 3; k += 1) {
      const id = `${m}-${ids.length}`;
      ids.push(id);
      const res = await s.call({ name: 'tmcra_ingest', arguments: {
        session_id: `${m}-s`, messages: [{ message_id: id, role: 'user', content: `polled under fault: ${what} (${id})` }],
      } }, { timeout: 60_000 });
      assert.notEqual(res.isError, true, `${what}: ingest: ${textOf(res)}`);
    }
    let faulted = false;
    plan = (req) => {
      if (!isJobsBatch(req) || faulted) return 'pass';
      faulted = true;
      return action;
    };
    // A reconcile asks about the submitted items' jobs (background delivery may ask first).
    const res = await call(s, 'tmcra_reconcile', {}, `${what}: reconcile`);
    assert.ok(faulted, `${what}: a jobs batch request was made`);
    assert.equal(res.queue_counts.dead_letter, deadBefore, `${what}: writes dead-lettered`);
  }
  // Once a memory answered 404, its jobs are asked about one by one (polls already in flight
  // beside the one that got the 404 may still have gone to the endpoint).
  assert.ok(proxy.ledger.slice(ledgerFrom).some((e) => isJobsBatch(e) && e.action.includes('"status":404')),
    'the 404 was injected');
  plan = (req) => (isJobPoll(req) ? { status: 503, headers: {}, body: errorBody(503, 'unavailable') } : 'pass');
  for (let k = 0; k < 3; k += 1) {
    const id = `${m}-${ids.length}`;
    ids.push(id);
    await call(s, 'tmcra_ingest', { session_id: `${m}-s`,
      messages: [{ message_id: id, role: 'user', content: `polled after the 404 (${id})` }] });
  }
  plan = () => 'pass';
  const afterFrom = proxy.ledger.length;
  const settled = await call(s, 'tmcra_reconcile', {}, 'after the 404: reconcile');
  assert.equal(settled.queue_counts.dead_letter, deadBefore, 'after the 404: writes dead-lettered');
  await drain('job polls under faults');
  const after = proxy.ledger.slice(afterFrom);
  assert.deepEqual(after.filter(isJobsBatch), [], 'no jobs batch request after the 404');
  assert.ok(after.some((e) => e.method === 'GET' && e.path.startsWith('/v1/jobs/')),
    'jobs asked about one by one after the 404');
  const check = storeCheck(memdData);
  assert.equal(check.memory_integrity, 'ok');
  assert.equal(check.jobs - jobsBefore, ids.length, 'one ingest job per write, none applied twice');
  const counts = check.message_counts;
  assert.deepEqual(ids.filter((id) => !counts[id]), [], 'lost writes');
  assert.deepEqual(ids.filter((id) => counts[id] > 1), [], 'writes stored twice');
}, { timeoutMs: 240_000 });

await r.test('stdout carried only JSON-RPC; tmcra-memd exits 0 on SIGTERM', async () => {
  await s.closeAndCheckExit();
  assertAllStdoutPure(logs);
  const exit = await memd.stop('SIGTERM');
  assert.equal(exit.code, 0, `tmcra-memd exit: ${JSON.stringify(exit)}`);
});

await r.test('secret canary: the key is nowhere in stdout, stderr, the outbox, state or memd files', async () => {
  const hits = findSecret(key, {
    dirs: [env.HOME, memdData, path.dirname(s.logPath)],
    texts: [s.stderr(), memd.stderr()],
  });
  assert.deepEqual(hits, [], 'traces of the key');
});

await r.finish();
