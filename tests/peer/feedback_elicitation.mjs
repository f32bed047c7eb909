#!/usr/bin/env node
// feedback_elicitation.mjs — tmcra_feedback (docs/contract.md §4.3.2) end to end through the
// official SDK clients: the user's confirmation travels as a real server -> client
// `elicitation/create`, answered by the v1 SDK (@modelcontextprotocol/sdk 1.32.2, `elicitation: {}`)
// and once by the v2 SDK (@modelcontextprotocol/client 2.4.0, `elicitation: {form: {}}`). Every
// server runs behind tap.mjs, so stdout purity and exit-on-EOF are checked too.
//
//   node feedback_elicitation.mjs <tmcra-mcp> <tmcra-mcp-testserver>
//
// A fresh temp HOME, TMCRA_DATA_DIR and TMCRA_MEMORY_STATE_DIR (embedded mode, no API key),
// shared by all server processes of this script. One user message with a unique marker is
// ingested; its memory_id comes from tmcra_recall's structured evidence. "Visible" below means
// tmcra_recall of the marker lists that memory_id in evidence.windows[].records[] (and, in
// agreement, prompt_evidence.content holds the text); "hidden" means neither does.
//
// Proved:
//   1. accept + confirm:true writes: a FeedbackView (feedback_id, effective:true) and the record
//      is hidden. The elicitation message is exactly §4.3.2's (prefix + Python json.dumps of
//      the preview + suffix), holds the source text verbatim, and the schema has a boolean
//      `confirm` that is not required.
//   2. a retry with the same idempotency key is not applied twice (proof in the test comment).
//   3. decline, accept with confirm:false, cancel, and a JSON-RPC error answer write nothing.
//   5. no answer within the confirmation timeout writes nothing (`confirmation_expired`). The
//      timeout is shortened through TMCRA_CONFIRMATION_TIMEOUT_MS; a server that ignores the
//      variable (production default 120 s) is detected and the test is skipped with a note.
//   6. a client without the elicitation capability gets `confirmation_unavailable`, receives no
//      elicitation/create, and nothing is written.
//   Every idempotency key of 3-6 is afterwards used for an ACCEPTED call with the same arguments,
//   which must create a NEW feedback now: the refused call never consumed the key.
//   7. the v2 client accepts: FeedbackView, record hidden; restore makes it visible again.
import crypto from 'node:crypto';
import path from 'node:path';
import {
  Runner, assert, parseBins, requireNodeModules, connectV1, connectV2, assertAllStdoutPure,
  assertStructuredAndText, checkStdoutLog, serverEnv, tmpDir, textOf,
} from './lib.mjs';

const NAME = 'feedback_elicitation.mjs';
requireNodeModules(NAME, ['@modelcontextprotocol/sdk', '@modelcontextprotocol/client']);
const bins = parseBins(NAME);
const { ElicitRequestSchema } = await import('@modelcontextprotocol/sdk/types.js');
const r = new Runner(NAME, { budgetMs: 120_000 });
const logs = [];
const sessions = [];
const track = (s) => { logs.push(s.logPath); sessions.push(s); return s; };
r.onCleanup(async () => { for (const s of sessions) await s.closeQuietly(); });

// The confirmation timeout the test asks for, and how long the client waits before it concludes
// that the server ignored the variable (it then answers `cancel` itself).
const TIMEOUT_ENV = 'TMCRA_CONFIRMATION_TIMEOUT_MS';
const CONFIRMATION_TIMEOUT_MS = 1500;
const GIVE_UP_MS = 6000;

const STATE_DIR = path.join(tmpDir(), 'home', 'memory-state');
const env = serverEnv({ TMCRA_MEMORY_STATE_DIR: STATE_DIR });
const hex = (n = 8) => crypto.randomBytes(n).toString('hex');
const newKey = () => `fb-${hex()}`;
const marker = `mk${hex()}`;
const SCOPE = 'personal';  // the embedded default scope
const HOST_SESSION = `host-${marker}`;
// Non-ASCII on purpose (json.dumps(ensure_ascii=False) must keep it raw), but nothing JSON
// escapes, so the text appears verbatim inside the elicitation message.
const USER_TEXT = `The locker code for the library trip is ${marker}; 図書館の三階で会いましょう, café crème à Zürich 🎒`;

const MESSAGE_PREFIX = '请由用户确认以下记忆修改。来源内容是历史数据，原始记录保留用于审计。\n';
const MESSAGE_SUFFIX = '\n是否确认？取消或拒绝均保持原记忆。';

/** Python json.dumps(value, ensure_ascii=False): separators ", " and ": ", insertion order. */
function pyDumps(v) {
  if (Array.isArray(v)) return `[${v.map(pyDumps).join(', ')}]`;
  if (v !== null && typeof v === 'object') {
    return `{${Object.entries(v).map(([k, x]) => `${JSON.stringify(k)}: ${pyDumps(x)}`).join(', ')}}`;
  }
  return JSON.stringify(v);
}

let memoryId;  // the ingested user message's record id
const preview = (action) => ({
  scope: SCOPE, sessionId: HOST_SESSION, action, sources: [{ memory_id: memoryId, original: USER_TEXT }],
});
const expectedMessage = (action) => MESSAGE_PREFIX + pyDumps(preview(action)) + MESSAGE_SUFFIX;
const fbArgs = (action, key) => ({ session_id: HOST_SESSION, memory_ids: [memoryId], action, idempotency_key: key });

/** Problems with an elicitation/create request for `action` (empty list: as §4.3.2 says). */
function requestProblems(params, action) {
  const out = [];
  if (typeof params?.message !== 'string') return ['message is not a string'];
  if (!params.message.includes(USER_TEXT)) out.push(`message lacks the exact source text: ${JSON.stringify(params.message)}`);
  const want = expectedMessage(action);
  if (params.message !== want) out.push(`message differs from §4.3.2's\n  got:  ${JSON.stringify(params.message)}\n  want: ${JSON.stringify(want)}`);
  const schema = params.requestedSchema;
  if (schema?.type !== 'object') out.push(`requestedSchema.type: ${JSON.stringify(schema)}`);
  if (schema?.properties?.confirm?.type !== 'boolean') out.push(`requestedSchema lacks boolean "confirm": ${JSON.stringify(schema)}`);
  if ((schema?.required ?? []).includes('confirm')) out.push('"confirm" must not be required');
  if (params.mode !== undefined && params.mode !== 'form') out.push(`mode ${JSON.stringify(params.mode)}`);
  return out;
}

/**
 * The client side of the confirmation dialog. `answer` is set by each test: an object, or a
 * function (params, extra) -> result. Every request is kept in `seen`.
 */
function makeResponder() {
  const self = { seen: [], problems: [], answer: null };
  self.handler = async (req, extra) => {
    self.seen.push(req.params);
    const a = self.answer;
    if (a === null) throw new Error('peer test: no elicitation was expected now');
    return typeof a === 'function' ? a(req.params, extra) : a;
  };
  /** Accept (confirm:true) only a request that is exactly right; otherwise decline. */
  self.acceptChecked = (action) => {
    self.answer = (params) => {
      const p = requestProblems(params, action);
      if (p.length) { self.problems.push(...p); return { action: 'decline' }; }
      return { action: 'accept', content: { confirm: true } };
    };
  };
  self.assertNoProblems = () => assert.deepEqual(self.problems, [], 'elicitation request problems');
  return self;
}

/** tools/call through either SDK that must not be isError; returns structuredContent. */
async function call(s, name, args, what = name) {
  const res = await s.call({ name, arguments: args });
  assert.notEqual(res.isError, true, `${what}: isError: ${textOf(res)}`);
  return assertStructuredAndText(res);
}

/** Is the ingested record recalled? Structured evidence and prompt text must agree. */
async function visible(s, what) {
  const rc = await call(s, 'tmcra_recall', { query: marker, include_structured_evidence: true }, `${what}: recall`);
  const ids = (rc.evidence?.windows ?? []).flatMap((w) => w.records ?? []).map((rec) => rec.memory_id);
  const inEvidence = ids.includes(memoryId);
  const inText = (rc.prompt_evidence?.content ?? '').includes(USER_TEXT);
  assert.equal(inText, inEvidence, `${what}: evidence.windows lists the record: ${inEvidence}, prompt_evidence.content holds its text: ${inText}`);
  return inEvidence;
}
const assertVisible = async (s, what) => assert.equal(await visible(s, what), true, `${what}: the record is no longer recalled`);
const assertHidden = async (s, what) => assert.equal(await visible(s, what), false, `${what}: the record is still recalled`);

const feedbackIds = new Set();
/** An accepted feedback: the FeedbackView. */
async function applied(s, responder, action, key, what) {
  responder.acceptChecked(action);
  const before = responder.seen.length;
  const fb = await call(s, 'tmcra_feedback', fbArgs(action, key), what);
  responder.answer = null;
  responder.assertNoProblems();
  assert.equal(responder.seen.length, before + 1, `${what}: the user was asked ${responder.seen.length - before} times`);
  assert.equal(typeof fb.feedback_id, 'string', `${what}: no feedback_id: ${JSON.stringify(fb)}`);
  assert.ok(fb.feedback_id.length > 0, `${what}: empty feedback_id`);
  assert.equal(fb.effective, true, `${what}: effective: ${JSON.stringify(fb)}`);
  assert.equal(fb.action, action, `${what}: action: ${JSON.stringify(fb)}`);
  assert.equal(fb.scope_name, SCOPE, `${what}: scope_name: ${JSON.stringify(fb)}`);
  assert.equal(fb.applied, undefined, `${what}: a FeedbackView has no "applied": ${JSON.stringify(fb)}`);
  return fb;
}

/** A refused feedback: {applied:false, status, preview}; nothing written. */
function assertNotApplied(st, status, action, what) {
  assert.equal(st.applied, false, `${what}: applied: ${JSON.stringify(st)}`);
  assert.equal(st.status, status, `${what}: status: ${JSON.stringify(st)}`);
  assert.equal(st.feedback_id, undefined, `${what}: a refused feedback carries a feedback_id: ${JSON.stringify(st)}`);
  assert.deepEqual(st.preview, preview(action), `${what}: preview`);
}

function elicitRequestsOnWire(logPath) {
  return checkStdoutLog(logPath).messages.filter((m) => m.method === 'elicitation/create');
}

// Keys of refused calls (3-6): each is later used once for an accepted call with the same args.
const refusedKeys = [];

// --- session A: v1 client, elicitation: {} ------------------------------------------------------
const A = makeResponder();
let sa;
await r.test('[setup] v1 client (elicitation:{}); ingest a marked user message, wait, recall its memory_id', async () => {
  sa = track(await connectV1({
    bin: bins.server, label: 'fb-v1', env, capabilities: { elicitation: {} },
    setup: (c) => c.setRequestHandler(ElicitRequestSchema, A.handler),
  }));
  assert.equal(sa.client.negotiatedVersion, '2025-11-25');
  const rc = await call(sa, 'tmcra_ingest', {
    session_id: `chat-${marker}`,
    messages: [{ message_id: `${marker}-u`, role: 'user', content: USER_TEXT, timestamp: new Date().toISOString() }],
  });
  const job = await call(sa, 'tmcra_wait_job', { job_id: rc.job_id, timeout_seconds: 30, poll_interval_seconds: 0.1 });
  assert.equal(job.status, 'succeeded', `job: ${JSON.stringify(job)}`);
  const recall = await call(sa, 'tmcra_recall', { query: marker, include_structured_evidence: true });
  const recs = (recall.evidence?.windows ?? []).flatMap((w) => w.records ?? []).filter((rec) => rec.text === USER_TEXT);
  assert.equal(recs.length, 1, `structured evidence should hold the message once: ${JSON.stringify(recall.evidence)?.slice(0, 600)}`);
  memoryId = recs[0].memory_id;
  assert.ok(typeof memoryId === 'string' && memoryId.length > 0, `memory_id: ${JSON.stringify(recs[0])}`);
  await assertVisible(sa, 'after ingest');
});

if (sa && memoryId) {
  const K1 = newKey();
  let first;
  await r.test('[1 accept] confirm:true -> FeedbackView (feedback_id, effective), exact request, record hidden', async () => {
    first = await applied(sa, A, 'ignore', K1, 'ignore');
    feedbackIds.add(first.feedback_id);
    await assertHidden(sa, 'after the accepted ignore');
  });

  // 2. Proof that a retry with the same key writes nothing. The memory applies, per record,
  // the NEWEST stored ignore/restore. So: (a) the retry returns the first feedback_id and
  // created_at; (b) a restore (new key) makes the record visible; (c) the ignore with the first
  // key, replayed once more and accepted again, returns the first feedback again and the record
  // STAYS visible: had the replay stored a second ignore, that ignore would now be the newest
  // and would hide the record; (d) control: an ignore with a NEW key does hide it, so (c)
  // observes what it claims to. (e) the same key with a different request is refused (409).
  if (first) {
    await r.test('[2 retry] same key + arguments (accepted again) -> the same feedback_id and created_at', async () => {
      const again = await applied(sa, A, 'ignore', K1, 'retry');
      assert.equal(again.feedback_id, first.feedback_id, 'a retry created a second feedback');
      assert.equal(again.created_at, first.created_at, 'created_at of the replayed feedback changed');
      await assertHidden(sa, 'after the retry');
    });
    await r.test('[2 retry] after a restore, replaying the first key does not hide the record again; a new key does', async () => {
      const restore = await applied(sa, A, 'restore', newKey(), 'restore');
      assert.ok(!feedbackIds.has(restore.feedback_id), 'restore returned an old feedback_id');
      feedbackIds.add(restore.feedback_id);
      await assertVisible(sa, 'after the restore');
      const replay = await applied(sa, A, 'ignore', K1, 'replay after restore');
      assert.equal(replay.feedback_id, first.feedback_id, 'the replay created a new feedback');
      await assertVisible(sa, 'after replaying the first key (a second ignore was stored)');
      const fresh = await applied(sa, A, 'ignore', newKey(), 'ignore with a new key');
      assert.ok(!feedbackIds.has(fresh.feedback_id), 'a new key returned an old feedback_id');
      feedbackIds.add(fresh.feedback_id);
      await assertHidden(sa, 'after an ignore with a new key');
    });
    await r.test('[2 retry] same key with a different request -> isError idempotency_conflict, nothing written', async () => {
      A.acceptChecked('restore');
      const res = await sa.call({ name: 'tmcra_feedback', arguments: fbArgs('restore', K1) });
      A.answer = null;
      A.assertNoProblems();
      assert.equal(res.isError, true, `expected isError, got ${JSON.stringify(res).slice(0, 400)}`);
      assert.match(textOf(res), /idempotency_conflict/, 'error text');
      await assertHidden(sa, 'after the refused restore');
      await applied(sa, A, 'restore', newKey(), 'restore for the next tests');
      await assertVisible(sa, 'after the restore for the next tests');
    });
  }

  // 3/4: refusals through the dialog.
  const refusals = [
    { title: '[3 decline] {action:"decline"} -> applied:false, status "decline"', answer: { action: 'decline' }, status: 'decline' },
    { title: '[3 decline] accept with confirm:false -> status "declined"', answer: { action: 'accept', content: { confirm: false } }, status: 'declined' },
    { title: '[4 cancel] {action:"cancel"} -> status "cancel"', answer: { action: 'cancel' }, status: 'cancel' },
    {
      title: '[4 error] the client answers with a JSON-RPC error -> status "confirmation_unavailable"',
      answer: () => { throw new Error('peer test: the dialog failed'); },
      status: 'confirmation_unavailable',
    },
  ];
  for (const c of refusals) {
    await r.test(`${c.title}; the record stays recalled`, async () => {
      const key = newKey();
      refusedKeys.push({ key, what: c.status });
      const before = A.seen.length;
      A.answer = c.answer;
      const st = await call(sa, 'tmcra_feedback', fbArgs('ignore', key), c.status);
      A.answer = null;
      assert.equal(A.seen.length, before + 1, 'the user should have been asked once');
      assert.deepEqual(requestProblems(A.seen.at(-1), 'ignore'), [], 'elicitation request');
      assertNotApplied(st, c.status, 'ignore', c.status);
      await assertVisible(sa, `after ${c.status}`);
    });
  }
}

// --- 5: timeout (session T, shortened confirmation timeout) ---------------------------------------
if (sa && memoryId) {
  const T = makeResponder();
  const key = newKey();
  let outcome;
  try {
    const st = track(await connectV1({
      bin: bins.server, label: 'fb-v1-timeout', env: { ...env, [TIMEOUT_ENV]: String(CONFIRMATION_TIMEOUT_MS) },
      capabilities: { elicitation: {} }, setup: (c) => c.setRequestHandler(ElicitRequestSchema, T.handler),
    }));
    let release;
    const released = new Promise((res) => { release = res; });
    let releasedByTest = false;
    let abortedAfterMs = null;
    const t0 = Date.now();
    // Never answer: wait until the server withdraws its request (notifications/cancelled aborts
    // the SDK handler, which then sends no response) or until we give up on the server.
    T.answer = (_params, extra) => new Promise((resolve) => {
      extra.signal.addEventListener('abort', () => { abortedAfterMs = Date.now() - t0; resolve({ action: 'cancel' }); }, { once: true });
      released.then(() => { releasedByTest = true; resolve({ action: 'cancel' }); });
    });
    const timer = setTimeout(release, GIVE_UP_MS);
    let res;
    try {
      res = await st.call({ name: 'tmcra_feedback', arguments: fbArgs('ignore', key) });
    } finally {
      clearTimeout(timer);
      release();
      T.answer = null;
    }
    outcome = { s: st, res, elapsed: Date.now() - t0, releasedByTest, abortedAfterMs };
  } catch (e) {
    outcome = { error: e };
  }
  refusedKeys.push({ key, what: 'timeout' });
  if (outcome.res && outcome.releasedByTest && outcome.abortedAfterMs === null &&
      outcome.res.structuredContent?.status === 'cancel') {
    r.log(`note: SKIPPED [5 timeout]: the server ignores ${TIMEOUT_ENV}=${CONFIRMATION_TIMEOUT_MS}: no result after ` +
      `${GIVE_UP_MS} ms (production timeout 120 s), so the client answered "cancel" itself. ` +
      `Wire ${TIMEOUT_ENV} into FeedbackToolDeps::confirmation_timeout (src/app/app_wiring.cc) to enable this test.`);
  } else {
    await r.test(`[5 timeout] no answer within ${TIMEOUT_ENV}=${CONFIRMATION_TIMEOUT_MS} -> status "confirmation_expired", request withdrawn, record stays`, async () => {
      if (outcome.error) throw outcome.error;
      const { s, res, elapsed, abortedAfterMs } = outcome;
      assert.notEqual(res.isError, true, `isError: ${textOf(res)}`);
      const st = assertStructuredAndText(res);
      assertNotApplied(st, 'confirmation_expired', 'ignore', 'timeout');
      assert.ok(elapsed >= CONFIRMATION_TIMEOUT_MS - 50, `the result came after ${elapsed} ms, before the ${CONFIRMATION_TIMEOUT_MS} ms timeout`);
      assert.equal(T.seen.length, 1, 'the user should have been asked once');
      assert.deepEqual(requestProblems(T.seen[0], 'ignore'), [], 'elicitation request');
      // The server withdraws the unanswered request: notifications/cancelled for its id.
      const wire = checkStdoutLog(s.logPath).messages;
      const req = wire.find((m) => m.method === 'elicitation/create');
      assert.ok(req, 'no elicitation/create on the wire');
      const withdrawn = wire.find((m) => m.method === 'notifications/cancelled' && m.params?.requestId === req.id);
      assert.ok(withdrawn, `no notifications/cancelled for elicitation request ${JSON.stringify(req.id)}`);
      assert.notEqual(abortedAfterMs, null, 'the SDK handler was never aborted');
      assert.equal(wire.indexOf(withdrawn) < wire.findIndex((m) => m.result?.structuredContent?.status === 'confirmation_expired'), true,
        'notifications/cancelled should precede the tool result');
      r.log(`note: [5 timeout] result after ${elapsed} ms; the request was withdrawn after ${abortedAfterMs} ms`);
      await assertVisible(s, 'after the timeout');
      s.assertNoClientErrors();
      await s.closeAndCheckExit();
    });
  }
}

// --- 6: a client without the elicitation capability ----------------------------------------------
if (sa && memoryId) {
  await r.test('[6 no capability] -> status "confirmation_unavailable", no elicitation/create sent, record stays', async () => {
    const s = track(await connectV1({ bin: bins.server, label: 'fb-v1-nocap', env, capabilities: {} }));
    const key = newKey();
    refusedKeys.push({ key, what: 'confirmation_unavailable (no capability)' });
    const st = await call(s, 'tmcra_feedback', fbArgs('ignore', key), 'no capability');
    assertNotApplied(st, 'confirmation_unavailable', 'ignore', 'no capability');
    assert.equal(elicitRequestsOnWire(s.logPath).length, 0, 'the server sent elicitation/create to a client without the capability');
    await assertVisible(s, 'after confirmation_unavailable');
    s.assertNoClientErrors();
    await s.closeAndCheckExit();
  });
}

// --- 3-6: no refused call consumed its key --------------------------------------------------------
// The record is visible before each accepted call (the refusal stored no ignore), the accepted
// call with the refused call's key and arguments then hides it, returns a feedback_id never seen
// before and a created_at not earlier than the moment this call started. Had the refused call
// stored a feedback under that key, the accepted call would have replayed it: an earlier
// created_at, and no new effect. A restore (new key) makes the record visible for the next key.
if (sa && memoryId && refusedKeys.length) {
  await r.test(`[3-6 keys] an accepted call reusing each refused call's key creates a new feedback (${refusedKeys.length} keys)`, async () => {
    for (const { key, what } of refusedKeys) {
      await assertVisible(sa, `before reusing the ${what} key`);
      const startedAt = Date.now() / 1000;  // ms floor: never later than the server's clock reading
      const fb = await applied(sa, A, 'ignore', key, `reuse of the ${what} key`);
      assert.ok(!feedbackIds.has(fb.feedback_id), `reuse of the ${what} key returned an old feedback_id`);
      feedbackIds.add(fb.feedback_id);
      assert.ok(fb.created_at >= startedAt,
        `reuse of the ${what} key returned a feedback created at ${fb.created_at}, before this call started (${startedAt}): the refused call wrote it`);
      await assertHidden(sa, `after reusing the ${what} key`);
      await applied(sa, A, 'restore', newKey(), `restore after the ${what} key`);
    }
    await assertVisible(sa, 'at the end');
  });
  await r.test('[v1] close: exits 0 on stdin EOF, no client-side errors', async () => {
    sa.assertNoClientErrors();
    await sa.closeAndCheckExit();
  });
}

// --- 7: v2 client accepts ------------------------------------------------------------------------
if (memoryId) {
  await r.test('[7 v2 elicitation:{form:{}}] accept -> FeedbackView, record hidden; restore -> visible again', async () => {
    const V = makeResponder();
    const s = track(await connectV2({
      bin: bins.server, label: 'fb-v2', env, capabilities: { elicitation: { form: {} } },
      setup: (c) => c.setRequestHandler('elicitation/create', V.handler),
    }));
    assert.equal(s.client.negotiatedVersion, '2025-11-25');
    await assertVisible(s, 'v2 before');
    const fb = await applied(s, V, 'ignore', newKey(), 'v2 ignore');
    assert.ok(!feedbackIds.has(fb.feedback_id), 'v2 ignore returned an old feedback_id');
    await assertHidden(s, 'v2 after the ignore');
    await applied(s, V, 'restore', newKey(), 'v2 restore');
    await assertVisible(s, 'v2 after the restore');
    s.assertNoClientErrors();
    await s.closeAndCheckExit();
  });
}

await r.test('stdout purity: every byte on every server stdout is a JSON-RPC line', async () => {
  for (const s of sessions) await s.closeQuietly();
  const n = assertAllStdoutPure(logs);
  assert.ok(n > 0, 'no messages recorded');
});

await r.finish();
