#!/usr/bin/env node
// concurrent_ingest.mjs — four tmcra-mcp processes (four official SDK v1 clients, each
// server behind tap.mjs) share ONE embedded data directory and ingest 500 turns (1000
// messages) concurrently between them.
//
//   node concurrent_ingest.mjs <tmcra-mcp> <tmcra-mcp-testserver>
//
// Turn i (a user + assistant pair carrying the unique word turnmark<i>x<run-hex>) is sent by
// client i % 4, in rounds of ROUND turns issued together with Promise.all, so that calls from
// all four processes contend for the SQLite store. Checks:
//   - the four servers start together on the fresh data dir (concurrent schema migration)
//   - every tmcra_ingest succeeds (no isError; no "locked"/"busy" text)
//   - every job reaches `succeeded`, waited for through a different process than the one that
//     submitted it (jobs are run by whichever process's worker claims them)
//   - every marker is recallable: tmcra_recall {query: marker} contains the marker
//   - tmcra_status on every process shows records == 1000, no pending or failed jobs
//   - every server exits 0 on stdin EOF, and every stdout is pure JSON-RPC
// Phase timings are printed as `note:` lines; there are no timing assertions.
import crypto from 'node:crypto';
import {
  Runner, assert, parseBins, requireNodeModules, connectV1, assertAllStdoutPure, textOf,
  serverEnv, callOk, assertStructuredAndText,
} from './lib.mjs';

const NAME = 'concurrent_ingest.mjs';
requireNodeModules(NAME, ['@modelcontextprotocol/sdk']);
const bins = parseBins(NAME);
// The watchdog leaves room for slow sanitizer builds; the script aims at well under 90 s.
const r = new Runner(NAME, { budgetMs: 270_000 });
const logs = [];
const sessions = [];
r.onCleanup(async () => { await Promise.all(sessions.map((s) => s.closeQuietly())); });

const CLIENTS = 4;
const TURNS = 500;
const ROUND = 24; // turns in flight at once (6 per process)
const REQUEST_TIMEOUT_MS = 120_000;
const run = crypto.randomBytes(4).toString('hex');
const env = serverEnv();
const markerOf = (i) => `turnmark${i}x${run}`;
const clientOf = (i) => i % CLIENTS;
const BUSY_RE = /locked|busy/i;

function turnArgs(i) {
  const m = markerOf(i);
  return {
    // Ten sessions shared by all four processes: concurrent writers to the same session.
    session_id: `conc-${run}-s${i % 10}`,
    consistency: 'read_your_writes',
    messages: [
      { message_id: `t${i}-u`, role: 'user', content: `Turn ${i}: please remember the code word ${m} for later. 第${i}回 ✓` },
      { message_id: `t${i}-a`, role: 'assistant', content: `Stored the code word ${m} (turn ${i}).` },
    ],
  };
}

/** Run fn(i) for i in [0, n), ROUND at a time; returns the results in order. */
async function inRounds(n, fn) {
  const out = new Array(n);
  for (let start = 0; start < n; start += ROUND) {
    const idx = [];
    for (let i = start; i < Math.min(n, start + ROUND); i += 1) idx.push(i);
    const res = await Promise.all(idx.map((i) => fn(i)));
    idx.forEach((i, k) => { out[i] = res[k]; });
  }
  return out;
}

/** callTool that never throws: {res} or {err}. */
async function tryCall(s, name, args) {
  try {
    return { res: await s.client.callTool({ name, arguments: args }, undefined, { timeout: REQUEST_TIMEOUT_MS }) };
  } catch (err) {
    return { err };
  }
}

const summarise = (problems, total, what) => `${problems.length} of ${total} ${what}:\n${problems.slice(0, 10).join('\n')}` +
  (problems.length > 10 ? `\n… and ${problems.length - 10} more` : '');

const timings = [];
async function timed(label, fn) {
  const t = Date.now();
  try { return await fn(); } finally { timings.push(`${label} ${((Date.now() - t) / 1000).toFixed(1)} s`); }
}

// --- four servers, one data dir ----------------------------------------------------------
await r.test(`${CLIENTS} servers start together on one fresh data dir`, async () => {
  const results = await timed('start', () => Promise.allSettled(Array.from({ length: CLIENTS }, (_, k) =>
    connectV1({ bin: bins.server, label: `conc-${k}`, env }))));
  for (const res of results) {
    if (res.status === 'fulfilled') { sessions.push(res.value); logs.push(res.value.logPath); }
  }
  const bad = results.map((res, k) => (res.status === 'rejected' ? `client ${k}: ${res.reason?.message}` : null)).filter(Boolean);
  assert.deepEqual(bad, [], 'connect failures');
  // The store is opened by the first memory tool call: do that on all four at once too.
  const st = await Promise.all(sessions.map((s, k) => callOk(s.client, 'tmcra_status', {}, { what: `status on client ${k}` })));
  st.forEach((x, k) => {
    assert.equal(x.memory_mode, 'embedded', `client ${k}: memory_mode`);
    assert.equal(x.memory?.data_dir, env.TMCRA_DATA_DIR, `client ${k}: data_dir`);
    assert.equal(x.store?.reachable, true, `client ${k}: store not reachable: ${JSON.stringify(x.store)}`);
    assert.equal(x.store?.figures?.records, 0, `client ${k}: records on a fresh data dir`);
  });
  // Four distinct processes.
  assert.equal(new Set(st.map((x) => x.pid)).size, CLIENTS, `pids: ${st.map((x) => x.pid)}`);
});

const ready = sessions.length === CLIENTS;
const jobIds = new Array(TURNS).fill(null);

if (ready) {
  await r.test(`${TURNS} turns ingested concurrently by ${CLIENTS} processes: every call succeeds`, async () => {
    const results = await timed('ingest', () => inRounds(TURNS, (i) => tryCall(sessions[clientOf(i)], 'tmcra_ingest', turnArgs(i))));
    const problems = [];
    results.forEach(({ res, err }, i) => {
      const who = `turn ${i} (client ${clientOf(i)})`;
      if (err) { problems.push(`${who}: request failed: ${err.message}`); return; }
      const text = textOf(res);
      if (res.isError) { problems.push(`${who}: isError${BUSY_RE.test(text) ? ' [LOCKED/BUSY]' : ''}: ${text}`); return; }
      let rc;
      try { rc = assertStructuredAndText(res); } catch (e) { problems.push(`${who}: ${e.message}`); return; }
      if (rc.receipt_type !== 'ingest' || typeof rc.job_id !== 'string' || !rc.job_id) {
        problems.push(`${who}: not an ingest receipt with a job_id: ${text.slice(0, 300)}`);
        return;
      }
      if (BUSY_RE.test(text)) problems.push(`${who}: receipt mentions locked/busy: ${text.slice(0, 300)}`);
      jobIds[i] = rc.job_id;
    });
    assert.deepEqual(problems, [], summarise(problems, TURNS, 'ingest calls failed'));
    assert.equal(new Set(jobIds).size, TURNS, 'job ids are not unique per turn');
  }, { timeoutMs: 200_000 });
}

const ingested = ready && jobIds.every(Boolean);
if (ingested) {
  await r.test('every job reaches succeeded (tmcra_wait_job through another process)', async () => {
    const results = await timed('wait_job', () => inRounds(TURNS, (i) => tryCall(sessions[(clientOf(i) + 1) % CLIENTS],
      'tmcra_wait_job', { job_id: jobIds[i], timeout_seconds: 90, poll_interval_seconds: 0.1 })));
    const problems = [];
    results.forEach(({ res, err }, i) => {
      const who = `turn ${i} job ${jobIds[i]}`;
      if (err) { problems.push(`${who}: request failed: ${err.message}`); return; }
      if (res.isError) { problems.push(`${who}: isError: ${textOf(res)}`); return; }
      const job = res.structuredContent ?? {};
      if (job.status !== 'succeeded' || job.final !== true) {
        problems.push(`${who}: status ${job.status}, final ${job.final}, error ${JSON.stringify(job.error)}`);
      }
    });
    assert.deepEqual(problems, [], summarise(problems, TURNS, 'jobs did not succeed'));
  }, { timeoutMs: 200_000 });

  await r.test(`every one of the ${TURNS} markers is recallable (recalls spread over the ${CLIENTS} processes)`, async () => {
    const results = await timed('recall', () => inRounds(TURNS, (i) => tryCall(sessions[(clientOf(i) + 2) % CLIENTS],
      'tmcra_recall', { query: markerOf(i) })));
    const problems = [];
    results.forEach(({ res, err }, i) => {
      const who = `marker ${markerOf(i)}`;
      if (err) { problems.push(`${who}: request failed: ${err.message}`); return; }
      if (res.isError) { problems.push(`${who}: isError: ${textOf(res)}`); return; }
      const content = res.structuredContent?.prompt_evidence?.content;
      if (typeof content !== 'string' || !content.includes(markerOf(i))) {
        problems.push(`${who}: not in prompt_evidence.content (${JSON.stringify(content)?.slice(0, 200)})`);
      }
    });
    assert.deepEqual(problems, [], summarise(problems, TURNS, 'markers were not recalled'));
  }, { timeoutMs: 200_000 });
}

if (ready) {
  await r.test(`tmcra_status on every process: records == ${2 * TURNS}, no pending or failed jobs`, async () => {
    const st = await Promise.all(sessions.map((s, k) => callOk(s.client, 'tmcra_status', {}, { what: `status on client ${k}` })));
    st.forEach((x, k) => {
      const f = x.store?.figures ?? {};
      assert.equal(f.records, 2 * TURNS, `client ${k}: records (figures ${JSON.stringify(f)})`);
      assert.equal(f.jobs_pending, 0, `client ${k}: jobs_pending (figures ${JSON.stringify(f)})`);
      assert.equal(f.jobs_failed, 0, `client ${k}: jobs_failed (figures ${JSON.stringify(f)})`);
    });
  });

  await r.test('close: every server exits 0 on stdin EOF; no client-side errors', async () => {
    // Server stderr is information only (a worker may log a retried lock), but say so.
    sessions.forEach((s, k) => {
      const lines = s.stderr().split('\n').filter((l) => BUSY_RE.test(l));
      if (lines.length) r.log(`note: client ${k} server stderr mentions locked/busy ${lines.length}x, e.g. ${lines[0].slice(0, 300)}`);
    });
    for (const s of sessions) s.assertNoClientErrors();
    await Promise.all(sessions.map((s) => s.closeAndCheckExit()));
  });
}

await r.test('stdout purity: every byte on every server stdout is a JSON-RPC line', async () => {
  await Promise.all(sessions.map((s) => s.closeQuietly()));
  const n = assertAllStdoutPure(logs);
  assert.ok(n > 0, 'no messages recorded');
});

r.log(`note: phase times: ${timings.join(', ')}`);
await r.finish();
