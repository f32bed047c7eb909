#!/usr/bin/env node
// memd_postgres.mjs — tmcra-memd's commands against the suite's real PostgreSQL cluster
// (tests/support/pg_cluster.sh; CTest's fixture `postgres` names it in TMCRA_PG_DIR).
//
//   node tests/integration/memd_postgres.mjs <tmcra-memd>
//
// Keys on a database: made, listed and revoked through --database with the password from
// --database-password-file, PGPASSWORD or a .pgpass file; a password in the setting refused
// without echoing it; a wrong password, a server that is down and a missing database each one
// clear line on stderr and exit 1. Two `serve --database` instances on one database: a turn
// ingested through one is recalled through the other; one idempotency key sent to both at once
// is one job with one receipt; SIGKILL of one during a 1,000-item ingest burst, and every
// acknowledged item is stored exactly once by the other; an /mcp session, an OAuth token and the
// kept answer of a call that outlasted its POST, made through one, served by the other. Last line: "<N> passed, <M> failed".
import { spawn } from 'node:child_process';
import crypto from 'node:crypto';
import https from 'node:https';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

import { Runner, assert, tmpDir, serverEnv, run, sleep } from '../peer/lib.mjs';
import { makeCertificate, startMemd, stopMemd, request, pgCluster,
  freshDatabase as freshClusterDatabase } from './memd_lib.mjs';

const BIN = process.argv[2] ? path.resolve(process.argv[2]) : '';
const PG_DIR = process.env.TMCRA_PG_DIR;
if (!BIN || !fs.existsSync(BIN) || !PG_DIR) {
  console.error('usage: TMCRA_PG_DIR=<cluster dir> node memd_postgres.mjs <tmcra-memd binary>');
  console.log('0 passed, 1 failed');
  process.exit(2);
}

const r = new Runner('memd_postgres', { budgetMs: 300_000 });
const TMP = tmpDir('tmcra-memd-pg-');
const CLUSTER = pgCluster(PG_DIR);
const PASSWORD_FILE = CLUSTER.passwordFile;
const PASSWORD = CLUSTER.password;
const ENV = serverEnv();
delete ENV.PGPASSWORD;
delete ENV.PGPASSFILE;
ENV.PGPASSFILE = path.join(TMP, 'no-pgpass');  // never the runner's own ~/.pgpass

/** A fresh database on the cluster for one test: its URI (no password in it). */
function freshDatabase(label) {
  return freshClusterDatabase(CLUSTER, r, label, ENV);
}

function keys(args, env = ENV) {
  return run(BIN, ['keys', ...args], { env });
}

function stderrLines(res) {
  return res.stderr.split('\n').filter((l) => l.trim() !== '');
}

await r.test('keys made, listed and revoked on a database, the password from each of its sources', async () => {
  const url = await freshDatabase('keys');
  const made = await keys(['create', '--database', url, '--database-password-file', PASSWORD_FILE, '--label', 'a']);
  assert(made.code === 0, made.stderr);
  const token = made.stdout.trim();
  assert(/^tmcra_[0-9a-f]{24}\.[0-9a-f]{64}$/.test(token), token);
  const id = token.slice(6, 30);
  const listed = await keys(['list', '--database', url], { ...ENV, PGPASSWORD: PASSWORD });
  assert(listed.code === 0, listed.stderr);
  const rows = listed.stdout.trim().split('\n').map((l) => JSON.parse(l));
  assert(rows.length === 1 && rows[0].key_id === id && rows[0].label === 'a', listed.stdout);
  assert(!listed.stdout.includes(token.slice(31)), 'the secret is never listed');
  const pgpass = path.join(TMP, 'pgpass');
  fs.writeFileSync(pgpass, `127.0.0.1:${CLUSTER.port}:*:tmcra:${PASSWORD}\n`, { mode: 0o600 });
  const revoked = await keys(['revoke', '--database', url, id], { ...ENV, PGPASSFILE: pgpass });
  assert(revoked.code === 0, revoked.stderr);
  const after = await keys(['list', '--database', url, '--database-password-file', PASSWORD_FILE]);
  assert(JSON.parse(after.stdout.trim()).revoked_at !== null, after.stdout);
  for (const res of [made, listed, revoked, after]) {
    assert(!res.stderr.includes(PASSWORD), 'the password never reaches the log');
  }
});

await r.test('a password in --database is refused (exit 2) and never echoed', async () => {
  const res = await keys(['list', '--database', `postgresql://tmcra:s3cr3t-in-argv@127.0.0.1:${CLUSTER.port}/postgres`]);
  assert(res.code === 2, `exit ${res.code}`);
  assert(res.stderr.includes('PGPASSWORD') && !res.stderr.includes('s3cr3t-in-argv'), res.stderr);
  const loose = path.join(TMP, 'loose-password');
  fs.writeFileSync(loose, PASSWORD, { mode: 0o644 });
  fs.chmodSync(loose, 0o644);
  const open = await keys(['list', '--database', `postgresql://tmcra@127.0.0.1:${CLUSTER.port}/postgres`,
    '--database-password-file', loose]);
  assert(open.code === 2 && open.stderr.includes('chmod 600'), open.stderr);
  const both = await keys(['list', '--database', 'dbname=x', '--data-dir', TMP]);
  assert(both.code === 2 && both.stderr.includes('give one'), both.stderr);
});

await r.test('a wrong password, a server that is down, a missing database: one clear line, exit 1', async () => {
  const base = `postgresql://tmcra@127.0.0.1:${CLUSTER.port}`;
  const cases = [
    [['list', '--database', `${base}/postgres`], { ...ENV, PGPASSWORD: 'wrong-password-123' }, 'password authentication failed'],
    [['list', '--database', 'postgresql://tmcra@127.0.0.1:1/postgres'], { ...ENV, PGPASSWORD: PASSWORD }, 'Connection refused'],
    [['list', '--database', `${base}/no_such_database`], { ...ENV, PGPASSWORD: PASSWORD }, 'does not exist'],
  ];
  for (const [args, env, says] of cases) {
    const res = await keys(args, env);
    assert(res.code === 1, `exit ${res.code}: ${res.stderr}`);
    const lines = stderrLines(res);
    assert(lines.length === 1, `one line, got:\n${res.stderr}`);
    assert(lines[0].includes(says) && lines[0].includes('key store'), lines[0]);
    assert(!res.stderr.includes('wrong-password-123'), 'the password is not echoed');
  }
});

// ---------------------------------------------------------------------------
// Two instances serving one database.

const CERT = await makeCertificate(TMP);

async function serveOn(url, name, extra = []) {
  const srv = await startMemd(BIN, ['--database', url, '--database-password-file', PASSWORD_FILE,
    '--index-dir', path.join(TMP, `index-${name}`), '--tls-cert', CERT.cert, '--tls-key', CERT.key,
    ...extra], { env: ENV });
  r.cleanups.push(() => { if (srv.exit === null) srv.proc.kill('SIGKILL'); });
  return srv;
}

async function newKey(url, ...args) {
  const made = await keys(['create', '--database', url, '--database-password-file', PASSWORD_FILE, ...args]);
  assert(made.code === 0, made.stderr);
  return made.stdout.trim();
}

function turn(id, content, session = 'shared') {
  return { session_id: session, messages: [{ message_id: id, role: 'user', content, timestamp: '2026-12-01T09:00:00Z' }] };
}

async function waitSucceeded(srv, key, jobId, ms = 20_000) {
  const deadline = Date.now() + ms;
  for (;;) {
    const res = await request(srv.port, CERT.ca, 'GET', `/v1/jobs/${jobId}`, { key });
    if (res.status === 200 && res.json.status === 'succeeded') return res.json;
    assert(Date.now() < deadline, `job ${jobId} not done: ${res.text}`);
    await sleep(50);
  }
}

await r.test('serve --database with a wrong password or a server that is down: one clear line, exit 1', async () => {
  const base = ['serve', '--tls-cert', CERT.cert, '--tls-key', CERT.key, '--index-dir', path.join(TMP, 'index-refused')];
  const cases = [
    [['--database', `postgresql://tmcra@127.0.0.1:${CLUSTER.port}/postgres`], { ...ENV, PGPASSWORD: 'wrong-password-456' }, 'password authentication failed'],
    [['--database', 'postgresql://tmcra@127.0.0.1:1/postgres'], { ...ENV, PGPASSWORD: PASSWORD }, 'Connection refused'],
  ];
  for (const [extra, env, says] of cases) {
    const res = await run(BIN, [...base, ...extra], { env });
    assert(res.code === 1, `exit ${res.code}: ${res.stderr}`);
    const lines = stderrLines(res);
    assert(lines.length === 1 && lines[0].includes(says), `one line, got:\n${res.stderr}`);
    assert(res.stdout === '', 'no readiness line');
  }
  const local = await run(BIN, [...base, '--database', 'dbname=x', '--local'], { env: ENV });
  assert(local.code === 2 && local.stderr.includes('--local'), local.stderr);
});

await r.test('two instances: a turn ingested through A is recalled through B; feedback through B and forget through A seen by the other', async () => {
  const url = await freshDatabase('two');
  const key = await newKey(url, '--permissions', 'memory:read,memory:write,memory:feedback,memory:delete');
  const a = await serveOn(url, 'two-a');
  const b = await serveOn(url, 'two-b');
  const ing = await request(a.port, CERT.ca, 'POST', '/v1/scopes/team/ingest', { key,
    body: turn('m1', 'the quokka migration finishes on tuesday'), headers: { 'Idempotency-Key': 'two-instances-1' } });
  assert(ing.status === 202, ing.text);
  const job = await waitSucceeded(b, key, ing.json.job_id);
  assert(job.result.records_written === 1, JSON.stringify(job));
  const recall = await request(b.port, CERT.ca, 'POST', '/v1/scopes/team/recall', { key,
    body: { query: 'quokka migration', wait_for_job_id: ing.json.job_id } });
  assert(recall.status === 200, recall.text);
  assert(recall.json.prompt_evidence.content.includes('quokka migration'), recall.text);
  // Feedback given through B hides the record from recalls through A; a forget through A
  // deletes it for B too.
  const id = JSON.stringify(recall.json.evidence).match(/rec_[0-9a-f]{32}/)[0];
  const fb = await request(b.port, CERT.ca, 'POST', '/v1/scopes/team/feedback', { key,
    body: { query_id: recall.json.query_id, rating: 'incorrect', action: 'ignore', memory_ids: [id] },
    headers: { 'Idempotency-Key': 'feedback-two-1' } });
  assert(fb.status === 201, `${fb.status} ${fb.text}`);
  const hidden = await request(a.port, CERT.ca, 'POST', '/v1/scopes/team/recall', { key,
    body: { query: 'quokka migration' } });
  assert(hidden.status === 200 && !hidden.json.prompt_evidence.content.includes('quokka'), hidden.text);
  const forgot = await request(a.port, CERT.ca, 'POST', '/v1/scopes/team/forget', { key,
    body: { session_id: 'shared' } });
  assert(forgot.status === 200 && forgot.json.records === 1 && forgot.json.feedback === 1, forgot.text);
  assert(forgot.json.erase === 'done', forgot.text);
  const evidence = await request(b.port, CERT.ca, 'GET', `/v1/scopes/team/memory-graph/nodes/${id}/evidence`, { key });
  assert(evidence.status === 404, `forgotten through A, gone through B: ${evidence.status} ${evidence.text}`);
  await stopMemd(a);
  await stopMemd(b);
});

await r.test('two instances: one idempotency key sent to both at once is one job with one receipt', async () => {
  const url = await freshDatabase('samekey');
  const key = await newKey(url);
  const a = await serveOn(url, 'key-a');
  const b = await serveOn(url, 'key-b');
  for (let i = 0; i < 10; i += 1) {
    const body = turn(`m${i}`, `only once number ${i}`);
    const headers = { 'Idempotency-Key': `same-key-both-${i}` };
    const [x, y] = await Promise.all([
      request(a.port, CERT.ca, 'POST', '/v1/scopes/team/ingest', { key, body, headers }),
      request(b.port, CERT.ca, 'POST', '/v1/scopes/team/ingest', { key, body, headers }),
    ]);
    assert(x.status === 202 && y.status === 202, `${x.text} ${y.text}`);
    assert(x.json.job_id === y.json.job_id, `one job: ${x.json.job_id} ${y.json.job_id}`);
    assert(x.json.idempotent_replay !== y.json.idempotent_replay, 'one of them is the replay');
    await waitSucceeded(a, key, x.json.job_id);
  }
  const rows = await run('psql', ['-h', '127.0.0.1', '-p', CLUSTER.port, '-U', 'tmcra', '-At',
    '-d', new URL(url).pathname.slice(1), '-c', 'SELECT count(*) FROM mem_records'], { env: { ...ENV, PGPASSWORD: PASSWORD } });
  assert(rows.stdout.trim() === '10', `ten records: ${rows.stdout} ${rows.stderr}`);
  await stopMemd(a);
  await stopMemd(b);
});

await r.test('SIGKILL of A during a 1,000-item ingest burst: every acknowledged item stored once, through B', async () => {
  const url = await freshDatabase('burst');
  const key = await newKey(url);
  const a = await serveOn(url, 'burst-a');
  const b = await serveOn(url, 'burst-b');
  const acknowledged = new Map();  // idempotency key -> job id
  let next = 0;
  let killed = false;
  const sender = async () => {
    while (next < 1000) {
      const i = next;
      next += 1;
      const res = await request(a.port, CERT.ca, 'POST', '/v1/scopes/burst/ingest', { key,
        body: turn(`m${i}`, `burst item ${i}`, `s${i % 20}`), headers: { 'Idempotency-Key': `burst-item-${i}` }, timeoutMs: 5_000 });
      if (res.status === 202) acknowledged.set(`burst-item-${i}`, res.json.job_id);
      if (killed && res.status !== 202) return;
    }
  };
  const senders = Array.from({ length: 8 }, sender);
  while (acknowledged.size < 300) await sleep(10);
  a.proc.kill('SIGKILL');
  killed = true;
  await Promise.all(senders);
  await a.exited;
  assert(acknowledged.size >= 300, `acknowledged ${acknowledged.size}`);
  for (const jobId of acknowledged.values()) await waitSucceeded(b, key, jobId, 60_000);
  const sql = 'SELECT count(*), count(DISTINCT (session_id, message_id)) FROM mem_records WHERE scope_name = \'burst\'';
  const rows = await run('psql', ['-h', '127.0.0.1', '-p', CLUSTER.port, '-U', 'tmcra', '-At',
    '-d', new URL(url).pathname.slice(1), '-c', sql], { env: { ...ENV, PGPASSWORD: PASSWORD } });
  const [count, distinct] = rows.stdout.trim().split('|').map(Number);
  assert(count === distinct, `each item once: ${rows.stdout}`);
  assert(count >= acknowledged.size, `every acknowledged item stored: ${count} < ${acknowledged.size}`);
  const recall = await request(b.port, CERT.ca, 'POST', '/v1/scopes/burst/recall', { key, body: { query: 'burst item' } });
  assert(recall.status === 200 && recall.json.evidence.snapshot.records === count, recall.text.slice(0, 400));
  await stopMemd(b);
}, { timeoutMs: 120_000 });

/** An https request with a form or raw body and no JSON encoding: {status, headers, text}. */
function rawRequest(port, method, urlPath, { body = null, headers = {} } = {}) {
  return new Promise((resolve, reject) => {
    const h = { ...headers };
    if (body !== null) h['Content-Length'] = Buffer.byteLength(body);
    const req = https.request({ host: '127.0.0.1', port, method, path: urlPath, headers: h, ca: CERT.ca, agent: false }, (res) => {
      let text = '';
      res.on('data', (d) => { text += d; });
      res.on('end', () => resolve({ status: res.statusCode, headers: res.headers, text }));
    });
    req.on('error', reject);
    req.end(body ?? undefined);
  });
}

await r.test('two instances: an /mcp session, an OAuth token and a resumed answer made through A are served by B', async () => {
  const url = await freshDatabase('mcp');
  const key = await newKey(url);
  // One public URL for both, as behind a load balancer: tokens name its resource.
  const extra = ['--public-url', 'https://memory.test', '--mcp-answer-within-ms', '0', '--no-job-worker'];
  const a = await serveOn(url, 'mcp-a', extra);
  const b = await serveOn(url, 'mcp-b', extra);
  try {
    // OAuth through A: registration, the consent page answered with the key, the code, the token.
    const verifier = 'v'.repeat(50);
    const challenge = crypto.createHash('sha256').update(verifier).digest('base64url');
    const reg = await request(a.port, CERT.ca, 'POST', '/register', { body: { redirect_uris: ['http://127.0.0.1:9/cb'] } });
    assert(reg.status === 201, reg.text);
    const q = new URLSearchParams({ response_type: 'code', client_id: reg.json.client_id, redirect_uri: 'http://127.0.0.1:9/cb',
      code_challenge: challenge, code_challenge_method: 'S256', state: 's', resource: 'https://memory.test/mcp' });
    const page = await rawRequest(a.port, 'GET', `/authorize?${q}`);
    assert(page.status === 200, page.text);
    const fields = Object.fromEntries([...page.text.matchAll(/<input type="hidden" name="([^"]+)" value="([^"]*)">/g)]
      .map((m) => [m[1], m[2].replace(/&amp;/g, '&')]));
    const answer = await rawRequest(a.port, 'POST', '/authorize', { body: new URLSearchParams({ ...fields, key, decision: 'allow' }).toString(),
      headers: { 'Content-Type': 'application/x-www-form-urlencoded' } });
    assert(answer.status === 302, answer.text);
    const code = new URL(answer.headers.location).searchParams.get('code');
    const token = await rawRequest(a.port, 'POST', '/token', { body: new URLSearchParams({ grant_type: 'authorization_code', code,
      redirect_uri: 'http://127.0.0.1:9/cb', client_id: reg.json.client_id, code_verifier: verifier }).toString(),
      headers: { 'Content-Type': 'application/x-www-form-urlencoded' } });
    assert(token.status === 200, token.text);
    const access = JSON.parse(token.text).access_token;
    // The session begun at A, with the token, is served by B.
    const accept = { Accept: 'application/json, text/event-stream' };
    const init = await request(a.port, CERT.ca, 'POST', '/mcp', { key: access, headers: accept,
      body: { jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 't', version: '0' } } } });
    assert(init.status === 200, init.text);
    const sid = init.headers['mcp-session-id'];
    const list = await request(b.port, CERT.ca, 'POST', '/mcp', { key: access, headers: { ...accept, 'Mcp-Session-Id': sid },
      body: { jsonrpc: '2.0', id: 2, method: 'tools/list' } });
    assert(list.status === 200 && list.json.result.tools.length === 10, list.text);
    // A call through A that outlasts its POST (no job runs): its answer is resumed through B.
    const ingest = await request(a.port, CERT.ca, 'POST', '/v1/scopes/team/ingest', { key, body: turn('m1', 'never run'),
      headers: { 'Idempotency-Key': 'mcp-pg-never-run' } });
    assert(ingest.status === 202, ingest.text);
    const call = await request(a.port, CERT.ca, 'POST', '/mcp', { key: access, headers: { ...accept, 'Mcp-Session-Id': sid },
      body: { jsonrpc: '2.0', id: 3, method: 'tools/call', params: { name: 'tmcra_wait_job', arguments: { job_id: ingest.json.job_id, timeout_seconds: 1 } } } });
    assert(call.status === 200 && call.headers['content-type'].startsWith('text/event-stream'), call.text);
    const eventId = call.text.match(/^id: (.+)$/m)[1];
    let resumed;
    for (let i = 0; i < 50 && !resumed; i += 1) {
      const res = await request(b.port, CERT.ca, 'GET', '/mcp', { key: access,
        headers: { ...accept, 'Mcp-Session-Id': sid, 'Last-Event-ID': eventId } });
      assert(res.status === 200, res.text);
      resumed = res.text.match(/^data: (\{.+)$/m)?.[1];
      if (!resumed) await sleep(100);
    }
    assert(resumed, 'B gave the answer A kept');
    const message = JSON.parse(resumed);
    assert(message.id === 3 && /job_wait_timeout/.test(message.result.content[0].text), resumed);
  } finally {
    await stopMemd(a);
    await stopMemd(b);
  }
});

await r.test('PostgreSQL restarted under memd: requests fail 503 meanwhile, memd reconnects, nothing acknowledged lost', async () => {
  // A cluster of this test's own: restarting the suite's would fail the tests running beside it.
  const script = path.join(path.dirname(fileURLToPath(import.meta.url)), '../support/pg_cluster.sh');
  const dir = `/tmp/tmcra-pg-restart-${process.pid}`;
  const started = await run('bash', [script, 'start', dir], { timeoutMs: 120_000 });
  assert(started.code === 0, started.stderr);
  r.cleanups.push(async () => { await run('bash', [script, 'stop', dir]); fs.rmSync(dir, { recursive: true, force: true }); });
  const own = Object.fromEntries(fs.readFileSync(path.join(dir, 'env'), 'utf8').trim().split('\n').map((l) => l.split('=')));
  const url = `postgresql://tmcra@127.0.0.1:${own.TMCRA_PG_PORT}/postgres`;
  const made = await keys(['create', '--database', url, '--database-password-file', own.TMCRA_PG_PASSWORD_FILE]);
  assert(made.code === 0, made.stderr);
  const key = made.stdout.trim();
  const srv = await startMemd(BIN, ['--database', url, '--database-password-file', own.TMCRA_PG_PASSWORD_FILE,
    '--index-dir', path.join(TMP, 'index-restart'), '--tls-cert', CERT.cert, '--tls-key', CERT.key], { env: ENV });
  r.cleanups.push(() => { if (srv.exit === null) srv.proc.kill('SIGKILL'); });
  const acknowledged = [];
  const statuses = new Map();
  let stop = false;
  let n = 0;
  const traffic = async () => {
    while (!stop) {
      const i = n;
      n += 1;
      const ing = await request(srv.port, CERT.ca, 'POST', '/v1/scopes/restart/ingest', { key,
        body: turn(`m${i}`, `restart item ${i}`), headers: { 'Idempotency-Key': `restart-item-${i}` }, timeoutMs: 10_000 });
      statuses.set(ing.status, (statuses.get(ing.status) ?? 0) + 1);
      if (ing.status === 202) acknowledged.push(ing.json.job_id);
      if (ing.status === 503) assert(ing.headers['retry-after'] === '1', 'a 503 says when to retry');
      const rec = await request(srv.port, CERT.ca, 'POST', '/v1/scopes/restart/recall', { key, body: { query: 'restart item' }, timeoutMs: 10_000 });
      statuses.set(rec.status, (statuses.get(rec.status) ?? 0) + 1);
      await sleep(5);
    }
  };
  const clients = [traffic(), traffic()];
  while (acknowledged.length < 20) await sleep(10);
  const restarted = await run('bash', [script, 'restart', dir], { timeoutMs: 60_000 });
  assert(restarted.code === 0, restarted.stderr);
  const before = acknowledged.length;
  const deadline = Date.now() + 15_000;
  while (acknowledged.length < before + 20) {
    assert(Date.now() < deadline, `no ingest acknowledged after the restart: ${JSON.stringify([...statuses])}`);
    await sleep(20);
  }
  stop = true;
  await Promise.all(clients);
  for (const status of statuses.keys()) {
    assert([200, 202, 503].includes(status), `only answers and 503s: ${JSON.stringify([...statuses])}`);
  }
  for (const jobId of acknowledged) await waitSucceeded(srv, key, jobId, 60_000);
  assert(srv.exit === null, 'memd kept serving');
  const recall = await request(srv.port, CERT.ca, 'POST', '/v1/scopes/restart/recall', { key, body: { query: 'restart item' } });
  assert(recall.status === 200 && recall.json.evidence.snapshot.records >= acknowledged.length, recall.text.slice(0, 300));
  await stopMemd(srv);
}, { timeoutMs: 120_000 });

await r.test('migrate: a SQLite store copied in (with its feedback), killed halfway and run again: counts, contents and recalls agree', async () => {
  const dataDir = path.join(TMP, 'sqlite-store');
  const made = await keys(['create', '--data-dir', dataDir]);
  assert(made.code === 0, made.stderr);
  const liteKey = made.stdout.trim();
  const lite = await startMemd(BIN, ['--data-dir', dataDir, '--tls-cert', CERT.cert, '--tls-key', CERT.key], { env: ENV });
  r.cleanups.push(() => { if (lite.exit === null) lite.proc.kill('SIGKILL'); });
  const words = ['kestrel', 'harbour', 'lantern', 'granite', 'meadow', 'copper', 'orchard', 'falcon'];
  let last;
  for (let b = 0; b < 30; b += 1) {
    const items = [];
    for (let i = 0; i < 100; i += 1) {
      const n = b * 100 + i;
      items.push({ ...turn(`m${n}`, `note ${n}: the ${words[n % 8]} plan meets the ${words[(n * 3) % 8]} deadline`, `s${n % 40}`),
        idempotency_key: `migrate-item-${n}` });
    }
    const res = await request(lite.port, CERT.ca, 'POST', '/v1/scopes/team/ingest/batch', { key: liteKey, body: { items } });
    assert(res.status === 202, res.text.slice(0, 300));
    last = res.json.jobs;
  }
  for (const job of last) await waitSucceeded(lite, liteKey, job.job_id, 60_000);
  // Feedback is copied too: the record it hides stays hidden.
  const hit = await request(lite.port, CERT.ca, 'POST', '/v1/scopes/team/recall', { key: liteKey, body: { query: 'kestrel plan' } });
  const hidden = JSON.stringify(hit.json.evidence).match(/rec_[0-9a-f]{32}/)[0];
  const fb = await request(lite.port, CERT.ca, 'POST', '/v1/scopes/team/feedback', { key: liteKey,
    body: { rating: 'incorrect', action: 'ignore', memory_ids: [hidden] }, headers: { 'Idempotency-Key': 'migrate-feedback-1' } });
  assert(fb.status === 201, fb.text);
  await stopMemd(lite);

  const url = await freshDatabase('migrate');
  const args = ['migrate', '--from-data-dir', dataDir, '--database', url, '--database-password-file', PASSWORD_FILE, '--batch', '100'];
  // The first run is killed once it has copied part of the store.
  await new Promise((resolve, reject) => {
    const proc = spawn(BIN, args, { env: ENV, stdio: ['ignore', 'pipe', 'pipe'] });
    let lines = 0;
    proc.stderr.on('data', (d) => {
      lines += String(d).split('\n').filter((l) => l.startsWith('migrate: ')).length;
      if (lines >= 4) proc.kill('SIGKILL');
    });
    proc.on('exit', (code, signal) => (signal === 'SIGKILL' ? resolve() : reject(new Error(`migrate ended ${code} before the kill`))));
  });
  const second = await run(BIN, args, { env: ENV, timeoutMs: 120_000 });
  assert(second.code === 0, second.stderr);
  const summary = JSON.parse(second.stdout.trim());
  assert(summary.records === 3000 && summary.records_verified === 3000, second.stdout);
  assert(summary.records_copied > 0 && summary.records_copied < 3000, `the rerun resumed: ${second.stdout}`);
  assert(summary.feedback === 1 && summary.feedback_copied === 1, second.stdout);
  const third = await run(BIN, args, { env: ENV, timeoutMs: 120_000 });
  const thirdSummary = JSON.parse(third.stdout.trim());
  assert(third.code === 0 && thirdSummary.records_copied === 0 && thirdSummary.feedback_copied === 0, third.stdout + third.stderr);
  const rows = await run('psql', ['-h', '127.0.0.1', '-p', CLUSTER.port, '-U', 'tmcra', '-At',
    '-d', new URL(url).pathname.slice(1), '-c', 'SELECT count(*), count(DISTINCT record_id), (SELECT record_count FROM mem_scopes WHERE name = \'team\') FROM mem_records'],
  { env: { ...ENV, PGPASSWORD: PASSWORD } });
  assert(rows.stdout.trim() === '3000|3000|3000', rows.stdout + rows.stderr);

  // The same recalls from the SQLite store and from the database.
  const again = await startMemd(BIN, ['--data-dir', dataDir, '--tls-cert', CERT.cert, '--tls-key', CERT.key], { env: ENV });
  r.cleanups.push(() => { if (again.exit === null) again.proc.kill('SIGKILL'); });
  const pgKey = await newKey(url);
  const served = await serveOn(url, 'migrated');
  for (const query of ['kestrel plan', 'copper deadline', 'note 1234', 'orchard harbour lantern']) {
    const one = await request(again.port, CERT.ca, 'POST', '/v1/scopes/team/recall', { key: liteKey, body: { query } });
    const two = await request(served.port, CERT.ca, 'POST', '/v1/scopes/team/recall', { key: pgKey, body: { query } });
    assert(one.status === 200 && two.status === 200, `${one.text} ${two.text}`);
    assert(one.json.prompt_evidence.content === two.json.prompt_evidence.content, `recall parity for "${query}"`);
    assert(JSON.stringify(one.json.evidence.windows) === JSON.stringify(two.json.evidence.windows), `windows for "${query}"`);
    assert(!two.json.prompt_evidence.content.includes(hidden), `the feedback applies after the migration: "${query}"`);
  }
  const oldJob = await request(served.port, CERT.ca, 'GET', `/v1/jobs/${last[0].job_id}`, { key: pgKey });
  assert(oldJob.status === 200 && oldJob.json.status === 'succeeded', `a migrated job answers: ${oldJob.text}`);
  await stopMemd(again);
  await stopMemd(served);
}, { timeoutMs: 180_000 });

await r.finish();
