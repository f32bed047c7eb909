#!/usr/bin/env node
// memory_e2e.mjs — the embedded memory tools end to end through the official TypeScript SDK
// v1 client (@modelcontextprotocol/sdk 1.32.2), every server process behind tap.mjs so that
// stdout purity and exit-on-EOF are checked too.
//
//   node memory_e2e.mjs <tmcra-mcp> <tmcra-mcp-testserver>
//
// A fresh temp HOME and TMCRA_DATA_DIR (lib.mjs serverEnv), no TMCRA_API_KEY: embedded mode.
// tmcra_ingest a user/assistant pair (unique marker, Japanese, accented Latin, emoji) →
// tmcra_wait_job → tmcra_recall (wait_for_job_id) finds both texts verbatim, hashes match,
// trust boundaries are set → a Japanese and an accented query find them too → invalid
// ingests are rejected naming the field and store nothing → a NEW server process on the
// same data dir recalls the same texts.
import crypto from 'node:crypto';
import {
  Runner, assert, parseBins, requireNodeModules, connectV1, assertAllStdoutPure, textOf,
  serverEnv, callOk, sha256Hex,
} from './lib.mjs';

const NAME = 'memory_e2e.mjs';
requireNodeModules(NAME, ['@modelcontextprotocol/sdk']);
const bins = parseBins(NAME);
const r = new Runner(NAME, { budgetMs: 120_000 });
const logs = [];
const sessions = [];
const track = (s) => { logs.push(s.logPath); sessions.push(s); return s; };
r.onCleanup(async () => { for (const s of sessions) await s.closeQuietly(); });

const env = serverEnv();
const marker = `mk${crypto.randomBytes(8).toString('hex')}`;
const SESSION_ID = `e2e-${marker}`;
const USER_TEXT = `Please remember the locker passphrase ${marker} for the library trip. ` +
  '東京の図書館で三時に会いましょう。 Café crème à la française, déjà vu, São Paulo 🎉';
const ASSISTANT_TEXT = `Noted: the locker passphrase is ${marker}.\n` +
  'また明日、図書館で。 Naïve résumé über Zürich 🚀';
const INGEST_ARGS = {
  session_id: SESSION_ID,
  consistency: 'read_your_writes',
  messages: [
    { message_id: `${marker}-u`, role: 'user', content: USER_TEXT, timestamp: new Date().toISOString() },
    { message_id: `${marker}-a`, role: 'assistant', content: ASSISTANT_TEXT },
  ],
};
const QUERY = 'locker passphrase for the library trip';

/** The checks every successful recall of our pair must pass; returns the receipt. */
async function assertRecallFindsPair(client, args, what) {
  const rc = await callOk(client, 'tmcra_recall', args, { what });
  assert.equal(rc.receipt_type, 'recall', `${what}: receipt_type`);
  assert.equal(rc.trust_boundary, 'untrusted_memory_data', `${what}: top-level trust_boundary`);
  const pe = rc.prompt_evidence;
  assert.ok(pe && typeof pe.content === 'string', `${what}: prompt_evidence.content missing: ${JSON.stringify(rc).slice(0, 400)}`);
  for (const [label, text] of [['user', USER_TEXT], ['assistant', ASSISTANT_TEXT]]) {
    assert.ok(pe.content.includes(text),
      `${what}: the ${label} text is not verbatim in prompt_evidence.content\nexpected: ${JSON.stringify(text)}\ncontent:  ${JSON.stringify(pe.content)}`);
  }
  assert.equal(pe.content_sha256, await sha256Hex(pe.content), `${what}: prompt_evidence.content_sha256 != sha256(content)`);
  const ic = rc.injectable_context;
  assert.ok(ic && typeof ic.content === 'string', `${what}: injectable_context.content missing`);
  // The evidence is small, so the budget keeps all of it.
  for (const text of [USER_TEXT, ASSISTANT_TEXT]) {
    assert.ok(ic.content.includes(text), `${what}: injectable_context.content lacks ${JSON.stringify(text)}:\n${JSON.stringify(ic.content)}`);
  }
  assert.equal(ic.content_sha256, await sha256Hex(ic.content), `${what}: injectable_context.content_sha256 != sha256(content)`);
  // injectable_context is prompt_evidence with budget-selected content: same trust boundary.
  assert.equal(typeof ic.trust_boundary, 'string', `${what}: injectable_context.trust_boundary missing`);
  assert.ok(ic.trust_boundary.length > 0, `${what}: injectable_context.trust_boundary empty`);
  assert.equal(ic.trust_boundary, pe.trust_boundary, `${what}: injectable_context.trust_boundary != prompt_evidence.trust_boundary`);
  return rc;
}

async function records(client, what) {
  const st = await callOk(client, 'tmcra_status', {}, { what });
  assert.equal(st.memory_mode, 'embedded', `${what}: memory_mode`);
  assert.equal(st.store?.reachable, true, `${what}: store not reachable: ${JSON.stringify(st.store)}`);
  const n = st.store?.figures?.records;
  assert.ok(Number.isInteger(n), `${what}: store.figures.records missing: ${JSON.stringify(st.store)}`);
  return { n, st };
}

// --- first server process ------------------------------------------------------------
let s1;
let jobId;
await r.test('[server 1] connect; tmcra_status: embedded, fresh data dir, 0 records', async () => {
  s1 = track(await connectV1({ bin: bins.server, label: 'mem-1', env }));
  const { n, st } = await records(s1.client, 'status');
  assert.equal(n, 0, 'a fresh data dir must start with 0 records');
  assert.equal(st.memory?.data_dir, env.TMCRA_DATA_DIR, `memory.data_dir: ${JSON.stringify(st.memory)}`);
});

if (s1) {
  await r.test('[server 1] tmcra_ingest user/assistant pair -> ingest receipt with a job', async () => {
    const rc = await callOk(s1.client, 'tmcra_ingest', INGEST_ARGS);
    assert.equal(rc.receipt_type, 'ingest', 'receipt_type');
    assert.equal(typeof rc.job_id, 'string', `job_id: ${JSON.stringify(rc)}`);
    assert.ok(rc.job_id.length > 0, 'job_id empty');
    assert.ok(Array.isArray(rc.jobs) && rc.jobs.some((j) => j.job_id === rc.job_id), `jobs[] lacks ${rc.job_id}: ${JSON.stringify(rc.jobs)}`);
    assert.ok(['submitted', 'succeeded'].includes(rc.status), `status ${JSON.stringify(rc.status)}`);
    jobId = rc.job_id;
  });
}

if (s1 && jobId) {
  await r.test('[server 1] tmcra_wait_job -> succeeded, final, source_event_seq', async () => {
    const job = await callOk(s1.client, 'tmcra_wait_job', { job_id: jobId, timeout_seconds: 30, poll_interval_seconds: 0.1 });
    assert.equal(job.job_id, jobId, 'job_id');
    assert.equal(job.status, 'succeeded', `status: ${JSON.stringify(job)}`);
    assert.equal(job.final, true, 'final');
    const seq = job.watermarks?.source_event_seq;
    assert.ok(Number.isInteger(seq) && seq > 0, `watermarks.source_event_seq: ${JSON.stringify(job.watermarks)}`);
  });

  await r.test('[server 1] tmcra_get_job agrees', async () => {
    const job = await callOk(s1.client, 'tmcra_get_job', { job_id: jobId });
    assert.equal(job.status, 'succeeded', `status: ${JSON.stringify(job)}`);
    assert.equal(job.final, true, 'final');
  });

  await r.test('[server 1] tmcra_recall (wait_for_job_id) returns both texts verbatim, hashes and trust boundaries', async () => {
    await assertRecallFindsPair(s1.client, { query: QUERY, wait_for_job_id: jobId }, 'recall');
  });

  await r.test('[server 1] tmcra_recall with a Japanese query (図書館) finds the Japanese text', async () => {
    const rc = await callOk(s1.client, 'tmcra_recall', { query: '図書館' }, { what: 'japanese recall' });
    assert.ok(rc.prompt_evidence.content.includes(USER_TEXT),
      `Japanese query did not find the user text:\n${JSON.stringify(rc.prompt_evidence.content)}`);
    assert.equal(rc.prompt_evidence.content_sha256, await sha256Hex(rc.prompt_evidence.content), 'content_sha256');
  });

  await r.test('[server 1] tmcra_recall with an accented query (française) finds the text', async () => {
    const rc = await callOk(s1.client, 'tmcra_recall', { query: 'française' }, { what: 'accented recall' });
    assert.ok(rc.prompt_evidence.content.includes(USER_TEXT),
      `accented query did not find the user text:\n${JSON.stringify(rc.prompt_evidence.content)}`);
  });

  await r.test('[server 1] invalid tmcra_ingest is rejected naming the field; nothing is stored', async () => {
    const before = (await records(s1.client, 'status before')).n;
    assert.equal(before, 2, 'records after the valid ingest');
    const cases = [
      {
        what: 'role "robot"',
        field: 'messages[0].role',
        args: { session_id: 'bad-1', messages: [{ message_id: 'b1', role: 'robot', content: `robot ${marker}` }] },
      },
      {
        what: 'empty content (second message)',
        field: 'messages[1].content',
        args: {
          session_id: 'bad-2',
          messages: [
            { message_id: 'b2', role: 'user', content: `valid sibling ${marker}` },
            { message_id: 'b3', role: 'assistant', content: '' },
          ],
        },
      },
    ];
    for (const c of cases) {
      const res = await s1.client.callTool({ name: 'tmcra_ingest', arguments: c.args });
      assert.equal(res.isError, true, `${c.what}: expected isError, got ${JSON.stringify(res).slice(0, 400)}`);
      assert.ok(textOf(res).includes(c.field), `${c.what}: error text does not name ${c.field}: ${textOf(res)}`);
    }
    const after = (await records(s1.client, 'status after')).n;
    assert.equal(after, before, 'record count changed after rejected ingests');
  });

  await r.test('[server 1] close: exits 0 on stdin EOF', async () => {
    s1.assertNoClientErrors();
    await s1.closeAndCheckExit();
  });
}

// --- a new server process on the same data dir --------------------------------------------
if (jobId) {
  let s2;
  await r.test('[server 2] new process, same data dir: 2 records', async () => {
    s2 = track(await connectV1({ bin: bins.server, label: 'mem-2', env }));
    const { n } = await records(s2.client, 'status');
    assert.equal(n, 2, 'records persisted across processes');
  });
  if (s2) {
    await r.test('[server 2] tmcra_recall (no wait_for_job_id) still returns both texts verbatim', async () => {
      await assertRecallFindsPair(s2.client, { query: QUERY }, 'recall after restart');
    });
    await r.test('[server 2] close: exits 0 on stdin EOF', async () => {
      s2.assertNoClientErrors();
      await s2.closeAndCheckExit();
    });
  }
}

await r.test('stdout purity: every byte on every server stdout is a JSON-RPC line', async () => {
  for (const s of sessions) await s.closeQuietly();
  const n = assertAllStdoutPure(logs);
  assert.ok(n > 0, 'no messages recorded');
});

await r.finish();
