#!/usr/bin/env node
// remote_mcp.mjs — tmcra-memd's MCP endpoint (/mcp, Streamable HTTP) over real HTTPS on
// 127.0.0.1, driven by the official SDK clients from npm (v1 StreamableHTTPClientTransport and
// the v2 client) with a bearer key, and compared with tmcra-mcp over stdio on the same store.
//
//   node remote_mcp.mjs <tmcra-mcp> <tmcra-mcp-testserver>      (TMCRA_MEMD: the tmcra-memd binary)
//
// Covers: tools/list against stdio's definitions; ingest, wait_job, recall with receipts equal to
// stdio's for the same store; the refusals (no token, a revoked key, a wrong Origin or Host, a
// key used on a scope it does not grant, a session of another key, no session, an unknown
// protocol version); a session that outlives a memd restart; a call whose POST stream ends
// before its answer, resumed with GET and Last-Event-ID by both SDKs and by hand.
//
// Node's fetch trusts the test CA only through NODE_EXTRA_CA_CERTS, which node reads at start:
// the script makes the CA, then runs itself again with it set.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import https from 'node:https';
import path from 'node:path';

import {
  Runner, assert, parseBins, requireNodeModules, tmpDir, connectV1, sleep, run,
  hostCliEnv, claudeCommand,
} from './lib.mjs';
import { withTestCa, memdBin, createKey, remoteEnv, startMemd as startMemdOn } from './remote_lib.mjs';

const NAME = 'remote_mcp.mjs';
requireNodeModules(NAME, ['@modelcontextprotocol/sdk', '@modelcontextprotocol/client', '@anthropic-ai/claude-code']);
const bins = parseBins(NAME);

const certs = withTestCa();

const r = new Runner(NAME, { budgetMs: 240_000 });
const TMP = tmpDir('tmcra-remote-mcp-');
const DATA = path.join(TMP, 'memd');

// ---------------------------------------------------------------------------
// tmcra-memd
// ---------------------------------------------------------------------------
const servers = [];
r.onCleanup(async () => {
  for (const s of servers) if (s.proc.exitCode === null && s.proc.signalCode === null) s.proc.kill('SIGKILL');
});

/** `tmcra-memd serve` on DATA with TLS (remote_lib's startMemd), killed at the end if still up. */
async function startMemd({ port = 0, args = [] } = {}) {
  const srv = await startMemdOn({ dataDir: DATA, certs, port, args });
  servers.push(srv);
  return srv;
}

// ---------------------------------------------------------------------------
// Clients
// ---------------------------------------------------------------------------
/** An SDK client on <url>/mcp with a bearer key: {client, transport, sdk, call(params)}. */
async function connectHttp(sdk, url, key, { headers = {} } = {}) {
  const mod = sdk === 'v1'
    ? { ...(await import('@modelcontextprotocol/sdk/client/index.js')),
        ...(await import('@modelcontextprotocol/sdk/client/streamableHttp.js')) }
    : await import('@modelcontextprotocol/client');
  const transport = new mod.StreamableHTTPClientTransport(new URL(`${url}/mcp`), {
    requestInit: { headers: { Authorization: `Bearer ${key}`, ...headers } },
  });
  const options = sdk === 'v1' ? {} : { versionNegotiation: { mode: 'legacy' } };
  const client = new mod.Client({ name: `remote-${sdk}`, version: '0.0.0' }, options);
  const errors = [];
  client.onerror = (e) => errors.push(e);
  await client.connect(transport);
  return {
    client, transport, sdk, errors,
    call: (params) => (sdk === 'v1' ? client.callTool(params, undefined, { timeout: 60_000 })
      : client.callTool(params, { timeout: 60_000 })),
    close: () => client.close(),
  };
}

/** One raw request to <url>/mcp with fetch: {status, headers, text, json}. */
async function post(url, { key, body, headers = {}, method = 'POST' } = {}) {
  const h = { 'Content-Type': 'application/json', Accept: 'application/json, text/event-stream', ...headers };
  if (key) h.Authorization = `Bearer ${key}`;
  const res = await fetch(`${url}/mcp`, { method, headers: h, body: body === undefined ? undefined : JSON.stringify(body) });
  const text = await res.text();
  let json;
  try { json = JSON.parse(text); } catch { json = undefined; }
  return { status: res.status, headers: res.headers, text, json };
}

/** One request with node:https, which sends the Host header given (fetch does not): {status}. */
function rawHttps(srv, { key, body, headers = {} }) {
  return new Promise((resolve, reject) => {
    const payload = Buffer.from(JSON.stringify(body));
    // The certificate is checked against the CA, not against the Host header under test.
    const req = https.request({ host: '127.0.0.1', port: srv.port, method: 'POST', path: '/mcp',
      ca: fs.readFileSync(certs.ca), agent: false, checkServerIdentity: () => undefined,
      headers: { 'Content-Type': 'application/json', 'Content-Length': payload.length,
        Authorization: `Bearer ${key}`, ...headers } }, (res) => {
      res.resume();
      res.on('end', () => resolve({ status: res.statusCode }));
    });
    req.on('error', reject);
    req.end(payload);
  });
}

const INIT = { jsonrpc: '2.0', id: 1, method: 'initialize',
  params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'raw', version: '0' } } };

/** A session begun by hand: its Mcp-Session-Id. */
async function rawSession(url, key) {
  const res = await post(url, { key, body: INIT });
  assert.equal(res.status, 200, res.text);
  const id = res.headers.get('mcp-session-id');
  assert.ok(id, 'initialize answers Mcp-Session-Id');
  return id;
}

/** Parses an SSE body into [{id, retry, data}]. */
function events(text) {
  return text.split('\n\n').filter((b) => b.trim()).map((block) => {
    const e = { data: '' };
    for (const line of block.split('\n')) {
      const colon = line.indexOf(':');
      const field = line.slice(0, colon);
      const value = line.slice(colon + 1).replace(/^ /, '');
      if (field === 'id') e.id = value;
      else if (field === 'retry') e.retry = Number(value);
      else if (field === 'data') e.data += value;
    }
    return e;
  });
}

const structured = (res) => {
  assert.ok(!res.isError, `tool error: ${JSON.stringify(res.content)}`);
  return res.structuredContent;
};
// Ids and times differ between two writes of the same thing; the rest must not.
const VOLATILE = new Set(['job_id', 'status_url', 'created_at', 'updated_at', 'started_at',
  'finished_at', 'completed_at', 'queue_item_id', 'query_id', 'idempotency_key']);
function masked(value) {
  if (Array.isArray(value)) return value.map(masked);
  if (value && typeof value === 'object') {
    const out = {};
    for (const [k, v] of Object.entries(value)) out[k] = VOLATILE.has(k) ? typeof v : masked(v);
    return out;
  }
  return value;
}

// ---------------------------------------------------------------------------
// Tests
// ---------------------------------------------------------------------------
fs.mkdirSync(DATA, { recursive: true, mode: 0o700 });
const KEY = createKey(DATA);
const SCOPED = (() => {
  const out = spawnSync(memdBin(), ['keys', 'create', '--data-dir', DATA, '--scope', 'other'], { encoding: 'utf8' });
  assert.equal(out.status, 0, out.stderr);
  return out.stdout.trim().split('\n').pop().trim();
})();
let memd = await startMemd();
const stdio = await connectV1({ bin: bins.server, label: 'remote-mcp-stdio',
  env: remoteEnv({ url: memd.url, key: KEY, ca: certs.ca, extra: { TMCRA_DATA_DIR: path.join(TMP, 'client') } }) });
r.onCleanup(async () => { try { await stdio.client.close(); } catch { /* ignore */ } });

let v1;
let v2;
let stdioTools;
await r.test('v1 and v2 SDK clients connect over HTTPS with a bearer key and list the tools', async () => {
  v1 = await connectHttp('v1', memd.url, KEY);
  v2 = await connectHttp('v2', memd.url, KEY);
  r.onCleanup(async () => { for (const c of [v1, v2]) try { await c?.close(); } catch { /* ignore */ } });
  stdioTools = (await stdio.client.listTools()).tools;
  for (const c of [v1, v2]) {
    const { tools } = await c.client.listTools();
    const names = tools.map((t) => t.name);
    for (const t of tools) {
      const twin = stdioTools.find((s) => s.name === t.name);
      assert.ok(twin, `${t.name} is not a tool of tmcra-mcp`);
      assert.deepEqual(t, twin, `${t.name}: the definition differs from stdio's`);
    }
    assert.deepEqual(names, stdioTools.map((t) => t.name), `${c.sdk}: every tool of tmcra-mcp, in its order`);
    // The SDK checks a result against the tool's output schema.
    const status = structured(await c.call({ name: 'tmcra_status', arguments: {} }));
    assert.equal(status.memory_mode, 'memd');
  }
});

const MESSAGES = [
  { message_id: 'm1', role: 'user', content: 'Which build system does the remote project use?' },
  { message_id: 'm2', role: 'assistant', content: 'The remote project builds with CMake presets and Ninja on Debian 12.' },
];
let jobId;
await r.test('ingest, wait_job and recall over /mcp: receipts equal to stdio\'s for the same store', async () => {
  const viaHttp = structured(await v1.call({ name: 'tmcra_ingest',
    arguments: { scope: 'team', session_id: 'http-1', messages: MESSAGES } }));
  const viaStdio = structured(await stdio.client.callTool({ name: 'tmcra_ingest',
    arguments: { scope: 'team', session_id: 'stdio-1', messages: MESSAGES } }));
  assert.equal(viaHttp.queue_item_id, null, 'no local outbox holds a write made over /mcp');
  // The same receipt members; its jobs are views of the moment (as accepted, or as polled once
  // the outbox saw them run), so only their ids are compared.
  assert.deepEqual(Object.keys(viaHttp).sort(), Object.keys(viaStdio).sort());
  assert.deepEqual(viaHttp.jobs.map((j) => j.job_id), viaHttp.job_ids);
  assert.equal(viaStdio.jobs.length, viaHttp.jobs.length);
  jobId = viaHttp.job_id;
  const waited = structured(await v2.call({ name: 'tmcra_wait_job', arguments: { job_id: jobId, timeout_seconds: 30 } }));
  assert.equal(waited.status, 'succeeded', JSON.stringify(waited));
  const waitedStdio = structured(await stdio.client.callTool({ name: 'tmcra_wait_job',
    arguments: { job_id: jobId, timeout_seconds: 30 } }));
  assert.deepEqual(waited, waitedStdio, 'the same job, the same receipt');
  const gotStdio = structured(await stdio.client.callTool({ name: 'tmcra_get_job', arguments: { job_id: viaStdio.job_id } }));
  const got = structured(await v1.call({ name: 'tmcra_get_job', arguments: { job_id: viaStdio.job_id } }));
  assert.deepEqual(got, gotStdio);
  const args = { scope: 'team', session_id: 'recall-1', query: 'remote project build system CMake presets' };
  const recalled = structured(await v1.call({ name: 'tmcra_recall', arguments: args }));
  const recalledV2 = structured(await v2.call({ name: 'tmcra_recall', arguments: args }));
  const recalledStdio = structured(await stdio.client.callTool({ name: 'tmcra_recall', arguments: args }));
  assert.match(JSON.stringify(recalled), /CMake presets/);
  assert.deepEqual(masked(recalled), masked(recalledStdio));
  assert.deepEqual(masked(recalledV2), masked(recalledStdio));
});

// The HTTP client names the REST request in its errors; /mcp calls the store directly.
const withoutRequestId = (res) => JSON.parse(JSON.stringify(res).replace(/ \(request id [^)]*\)/g, ''));
await r.test('the turn lifecycle over /mcp: prepare, commit, reconcile, as stdio answers them', async () => {
  const turn = (via, n) => ({ turn_id: `t-${via}-${n}`, session_id: `life-${via}`,
    user_message_id: `u-${via}-${n}`, user_content: 'When is the remote deploy window?' });
  const commit = (via, n, extra = {}) => ({ turn_id: `t-${via}-${n}`, assistant_message_id: `a-${via}-${n}`,
    assistant_content: 'The remote deploy window is Thursday 14:00 UTC.', ...extra });
  const answers = {};
  for (const [via, client] of [['http', v1], ['stdio', { call: (p) => stdio.client.callTool(p) }]]) {
    const prep = structured(await client.call({ name: 'tmcra_turn_prepare', arguments: { scope: 'team', ...turn(via, 1) } }));
    assert.equal(prep.status, 'prepared', JSON.stringify(prep).slice(0, 400));
    const done = structured(await client.call({ name: 'tmcra_turn_commit', arguments: commit(via, 1) }));
    assert.equal(done.status, 'succeeded', JSON.stringify(done).slice(0, 600));
    const replay = structured(await client.call({ name: 'tmcra_turn_commit', arguments: commit(via, 1) }));
    assert.equal(replay.status, 'succeeded', 'a commit again is answered, not written again');
    structured(await client.call({ name: 'tmcra_turn_prepare', arguments: { scope: 'team', ...turn(via, 2) } }));
    const eventual = structured(await client.call({ name: 'tmcra_turn_commit',
      arguments: commit(via, 2, { consistency: 'eventual' }) }));
    const reconciled = structured(await client.call({ name: 'tmcra_reconcile', arguments: {} }));
    answers[via] = { prep, done, eventual, reconciled };
  }
  for (const k of ['prep', 'done', 'eventual', 'reconciled']) {
    assert.deepEqual(Object.keys(answers.http[k]).sort(), Object.keys(answers.stdio[k]).sort(), `${k}: the same members`);
  }
  const recalled = structured(await v2.call({ name: 'tmcra_recall',
    arguments: { scope: 'team', session_id: 'x', query: 'remote deploy window Thursday' } }));
  assert.match(JSON.stringify(recalled), /Thursday 14:00 UTC/, 'the committed turn is in the store');
  const other = await connectHttp('v1', memd.url, SCOPED);
  try {
    const foreign = await other.call({ name: 'tmcra_turn_commit', arguments: commit('http', 1) });
    assert.equal(foreign.isError, true, 'another key does not see this key\'s turns');
  } finally {
    await other.close();
  }
});

await r.test('a tool error over /mcp is the tool error stdio gives', async () => {
  const bad = { name: 'tmcra_recall', arguments: { scope: 'team', session_id: 's', query: '' } };
  const viaHttp = await v1.call(bad);
  const viaStdio = await stdio.client.callTool(bad);
  assert.equal(viaHttp.isError, true);
  assert.deepEqual(viaHttp, viaStdio);
  const job = { name: 'tmcra_get_job', arguments: { job_id: 'job_00000000000000000000000000000000' } };
  const missing = await v2.call(job);
  assert.equal(missing.isError, true);
  assert.deepEqual(missing, withoutRequestId(await stdio.client.callTool(job)));
});

await r.test('refused: no token, a revoked key, a wrong Origin or Host', async () => {
  const none = await post(memd.url, { body: INIT });
  assert.equal(none.status, 401, none.text);
  assert.match(none.headers.get('www-authenticate') ?? '', /^Bearer/);
  const bogus = await post(memd.url, { key: 'tmcra_000000000000000000000000.' + '0'.repeat(64), body: INIT });
  assert.equal(bogus.status, 401);
  const origin = await post(memd.url, { key: KEY, body: INIT, headers: { Origin: 'https://evil.example' } });
  assert.equal(origin.status, 403, origin.text);
  const own = await post(memd.url, { key: KEY, body: INIT, headers: { Origin: memd.url } });
  assert.equal(own.status, 200, own.text);
  const host = await rawHttps(memd, { key: KEY, body: INIT, headers: { Host: 'rebound.example:443' } });
  assert.equal(host.status, 403, 'a DNS-rebound name is refused');
  const doomed = createKey(DATA);
  const session = await rawSession(memd.url, doomed);
  const out = spawnSync(memdBin(), ['keys', 'revoke', doomed.slice(6, 30), '--data-dir', DATA], { encoding: 'utf8' });
  assert.equal(out.status, 0, out.stderr);
  const revoked = await post(memd.url, { key: doomed, body: { jsonrpc: '2.0', id: 2, method: 'tools/list' },
    headers: { 'Mcp-Session-Id': session } });
  assert.equal(revoked.status, 401, 'a revoked key is refused on its next request');
});

await r.test('refused: a key on a scope it does not grant; another key\'s session; no session', async () => {
  const scoped = await connectHttp('v1', memd.url, SCOPED);
  try {
    const res = await scoped.call({ name: 'tmcra_recall', arguments: { scope: 'team', session_id: 's', query: 'build' } });
    assert.equal(res.isError, true);
    assert.match(res.content[0].text, /forbidden \(HTTP 403\): the API key is not valid for this scope/);
    const own = structured(await scoped.call({ name: 'tmcra_recall', arguments: { session_id: 's', query: 'build' } }));
    assert.equal(own.scope_name, 'other', 'a key of one scope recalls in it by default');
    const job = await scoped.call({ name: 'tmcra_get_job', arguments: { job_id: jobId } });
    assert.equal(job.isError, true, 'a job of another scope is not shown');
  } finally {
    await scoped.close();
  }
  const session = await rawSession(memd.url, KEY);
  const foreign = await post(memd.url, { key: SCOPED, body: { jsonrpc: '2.0', id: 2, method: 'tools/list' },
    headers: { 'Mcp-Session-Id': session } });
  assert.equal(foreign.status, 404, foreign.text);
  const missing = await post(memd.url, { key: KEY, body: { jsonrpc: '2.0', id: 2, method: 'tools/list' } });
  assert.equal(missing.status, 400, missing.text);
  const forged = await post(memd.url, { key: KEY, body: { jsonrpc: '2.0', id: 2, method: 'tools/list' },
    headers: { 'Mcp-Session-Id': session.slice(0, -4) + '0000' } });
  assert.equal(forged.status, 404, forged.text);
  const version = await post(memd.url, { key: KEY, body: { jsonrpc: '2.0', id: 2, method: 'tools/list' },
    headers: { 'Mcp-Session-Id': session, 'MCP-Protocol-Version': '1999-01-01' } });
  assert.equal(version.status, 400, version.text);
  const notification = await post(memd.url, { key: KEY, body: { jsonrpc: '2.0', method: 'notifications/initialized' },
    headers: { 'Mcp-Session-Id': session } });
  assert.equal(notification.status, 202);
  const batch = await post(memd.url, { key: KEY, body: [{ jsonrpc: '2.0', id: 2, method: 'ping' }],
    headers: { 'Mcp-Session-Id': session } });
  assert.equal(batch.status, 400);
  const del = await post(memd.url, { key: KEY, method: 'DELETE', headers: { 'Mcp-Session-Id': session } });
  assert.equal(del.status, 405);
  const get = await post(memd.url, { key: KEY, method: 'GET', headers: { 'Mcp-Session-Id': session } });
  assert.equal(get.status, 405, 'no stream of unasked messages');
});

await r.test('a session outlives a memd restart: the same client goes on', async () => {
  const port = memd.port;
  const exit = await memd.stop();
  assert.equal(exit.code, 0);
  memd = await startMemd({ port });
  for (const c of [v1, v2]) {
    const res = structured(await c.call({ name: 'tmcra_get_job', arguments: { job_id: jobId } }));
    assert.equal(res.status, 'succeeded');
  }
});

await r.test('a POST stream that ends before its answer is resumed (GET, Last-Event-ID) by both SDKs', async () => {
  await memd.stop();
  memd = await startMemd({ args: ['--mcp-answer-within-ms', '0'] });
  for (const sdk of ['v1', 'v2']) {
    const c = await connectHttp(sdk, memd.url, KEY);
    try {
      const res = structured(await c.call({ name: 'tmcra_recall',
        arguments: { scope: 'team', session_id: 'r', query: 'remote project build system' } }));
      assert.match(JSON.stringify(res), /CMake presets/, `${sdk} got the answer through the resumed stream`);
    } finally {
      await c.close();
    }
  }
});

await r.test('by hand: the POST stream holds only an event id; GET with it gives the answer, again if asked', async () => {
  // No job runs, so waiting for one takes its whole timeout: the POST ends first, surely.
  await memd.stop();
  memd = await startMemd({ args: ['--mcp-answer-within-ms', '0', '--no-job-worker',
    '--mcp-allow-origin', 'https://app.example'] });
  const session = await rawSession(memd.url, KEY);
  const ingest = await post(memd.url, { key: KEY, headers: { 'Mcp-Session-Id': session, Accept: 'application/json' },
    body: { jsonrpc: '2.0', id: 6, method: 'tools/call', params: { name: 'tmcra_ingest',
      arguments: { scope: 'team', session_id: 'h', messages: [{ message_id: 'h1', role: 'user', content: 'queued' }] } } } });
  const pending = ingest.json ? ingest.json : JSON.parse(events(ingest.text).find((e) => e.data)?.data ?? 'null');
  let queuedJob = pending?.result?.structuredContent?.job_id;
  if (!queuedJob) {  // the POST ended before the answer: take it from the stream
    const [p] = events(ingest.text);
    for (let i = 0; i < 100 && !queuedJob; ++i) {
      const res = await post(memd.url, { key: KEY, method: 'GET', headers: { 'Mcp-Session-Id': session, 'Last-Event-ID': p.id } });
      const e = events(res.text).find((x) => x.data);
      queuedJob = e && JSON.parse(e.data).result.structuredContent.job_id;
      if (!queuedJob) await sleep(p.retry);
    }
  }
  assert.ok(queuedJob, 'the ingest was answered');
  const call = { jsonrpc: '2.0', id: 7, method: 'tools/call',
    params: { name: 'tmcra_wait_job', arguments: { job_id: queuedJob, timeout_seconds: 2 } } };
  const first = await post(memd.url, { key: KEY, body: call, headers: { 'Mcp-Session-Id': session } });
  assert.equal(first.status, 200);
  assert.match(first.headers.get('content-type'), /^text\/event-stream/);
  const [priming] = events(first.text);
  assert.ok(priming.id && priming.data === '' && priming.retry >= 0, first.text);
  // Resumed as a client does: after the retry delay, until the answer comes; then once more, as
  // after a dropped answer.
  const resume = () => post(memd.url, { key: KEY, method: 'GET',
    headers: { 'Mcp-Session-Id': session, 'Last-Event-ID': priming.id } });
  let answer;
  for (let i = 0; i < 100 && !answer; ++i) {
    const resumed = await resume();
    assert.equal(resumed.status, 200, resumed.text);
    answer = events(resumed.text).find((e) => e.data);
    if (!answer) await sleep(priming.retry);
  }
  assert.ok(answer, 'the answer came through the resumed stream');
  const again = events((await resume()).text).find((e) => e.data);
  for (const e of [answer, again]) {
    const message = JSON.parse(e.data);
    assert.equal(message.id, 7);
    assert.equal(message.result.isError, true, 'the job waited for is still queued');
    assert.match(message.result.content[0].text, new RegExp(`job_wait_timeout: job ${queuedJob} did not finish within 2s`));
  }
  const other = await post(memd.url, { key: SCOPED, method: 'GET',
    headers: { 'Mcp-Session-Id': await rawSession(memd.url, SCOPED), 'Last-Event-ID': priming.id } });
  assert.equal(other.status, 404, 'another key cannot read the stream');
});

let queuedJob2;
await r.test('limits: an earlier protocol version\'s POST carries its answer; cancel; 8 calls a key; CORS', async () => {
  // Still the memd of the test before: every 2025-11-25 POST ends at once, no job runs.
  const legacy = await post(memd.url, { key: KEY, body: { ...INIT, params: { ...INIT.params, protocolVersion: '2025-06-18' } } });
  const legacySession = legacy.headers.get('mcp-session-id');
  const ingest = await post(memd.url, { key: KEY, headers: { 'Mcp-Session-Id': legacySession },
    body: { jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'tmcra_ingest',
      arguments: { scope: 'team', session_id: 'l', messages: [{ message_id: 'l1', role: 'user', content: 'queued too' }] } } } });
  assert.match(ingest.headers.get('content-type'), /^application\/json/, 'a 2025-06-18 POST waits for its answer');
  queuedJob2 = ingest.json.result.structuredContent.job_id;
  const waitCall = (id, session, timeout) => ({ key: KEY, headers: { 'Mcp-Session-Id': session },
    body: { jsonrpc: '2.0', id, method: 'tools/call', params: { name: 'tmcra_wait_job', arguments: { job_id: queuedJob2, timeout_seconds: timeout } } } });
  const t0 = Date.now();
  const waited = await post(memd.url, waitCall(2, legacySession, 1));
  assert.ok(Date.now() - t0 >= 900, 'the POST waited for the whole call');
  assert.match(waited.json.result.content[0].text, /job_wait_timeout/);
  // Cancel: the call stops at its next check, and its answer comes long before its timeout.
  const session = await rawSession(memd.url, KEY);
  const started = await post(memd.url, waitCall(3, session, 60));
  const [priming] = events(started.text);
  const cancelled = await post(memd.url, { key: KEY, headers: { 'Mcp-Session-Id': session },
    body: { jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: 3, reason: 'test' } } });
  assert.equal(cancelled.status, 202);
  let answer;
  const t1 = Date.now();
  while (!answer && Date.now() - t1 < 20_000) {
    const res = await post(memd.url, { key: KEY, method: 'GET', headers: { 'Mcp-Session-Id': session, 'Last-Event-ID': priming.id } });
    answer = events(res.text).find((e) => e.data);
    if (!answer) await sleep(100);
  }
  assert.ok(answer && Date.now() - t1 < 15_000, 'the cancelled call ended early');
  // A key has at most 8 calls running: the ninth is refused 429 with Retry-After.
  const calls = await Promise.all(Array.from({ length: 8 }, (_, i) => post(memd.url, waitCall(10 + i, session, 3))));
  for (const c of calls) assert.equal(c.status, 200);
  const ninth = await post(memd.url, waitCall(20, session, 3));
  assert.equal(ninth.status, 429, ninth.text);
  assert.equal(ninth.headers.get('retry-after'), '1');
  const otherKey = await post(memd.url, { key: SCOPED, headers: { 'Mcp-Session-Id': await rawSession(memd.url, SCOPED) },
    body: { jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'tmcra_status', arguments: {} } } });
  assert.equal(otherKey.status, 200, 'another key is not held back');
  // CORS for an allowed page origin: the preflight before any credential, then the headers.
  const preflight = await fetch(`${memd.url}/mcp`, { method: 'OPTIONS', headers: { Origin: 'https://app.example',
    'Access-Control-Request-Method': 'POST', 'Access-Control-Request-Headers': 'authorization, content-type, mcp-session-id' } });
  assert.equal(preflight.status, 204);
  assert.equal(preflight.headers.get('access-control-allow-origin'), 'https://app.example');
  assert.match(preflight.headers.get('access-control-allow-headers'), /Mcp-Session-Id/);
  const page = await post(memd.url, { key: KEY, body: INIT, headers: { Origin: 'https://app.example' } });
  assert.equal(page.status, 200);
  assert.equal(page.headers.get('access-control-allow-origin'), 'https://app.example');
  assert.equal(page.headers.get('access-control-expose-headers'), 'Mcp-Session-Id');
  const foreign = await fetch(`${memd.url}/mcp`, { method: 'OPTIONS', headers: { Origin: 'https://evil.example' } });
  assert.equal(foreign.status, 403);
});

await r.test('Claude Code adds /mcp by URL with a bearer header, and `claude mcp list` shows it connected', async () => {
  const home = path.join(TMP, 'claude-home');
  const project = path.join(home, 'project');
  fs.mkdirSync(project, { recursive: true });
  // The key stays out of argv and of the config file: Claude Code expands ${VAR} in .mcp.json.
  const env = { ...hostCliEnv(home), TEAM_MEMORY_KEY: KEY };
  const CLAUDE = claudeCommand();
  const claude = (args) => run(CLAUDE.cmd, [...CLAUDE.pre, ...args], { env, cwd: project, timeoutMs: 60_000 });
  const show = (res) => `exit ${res.code}\nstdout: ${res.stdout.slice(0, 2000)}\nstderr: ${res.stderr.slice(0, 2000)}`;
  const added = await claude(['mcp', 'add', '--transport', 'http', '--scope', 'user', 'team-memory',
    `${memd.url}/mcp`, '--header', 'Authorization: Bearer ${TEAM_MEMORY_KEY}']);
  assert.equal(added.code, 0, show(added));
  const config = fs.readFileSync(path.join(home, '.claude.json'), 'utf8');
  assert.ok(!config.includes(KEY), 'the key is not written to ~/.claude.json');
  assert.ok(config.includes('${TEAM_MEMORY_KEY}'), config);
  const listed = await claude(['mcp', 'list']);
  assert.equal(listed.code, 0, show(listed));
  const line = listed.stdout.split('\n').find((l) => l.startsWith('team-memory: '));
  assert.ok(line, show(listed));
  assert.match(line, /\(HTTP\) - ✔ Connected\s*$/, show(listed));
}, { timeoutMs: 120_000 });

await r.finish();
