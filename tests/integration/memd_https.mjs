#!/usr/bin/env node
// memd_https.mjs — tmcra-memd over real HTTPS, from node's own https/tls clients, on either
// store.
//
//   node tests/integration/memd_https.mjs <tmcra-memd> [sqlite|postgresql]
//
// `sqlite` (the default) serves a --data-dir; `postgresql` serves a fresh database of the
// suite's cluster (TMCRA_PG_DIR, CTest's fixture `postgres`) with --database, each start with an
// index directory of its own, as separate instances have. The tests are the same on both, but
// for those of a data directory's own files and of --local (data directories only), which are
// listed as skipped on PostgreSQL; the 429 test holds PostgreSQL's lock on the jobs table instead
// of SQLite's write lock.
//
// A certificate for IP:127.0.0.1 is made at test time with `openssl req -x509`. The script
// starts the real server (several times: some tests need their own limits or a restart) and
// covers the validation and auth matrix, ingest -> job -> recall, idempotency, feedback, the
// maintenance endpoints (scope figures, export, import, forget), 429 under a
// concurrency limit of 1, gzip, x-request-id, healthz/readyz, --local's two files, floods of
// silent connections against the connection caps, the head deadline, pipelining, log
// escaping, and a SIGTERM that loses no accepted job. Last line: "<N> passed, <M> failed".
import { spawn } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import https from 'node:https';
import http from 'node:http';
import net from 'node:net';
import path from 'node:path';
import tls from 'node:tls';
import zlib from 'node:zlib';

import { Runner, assert, tmpDir, serverEnv, run, sleep } from '../peer/lib.mjs';
import { pgCluster, freshDatabase } from './memd_lib.mjs';

const BIN = process.argv[2] ? path.resolve(process.argv[2]) : '';
const STORE_KIND = process.argv[3] ?? 'sqlite';
const PG = STORE_KIND === 'postgresql';
if (!BIN || !fs.existsSync(BIN) || !['sqlite', 'postgresql'].includes(STORE_KIND) ||
    (PG && !process.env.TMCRA_PG_DIR)) {
  console.error('usage: [TMCRA_PG_DIR=<cluster dir>] node memd_https.mjs <tmcra-memd binary> [sqlite|postgresql]');
  console.log('0 passed, 1 failed');
  process.exit(2);
}

const r = new Runner(PG ? 'memd_https (postgresql)' : 'memd_https', { budgetMs: 240_000 });
const STORE_CHECK = process.env.TMCRA_STORE_CHECK;
const TMP = tmpDir('tmcra-memd-');
const ENV = serverEnv();
const CLUSTER = PG ? pgCluster(process.env.TMCRA_PG_DIR) : null;
if (PG) {
  delete ENV.PGPASSWORD;
  ENV.PGPASSFILE = path.join(TMP, 'no-pgpass');  // the password comes from the file argument only
}
const CERT = path.join(TMP, 'cert.pem');
const KEY = path.join(TMP, 'key.pem');
let CA;

// ---------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------
const servers = [];

/** Starts `tmcra-memd serve ...`; resolves once the readiness line is printed. */
function startMemd(args, { env = ENV } = {}) {
  return new Promise((resolve, reject) => {
    const proc = spawn(BIN, ['serve', ...args], { env, stdio: ['ignore', 'pipe', 'pipe'] });
    const srv = { proc, stderr: '', stdout: '', exit: null };
    srv.exited = new Promise((res) => proc.on('exit', (code, signal) => {
      srv.exit = { code, signal };
      res(srv.exit);
    }));
    servers.push(srv);
    proc.stderr.on('data', (d) => {
      srv.stderr += d;
      if (process.env.PEER_VERBOSE === '1') process.stderr.write(d);
    });
    let line = '';
    const timer = setTimeout(() => reject(new Error(`no readiness line in 10 s\n${srv.stderr}`)), 10_000);
    proc.stdout.on('data', (d) => {
      srv.stdout += d;
      line += d;
      const nl = line.indexOf('\n');
      if (nl >= 0 && !srv.ready) {
        clearTimeout(timer);
        srv.ready = JSON.parse(line.slice(0, nl));
        srv.url = new URL(srv.ready.listening);
        srv.port = Number(srv.url.port);
        resolve(srv);
      }
    });
    srv.exited.then((e) => {
      clearTimeout(timer);
      if (!srv.ready) reject(new Error(`tmcra-memd exited ${JSON.stringify(e)} before ready\n${srv.stderr}`));
    });
  });
}

async function stopMemd(srv, signal = 'SIGTERM') {
  if (srv.exit) return srv.exit;
  srv.proc.kill(signal);
  const timeout = sleep(15_000).then(() => null);
  const exit = await Promise.race([srv.exited, timeout]);
  if (!exit) {
    srv.proc.kill('SIGKILL');
    throw new Error(`tmcra-memd did not exit within 15 s of ${signal}\n${srv.stderr}`);
  }
  return exit;
}

/** Waits for the exit a signal already asked for (a second signal would force an exit 1). */
async function waitExit(srv, ms = 15_000) {
  const exit = await Promise.race([srv.exited, sleep(ms).then(() => null)]);
  if (!exit) throw new Error(`tmcra-memd still running after ${ms} ms\n${srv.stderr}`);
  return exit;
}

r.onCleanup(async () => {
  for (const srv of servers) if (!srv.exit) { srv.proc.kill('SIGKILL'); await srv.exited; }
});

/**
 * One request on a fresh connection. Returns {status, headers, raw, text, json}; a gzip body is
 * decoded (json/text are of the decoded body, raw is what came on the wire).
 */
function request(srv, method, urlPath, { headers = {}, body, chunked = false, key } = {}) {
  return new Promise((resolve, reject) => {
    const h = { ...headers };
    if (key) h.Authorization = `Bearer ${key}`;
    let payload;
    if (body !== undefined) {
      payload = Buffer.isBuffer(body) ? body : Buffer.from(typeof body === 'string' ? body : JSON.stringify(body));
      if (!chunked) h['Content-Length'] = payload.length;
      if (!Object.keys(h).some((k) => k.toLowerCase() === 'content-type')) h['Content-Type'] = 'application/json';
    }
    const mod = srv.url.protocol === 'https:' ? https : http;
    const req = mod.request({
      host: '127.0.0.1', port: srv.port, method, path: urlPath, headers: h, agent: false,
      ...(srv.url.protocol === 'https:' ? { ca: CA } : {}),
    }, (res) => {
      const chunks = [];
      res.on('data', (c) => chunks.push(c));
      res.on('end', () => {
        const raw = Buffer.concat(chunks);
        const decoded = res.headers['content-encoding'] === 'gzip' ? zlib.gunzipSync(raw) : raw;
        const text = decoded.toString('utf8');
        let json;
        try { json = JSON.parse(text); } catch { json = undefined; }
        resolve({ status: res.statusCode, headers: res.headers, raw, text, json });
      });
      res.on('error', reject);
    });
    req.on('error', reject);
    if (payload !== undefined) req.write(payload);
    req.end();
  });
}

/** Raw bytes over TLS: resolves with what came back, and whether the server closed. */
function rawTls(srv, text, { waitMs = 3000, onConnect } = {}) {
  return new Promise((resolve) => {
    const t0 = Date.now();
    let data = '';
    let done = false;
    const finish = (how) => { if (!done) { done = true; resolve({ data, how, ms: Date.now() - t0 }); } };
    const s = tls.connect({ host: '127.0.0.1', port: srv.port, ca: CA }, () => {
      s.write(text);
      if (onConnect) onConnect(s);
    });
    s.on('data', (d) => { data += d; });
    s.on('error', (e) => finish(`error ${e.code}`));
    s.on('close', () => finish('closed'));
    setTimeout(() => { finish('open'); s.destroy(); }, waitMs);
  });
}

function assertEnvelope(res, status, code) {
  assert.equal(res.status, status, `status ${res.status}, body ${res.text}`);
  assert.ok(res.json && typeof res.json.error === 'object', `error envelope expected: ${res.text}`);
  assert.equal(res.json.error.code, code, res.text);
  assert.equal(res.headers['content-type'], 'application/json');
  assert.ok(res.headers['x-request-id'], 'x-request-id header');
  assert.equal(res.json.error.request_id, res.headers['x-request-id']);
  if (status === 411 || status === 413) {
    // The middleware's early rejections: only code and request_id (docs/contract.md §1.3).
    assert.deepEqual(Object.keys(res.json.error).sort(), ['code', 'request_id']);
  } else {
    assert.deepEqual(Object.keys(res.json.error).sort(),
      ['code', 'details', 'message', 'request_id', 'retry_after_seconds']);
    assert.equal(typeof res.json.error.message, 'string');
  }
}

/**
 * A store of the kind under test: a data directory of TMP, or a fresh database of the cluster.
 * `keyArgs` name it to `keys`; `serveArgs()` to `serve`, with (on PostgreSQL) a new index
 * directory each time, so servers running at once are separate instances; `dir` is the data
 * directory, or the index directory of the last serveArgs().
 */
async function makeStore(name) {
  if (!PG) {
    const dir = path.join(TMP, name);
    return { dir, keyArgs: ['--data-dir', dir], serveArgs: () => ['--data-dir', dir] };
  }
  const url = await freshDatabase(CLUSTER, r, name, ENV);
  const keyArgs = ['--database', url, '--database-password-file', CLUSTER.passwordFile];
  let starts = 0;
  const store = { url, keyArgs, dir: path.join(TMP, `${name}-index-0`) };
  store.serveArgs = () => {
    starts += 1;
    store.dir = path.join(TMP, `${name}-index-${starts}`);
    return [...keyArgs, '--index-dir', store.dir];
  };
  return store;
}

/** A test of what only a data directory has (its files, --local): not run on PostgreSQL. */
async function testOnDataDir(title, fn, options) {
  if (!PG) return r.test(title, fn, options);
  r.log(`skip - ${title} (a data directory's own)`);
}

async function keys(store, ...args) {
  const res = await run(BIN, ['keys', ...args, ...store.keyArgs], { env: ENV });
  return res;
}

async function createKey(store, ...args) {
  const res = await keys(store, 'create', ...args);
  assert.equal(res.code, 0, res.stderr);
  const token = res.stdout.trim();
  assert.match(token, /^tmcra_[0-9a-f]{24}\.[0-9a-f]{64}$/);
  assert.equal(res.stdout, `${token}\n`, 'keys create prints exactly the key');
  assert.ok(!res.stderr.includes(token.split('.')[1]), 'the secret is never logged');
  return token;
}

let seq = 0;
function ingestBody(content, session = 's1') {
  seq += 1;
  return {
    session_id: session,
    messages: [{ message_id: `m${seq}`, role: 'user', content, timestamp: '2026-07-15T00:00:00Z' }],
  };
}

async function waitJob(srv, key, jobId, ms = 10_000) {
  const deadline = Date.now() + ms;
  for (;;) {
    const res = await request(srv, 'GET', `/v1/jobs/${jobId}`, { key });
    assert.equal(res.status, 200, res.text);
    if (['succeeded', 'failed', 'cancelled'].includes(res.json.status)) return res.json;
    if (Date.now() > deadline) throw new Error(`job ${jobId} still ${res.json.status}`);
    await sleep(50);
  }
}

function mode(p) { return fs.statSync(p).mode & 0o777; }

// ---------------------------------------------------------------------------
// Setup
// ---------------------------------------------------------------------------
const DATA = await makeStore('data');
let main;          // the main server: --max-concurrency 1, default body limit
let FULL;          // all permissions
let READ_ONLY;     // memory:read
let REVOKED;
let SCOPED;        // --scope-prefix team-

await r.test('openssl makes a certificate for IP:127.0.0.1', async () => {
  const res = await run('openssl', ['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', KEY,
    '-out', CERT, '-days', '1', '-subj', '/CN=127.0.0.1', '-addext', 'subjectAltName=IP:127.0.0.1']);
  assert.equal(res.code, 0, res.stderr);
  fs.chmodSync(KEY, 0o600);
  CA = fs.readFileSync(CERT);
});

await r.test('keys create / list / revoke; the key store is private', async () => {
  FULL = await createKey(DATA);
  READ_ONLY = await createKey(DATA, '--permissions', 'memory:read', '--label', 'reader');
  REVOKED = await createKey(DATA);
  SCOPED = await createKey(DATA, '--scope-prefix', 'team-');
  const revokedId = REVOKED.slice(6, 30);
  const rev = await keys(DATA, 'revoke', revokedId);
  assert.equal(rev.code, 0, rev.stderr);
  const again = await keys(DATA, 'revoke', '0123456789abcdef01234567');
  assert.equal(again.code, 1, 'revoking an unknown id fails');
  const list = await keys(DATA, 'list');
  assert.equal(list.code, 0, list.stderr);
  const lines = list.stdout.trim().split('\n').map((l) => JSON.parse(l));
  assert.equal(lines.length, 4);
  for (const k of [FULL, READ_ONLY, REVOKED, SCOPED]) {
    assert.ok(!list.stdout.includes(k.split('.')[1]), 'keys list never shows a secret');
  }
  const byId = Object.fromEntries(lines.map((l) => [l.key_id, l]));
  assert.deepEqual(byId[READ_ONLY.slice(6, 30)].permissions, ['memory:read']);
  assert.equal(byId[READ_ONLY.slice(6, 30)].label, 'reader');
  assert.ok(byId[revokedId].revoked_at);
  assert.deepEqual(byId[SCOPED.slice(6, 30)].scope_prefixes, ['team-']);
  const bad = await keys(DATA, 'create', '--permissions', 'memory:admin');
  assert.equal(bad.code, 2);
  assert.equal(bad.stdout, '');
  if (!PG) {
    assert.equal(mode(DATA.dir), 0o700);
    assert.equal(mode(path.join(DATA.dir, 'keys.db')), 0o600);
  }
});

await r.test('keys create: an empty or blank --permissions is an error, never every permission', async () => {
  const dir = await makeStore('perm');
  for (const args of [['--permissions', ''], ['--permissions', ' '], ['--permissions', ','],
    ['--permissions=']]) {
    const res = await keys(dir, 'create', ...args);
    assert.equal(res.code, 2, `${JSON.stringify(args)}: ${res.stdout} ${res.stderr}`);
    assert.match(res.stderr, /permission list is empty/);
    assert.equal(res.stdout, '', 'no key printed');
  }
  const listed = await keys(dir, 'list');
  assert.equal(listed.stdout.trim(), '', 'no key was made');
});

await testOnDataDir('a --data-dir that others can write, or another user owns, is refused', async () => {
  const open = path.join(TMP, 'open-data');
  fs.mkdirSync(open, { mode: 0o700 });
  fs.chmodSync(open, 0o777);
  const made = await keys({ keyArgs: ['--data-dir', open] }, 'create');
  assert.notEqual(made.code, 0, made.stderr);
  assert.match(made.stderr, /0777\) is writable by group or others/);
  assert.ok(!fs.existsSync(path.join(open, 'keys.db')), 'no key store was made there');
  await assert.rejects(startMemd(['--data-dir', open, '--tls-cert', CERT, '--tls-key', KEY]),
    /writable by group or others/);
  if (process.getuid() === 0) {
    fs.chmodSync(open, 0o700);
    fs.chownSync(open, 65534, 65534);
    const theirs = await keys({ keyArgs: ['--data-dir', open] }, 'create');
    assert.notEqual(theirs.code, 0);
    assert.match(theirs.stderr, /owned by uid 65534/);
  }
});

await r.test('serve refuses to start without TLS (unless --local) and --local off loopback', async () => {
  const a = await run(BIN, ['serve', ...DATA.serveArgs()], { env: ENV });
  assert.equal(a.code, 2);
  assert.match(a.stderr, /--tls-cert and --tls-key are required/);
  const b = await run(BIN, ['serve', ...DATA.serveArgs(), '--local', '--listen', '0.0.0.0:0'], { env: ENV });
  assert.equal(b.code, 2);
  assert.match(b.stderr, PG ? /--local/ : /127\.0\.0\.1 only/);
  const c = await run(BIN, ['serve', ...DATA.serveArgs(), '--tls-cert', CERT, '--tls-key', CERT], { env: ENV });
  assert.equal(c.code, 1, 'a certificate is not a key');
  assert.match(c.stderr, /TLS key/);
});

await r.test('starts: one readiness line {"listening":"https://127.0.0.1:PORT"}', async () => {
  // --gzip always: this test's client is on loopback, where the default (auto) never gzips.
  main = await startMemd([...DATA.serveArgs(), '--tls-cert', CERT, '--tls-key', KEY,
    '--max-concurrency', '1', '--gzip', 'always']);
  assert.deepEqual(Object.keys(main.ready), ['listening']);
  assert.match(main.ready.listening, /^https:\/\/127\.0\.0\.1:\d+$/);
  assert.ok(main.port > 0);
  // The store's file (on PostgreSQL, the instance's index of it) is private.
  const file = PG ? fs.readdirSync(DATA.dir).find((f) => /^index-[0-9a-f]+\.db$/.test(f)) : 'memory.db';
  assert.ok(file, `an index file in ${DATA.dir}`);
  assert.equal(mode(DATA.dir), 0o700);
  assert.equal(mode(path.join(DATA.dir, file)), 0o600);
});

// ---------------------------------------------------------------------------
// Anonymous endpoints, request ids
// ---------------------------------------------------------------------------
await r.test('healthz and readyz answer without a key', async () => {
  const h = await request(main, 'GET', '/healthz');
  assert.equal(h.status, 200);
  assert.deepEqual(h.json, { status: 'ok' });
  const rd = await request(main, 'GET', '/readyz');
  assert.equal(rd.status, 200);
  assert.deepEqual(rd.json, { status: 'ready' });
  assert.match(h.headers['x-request-id'], /^[0-9a-f-]{36}$/);
  assert.notEqual(h.headers['x-request-id'], rd.headers['x-request-id']);
});

await r.test('x-request-id: a sane client id is echoed, anything else replaced', async () => {
  const a = await request(main, 'GET', '/healthz', { headers: { 'X-Request-ID': 'trace-42.a:b' } });
  assert.equal(a.headers['x-request-id'], 'trace-42.a:b');
  const b = await request(main, 'GET', '/healthz', { headers: { 'X-Request-ID': 'has space' } });
  assert.match(b.headers['x-request-id'], /^[0-9a-f-]{36}$/);
  const c = await request(main, 'POST', '/v1/scopes/team/recall', { body: { query: 'x' },
    headers: { 'X-Request-ID': 'abc-123' } });
  assertEnvelope(c, 401, 'unauthorized');
  assert.equal(c.json.error.request_id, 'abc-123');
});

// ---------------------------------------------------------------------------
// Authentication and permissions
// ---------------------------------------------------------------------------
const RECALL = { query: 'anything', max_windows: 8 };

await r.test('401 unauthorized: missing, malformed, unknown, wrong secret, revoked', async () => {
  const unknown = `tmcra_${crypto.randomBytes(12).toString('hex')}.${crypto.randomBytes(32).toString('hex')}`;
  const wrongSecret = `${FULL.slice(0, 31)}${crypto.randomBytes(32).toString('hex')}`;
  const cases = [
    ['missing', {}],
    ['not bearer', { headers: { Authorization: `Basic ${Buffer.from('a:b').toString('base64')}` } }],
    ['malformed', { key: 'tmcra_abc' }],
    ['scoped-token shape', { key: `tmcra_st_${crypto.randomBytes(12).toString('hex')}.x` }],
    ['unknown', { key: unknown }],
    ['wrong secret', { key: wrongSecret }],
    ['revoked', { key: REVOKED }],
  ];
  for (const [name, opts] of cases) {
    const res = await request(main, 'POST', '/v1/scopes/team/recall', { body: RECALL, ...opts });
    assertEnvelope(res, 401, 'unauthorized');
    assert.equal(res.headers['www-authenticate'], 'Bearer', name);
  }
  assert.ok(!main.stderr.includes(wrongSecret.split('.')[1]), 'a presented secret is never logged');
});

await r.test('a key revoked while the server runs stops working at once', async () => {
  const k = await createKey(DATA);
  const ok = await request(main, 'POST', '/v1/scopes/team/recall', { body: RECALL, key: k });
  assert.equal(ok.status, 200, ok.text);
  assert.notEqual((await keys(DATA, 'revoke', k)).code, 0, 'revoke refuses a whole key (argv is visible)');
  assert.equal((await keys(DATA, 'revoke', k.slice(0, k.indexOf('.')))).code, 0, 'revoke by tmcra_<id>');
  const gone = await request(main, 'POST', '/v1/scopes/team/recall', { body: RECALL, key: k });
  assertEnvelope(gone, 401, 'unauthorized');
});

await r.test('403 forbidden: a read-only key cannot ingest or give feedback', async () => {
  const ing = await request(main, 'POST', '/v1/scopes/team/ingest', {
    key: READ_ONLY, body: ingestBody('x'), headers: { 'Idempotency-Key': 'ro-key-0001' } });
  assertEnvelope(ing, 403, 'forbidden');
  assert.match(ing.json.error.message, /memory:write/);
  const batch = await request(main, 'POST', '/v1/scopes/team/ingest/batch', {
    key: READ_ONLY, body: { items: [{ ...ingestBody('x'), idempotency_key: 'ro-key-0002' }] } });
  assertEnvelope(batch, 403, 'forbidden');
  const fb = await request(main, 'POST', '/v1/scopes/team/feedback', {
    key: READ_ONLY, body: { rating: 'helpful' } });
  assertEnvelope(fb, 403, 'forbidden');
  const rec = await request(main, 'POST', '/v1/scopes/team/recall', { key: READ_ONLY, body: RECALL });
  assert.equal(rec.status, 200, rec.text);
});

await r.test('403 forbidden: a key limited to team-* scopes', async () => {
  const inScope = await request(main, 'POST', '/v1/scopes/team-a/recall', { key: SCOPED, body: RECALL });
  assert.equal(inScope.status, 200, inScope.text);
  const outScope = await request(main, 'POST', '/v1/scopes/other/recall', { key: SCOPED, body: RECALL });
  assertEnvelope(outScope, 403, 'forbidden');
});

// ---------------------------------------------------------------------------
// Validation
// ---------------------------------------------------------------------------
await r.test('422 validation_error for a bad scope name', async () => {
  for (const scope of ['-lead', 'a%20b', 'a%2Fb', 'x'.repeat(129), '%C3%A9']) {
    const res = await request(main, 'POST', `/v1/scopes/${scope}/recall`, { key: FULL, body: RECALL });
    assertEnvelope(res, 422, 'validation_error');
    assert.ok(Array.isArray(res.json.error.details), res.text);
  }
});

await r.test('422 invalid_usage_attribution for bad attribution headers', async () => {
  const bad = [
    { 'X-TMCRA-Client-Platform': 'bogus' },
    { 'X-TMCRA-Integration-ID': '-starts-with-dash' },
    { 'X-TMCRA-Agent-ID': 'has space' },
    { 'X-TMCRA-Agent-ID': 'a'.repeat(201) },
  ];
  for (const headers of bad) {
    const res = await request(main, 'POST', '/v1/scopes/team/recall', { key: FULL, body: RECALL, headers });
    assertEnvelope(res, 422, 'invalid_usage_attribution');
  }
  const good = await request(main, 'POST', '/v1/scopes/team/recall', { key: FULL, body: RECALL, headers: {
    'X-TMCRA-Client-Platform': 'mcp', 'X-TMCRA-Integration-ID': 'int.1:x', 'X-TMCRA-Agent-ID': 'agent@host/1' } });
  assert.equal(good.status, 200, good.text);
});

await r.test('422 for invalid JSON, a non-object, nesting over 64, wrong media type, no body', async () => {
  const cases = [
    ['{"query": ', 'json_invalid'],
    ['[1, 2]', 'model_attributes_type'],
    ['"text"', 'model_attributes_type'],
    ['{"query": NaN, "max_windows": 8}', 'json_invalid'],
    [`{"query": "x", "metadata": ${'['.repeat(70)}${']'.repeat(70)}}`, 'json_invalid'],
    [Buffer.from([0x7b, 0x22, 0xff, 0x22, 0x3a, 0x31, 0x7d]), 'json_invalid'],
    ['', 'missing'],
  ];
  for (const [body, type] of cases) {
    const res = await request(main, 'POST', '/v1/scopes/team/recall', { key: FULL, body });
    assertEnvelope(res, 422, 'validation_error');
    assert.equal(res.json.error.details[0].type, type, res.text);
  }
  const form = await request(main, 'POST', '/v1/scopes/team/recall', { key: FULL, body: 'query=x',
    headers: { 'Content-Type': 'application/x-www-form-urlencoded' } });
  assertEnvelope(form, 422, 'validation_error');
  const extra = await request(main, 'POST', '/v1/scopes/team/recall', { key: FULL,
    body: { ...RECALL, surprise: 1 } });
  assertEnvelope(extra, 422, 'validation_error');
});

await r.test('413 request_too_large over 2 MiB (drained, then answered)', async () => {
  const body = Buffer.alloc(2 * 1024 * 1024 + 1, 0x20);
  const res = await request(main, 'POST', '/v1/scopes/team/recall', { key: FULL, body });
  assertEnvelope(res, 413, 'request_too_large');
  const after = await request(main, 'GET', '/healthz');
  assert.equal(after.status, 200);
});

await r.test('413 at once, connection closed, for a huge declared Content-Length', async () => {
  const res = await rawTls(main, 'POST /v1/scopes/team/recall HTTP/1.1\r\nHost: x\r\n' +
    'Content-Length: 100000000\r\nContent-Type: application/json\r\n\r\n{"q', { waitMs: 4000 });
  assert.match(res.data, /^HTTP\/1\.1 413 /);
  assert.match(res.data, /"code":"request_too_large"/);
  assert.match(res.data, /\r\nConnection: close\r\n/i);
  assert.equal(res.how, 'closed');
  assert.ok(res.ms < 3000, `closed after ${res.ms} ms`);
});

await r.test('411 content_length_required: chunked body, and POST without Content-Length', async () => {
  const chunked = await request(main, 'POST', '/v1/scopes/team/recall', { key: FULL, body: RECALL, chunked: true });
  assertEnvelope(chunked, 411, 'content_length_required');
  const raw = await rawTls(main, 'POST /v1/scopes/team/recall HTTP/1.1\r\nHost: x\r\n' +
    `Authorization: Bearer ${FULL}\r\nConnection: close\r\n\r\n`, { waitMs: 3000 });
  assert.equal(raw.how, 'closed');
  assert.match(raw.data, /^HTTP\/1\.1 411 /);
  assert.match(raw.data, /"code":"content_length_required"/);
});

await r.test('404 not_found for unknown routes and jobs, 405 for a wrong method', async () => {
  assertEnvelope(await request(main, 'GET', '/v1/nothing', { key: FULL }), 404, 'not_found');
  assertEnvelope(await request(main, 'GET', '/v1/jobs/job_unknown', { key: FULL }), 404, 'not_found');
  const wrong = await request(main, 'GET', '/v1/scopes/team/recall', { key: FULL });
  assertEnvelope(wrong, 405, 'method_not_allowed');
  assert.equal(wrong.headers.allow, 'POST');
});

// ---------------------------------------------------------------------------
// Ingest, jobs, recall, idempotency, evidence, feedback, gzip
// ---------------------------------------------------------------------------
let firstJob;
const NEEDLE = 'The staging database migrates every Thursday at noon';

await r.test('ingest -> 202 -> job succeeds -> recall finds it', async () => {
  const res = await request(main, 'POST', '/v1/scopes/team/ingest', { key: FULL,
    body: ingestBody(NEEDLE), headers: { 'Idempotency-Key': 'ingest-key-0001', 'X-TMCRA-Client-Platform': 'mcp' } });
  assert.equal(res.status, 202, res.text);
  assert.equal(res.json.scope_name, 'team');
  assert.equal(res.json.idempotent_replay, false);
  assert.equal(res.json.status_url, `${main.ready.listening}/v1/jobs/${res.json.job_id}`);
  firstJob = res.json;
  const job = await waitJob(main, FULL, res.json.job_id);
  assert.equal(job.status, 'succeeded');
  const rec = await request(main, 'POST', '/v1/scopes/team/recall', { key: FULL,
    body: { query: 'staging database Thursday', max_windows: 8, wait_for_job_id: job.job_id } });
  assert.equal(rec.status, 200, rec.text);
  assert.ok(rec.json.prompt_evidence.content.includes(NEEDLE), rec.json.prompt_evidence.content);
  const sha = crypto.createHash('sha256').update(rec.json.prompt_evidence.content, 'utf8').digest('hex');
  assert.equal(rec.json.prompt_evidence.content_sha256, sha);
});

await r.test('prompt_only keeps the snapshot, and every answer says so in X-TMCRA-Memd-Features', async () => {
  const body = { query: 'staging database Thursday', max_windows: 8 };
  const full = await request(main, 'POST', '/v1/scopes/team/recall', { key: FULL, body });
  const light = await request(main, 'POST', '/v1/scopes/team/recall', { key: FULL,
    body: { ...body, response_projection: 'prompt_only' } });
  assert.equal(light.status, 200, light.text);
  assert.deepEqual(Object.keys(light.json.evidence), ['snapshot']);
  assert.deepEqual(light.json.evidence.snapshot, full.json.evidence.snapshot);
  assert.ok(Number.isInteger(light.json.evidence.snapshot.source_event_seq), light.text);
  assert.deepEqual(light.json.prompt_evidence, full.json.prompt_evidence);
  assert.ok(light.raw.length < full.raw.length, `${light.raw.length} < ${full.raw.length}`);
  for (const res of [full, light, await request(main, 'GET', '/v1/jobs/job_unknown', { key: FULL }),
    await request(main, 'GET', '/healthz')]) {
    assert.equal(res.headers['x-tmcra-memd-features'], 'prompt-only-snapshot');
  }
});

await r.test('idempotency: same key + body replays the job; another body is 409', async () => {
  seq -= 1;  // the same message id as the first ingest
  const body = ingestBody(NEEDLE);
  const again = await request(main, 'POST', '/v1/scopes/team/ingest', { key: FULL, body,
    headers: { 'Idempotency-Key': 'ingest-key-0001', 'X-TMCRA-Client-Platform': 'mcp' } });
  assert.equal(again.status, 202, again.text);
  assert.equal(again.json.job_id, firstJob.job_id);
  assert.equal(again.json.idempotent_replay, true);
  const other = await request(main, 'POST', '/v1/scopes/team/ingest', { key: FULL,
    body: ingestBody('something else'), headers: { 'Idempotency-Key': 'ingest-key-0001', 'X-TMCRA-Client-Platform': 'mcp' } });
  assertEnvelope(other, 409, 'idempotency_conflict');
  // The attribution headers are part of the request: another platform is another request.
  seq -= 1;
  const platform = await request(main, 'POST', '/v1/scopes/team/ingest', { key: FULL,
    body: ingestBody(NEEDLE), headers: { 'Idempotency-Key': 'ingest-key-0001', 'X-TMCRA-Client-Platform': 'codex' } });
  assertEnvelope(platform, 409, 'idempotency_conflict');
  const noKey = await request(main, 'POST', '/v1/scopes/team/ingest', { key: FULL, body: ingestBody('x') });
  assertEnvelope(noKey, 422, 'validation_error');
});

await r.test('ingest/batch -> 202 with one job per item', async () => {
  const res = await request(main, 'POST', '/v1/scopes/team/ingest/batch', { key: FULL, body: {
    items: [{ ...ingestBody('batch one about kiwis'), idempotency_key: 'batch-key-0001' },
      { ...ingestBody('batch two about mangos'), idempotency_key: 'batch-key-0002' }] } });
  assert.equal(res.status, 202, res.text);
  assert.equal(res.json.scope_name, 'team');
  assert.equal(res.json.jobs.length, 2);
  for (const j of res.json.jobs) assert.equal((await waitJob(main, FULL, j.job_id)).status, 'succeeded');
});

await r.test('jobs/batch -> 200 with one entry per id, in order: the job, 404 or 403', async () => {
  const res = await request(main, 'POST', '/v1/scopes/team-a/ingest', { key: FULL,
    body: ingestBody('a job of team-a'), headers: { 'Idempotency-Key': 'jobs-batch-key-01' } });
  assert.equal(res.status, 202, res.text);
  const teamA = (await waitJob(main, FULL, res.json.job_id)).job_id;
  const ids = [firstJob.job_id, 'job_unknown', teamA];
  const batch = await request(main, 'POST', '/v1/jobs/batch', { key: FULL, body: { job_ids: ids } });
  assert.equal(batch.status, 200, batch.text);
  assert.deepEqual(Object.keys(batch.json), ['jobs']);
  assert.deepEqual(batch.json.jobs.map((e) => e.job_id), ids);
  assert.deepEqual(batch.json.jobs.map((e) => e.status_code), [200, 404, 200]);
  const single = await request(main, 'GET', `/v1/jobs/${firstJob.job_id}`, { key: FULL });
  assert.deepEqual(batch.json.jobs[0].job, single.json, 'the same JobView as GET /v1/jobs/{id}');
  assert.equal(batch.json.jobs[1].error.code, 'not_found');
  assert.equal(batch.json.jobs[1].error.request_id, batch.headers['x-request-id']);
  assert.equal(batch.json.jobs[2].job.scope_name, 'team-a');
  // A key limited to team-*: the team job is 403 in its entry, as GET /v1/jobs/{id} answers.
  const scoped = await request(main, 'POST', '/v1/jobs/batch', { key: SCOPED, body: { job_ids: ids } });
  assert.equal(scoped.status, 200, scoped.text);
  assert.deepEqual(scoped.json.jobs.map((e) => e.status_code), [403, 404, 200]);
  assert.equal(scoped.json.jobs[0].error.code, 'forbidden');
  assert.equal(scoped.json.jobs[0].job, undefined);
  assertEnvelope(await request(main, 'GET', `/v1/jobs/${firstJob.job_id}`, { key: SCOPED }), 403, 'forbidden');
});

await r.test('jobs/batch: memory:read, a valid body, POST only', async () => {
  const writer = await createKey(DATA, '--permissions', 'memory:write', '--label', 'writer');
  const noRead = await request(main, 'POST', '/v1/jobs/batch', { key: writer, body: { job_ids: ['job_x'] } });
  assertEnvelope(noRead, 403, 'forbidden');
  assert.match(noRead.json.error.message, /memory:read/);
  assertEnvelope(await request(main, 'POST', '/v1/jobs/batch', { body: { job_ids: ['job_x'] } }), 401, 'unauthorized');
  const hundredOne = Array.from({ length: 101 }, (_, i) => `job_${i}`);
  for (const [body, loc] of [
    [{}, 'job_ids'], [{ job_ids: 'job_x' }, 'job_ids'], [{ job_ids: [] }, 'job_ids'],
    [{ job_ids: hundredOne }, 'job_ids'], [{ job_ids: ['job_x', 3] }, 'job_ids.1'],
    [{ job_ids: [''] }, 'job_ids.0'], [{ job_ids: ['job_x', 'job_x'] }, 'job_ids.1'],
    [{ job_ids: ['job_x'], wait: true }, 'wait'], [[], null],
  ]) {
    const res = await request(main, 'POST', '/v1/jobs/batch', { key: FULL, body });
    assertEnvelope(res, 422, 'validation_error');
    if (loc) assert.ok(res.json.error.message.startsWith(`${loc}: `), res.text);
    assert.ok(Array.isArray(res.json.error.details), res.text);
  }
  const get = await request(main, 'GET', '/v1/jobs/batch', { key: FULL });
  assertEnvelope(get, 405, 'method_not_allowed');
  assert.equal(get.headers.allow, 'POST');
});

await r.test('gzip (--gzip always): bodies of 1024 bytes or more when accepted; never below, never unasked', async () => {
  const body = { query: 'staging database Thursday', max_windows: 8 };
  const gz = await request(main, 'POST', '/v1/scopes/team/recall', { key: FULL, body,
    headers: { 'Accept-Encoding': 'gzip, deflate, br' } });
  assert.equal(gz.status, 200);
  assert.equal(gz.headers['content-encoding'], 'gzip');
  assert.equal(gz.headers.vary, 'Accept-Encoding');
  assert.ok(gz.text.length >= 1024);
  assert.equal(Number(gz.headers['content-length']), gz.raw.length);
  assert.ok(gz.json.prompt_evidence.content.includes(NEEDLE), 'the decoded body is the answer');
  const plain = await request(main, 'POST', '/v1/scopes/team/recall', { key: FULL, body });
  assert.equal(plain.headers['content-encoding'], undefined);
  assert.deepEqual({ ...plain.json, query_id: '' }, { ...gz.json, query_id: '' });
  const refused = await request(main, 'POST', '/v1/scopes/team/recall', { key: FULL, body,
    headers: { 'Accept-Encoding': 'gzip;q=0' } });
  assert.equal(refused.headers['content-encoding'], undefined);
  const small = await request(main, 'GET', '/healthz', { headers: { 'Accept-Encoding': 'gzip' } });
  assert.equal(small.headers['content-encoding'], undefined);
});

await r.test('evidence (limit) and feedback (201, idempotent)', async () => {
  const rec = await request(main, 'POST', '/v1/scopes/team/recall', { key: FULL,
    body: { query: 'staging database', max_windows: 8 } });
  const ids = JSON.stringify(rec.json.evidence).match(/rec_[0-9a-f]{32}/);
  assert.ok(ids, `a record id in ${rec.text.slice(0, 400)}`);
  const ev = await request(main, 'GET', `/v1/scopes/team/memory-graph/nodes/${ids[0]}/evidence?limit=25`, { key: READ_ONLY });
  assert.equal(ev.status, 200, ev.text);
  assert.equal(ev.json.memory_id, ids[0]);
  assert.ok(ev.json.items.length >= 1);
  const badLimit = await request(main, 'GET', `/v1/scopes/team/memory-graph/nodes/${ids[0]}/evidence?limit=abc`, { key: FULL });
  assertEnvelope(badLimit, 422, 'validation_error');
  const tooBig = await request(main, 'GET', `/v1/scopes/team/memory-graph/nodes/${ids[0]}/evidence?limit=26`, { key: FULL });
  assertEnvelope(tooBig, 422, 'validation_error');
  const other = await request(main, 'GET', `/v1/scopes/team-b/memory-graph/nodes/${ids[0]}/evidence`, { key: FULL });
  assertEnvelope(other, 404, 'not_found');
  const body = { rating: 'incorrect', action: 'ignore', memory_ids: [ids[0]], query_id: null };
  const fb = await request(main, 'POST', '/v1/scopes/team/feedback', { key: FULL, body,
    headers: { 'Idempotency-Key': 'feedback-key-01' } });
  assert.equal(fb.status, 201, fb.text);
  const fb2 = await request(main, 'POST', '/v1/scopes/team/feedback', { key: FULL, body,
    headers: { 'Idempotency-Key': 'feedback-key-01' } });
  assert.equal(fb2.status, 201);
  assert.equal(fb2.json.feedback_id, fb.json.feedback_id);
  const restore = await request(main, 'POST', '/v1/scopes/team/feedback', { key: FULL,
    body: { ...body, rating: 'helpful', action: 'restore' }, headers: { 'Idempotency-Key': 'feedback-key-01' } });
  assertEnvelope(restore, 409, 'idempotency_conflict');
});

await r.test('feedback "correct" needs memory:write as well', async () => {
  const fbOnly = await createKey(DATA, '--permissions', 'memory:feedback,memory:read');
  const res = await request(main, 'POST', '/v1/scopes/team/feedback', { key: fbOnly,
    body: { rating: 'incorrect', action: 'correct', memory_ids: ['rec_x'], replacement: 'fixed' },
    headers: { 'Idempotency-Key': 'feedback-key-02' } });
  assertEnvelope(res, 403, 'forbidden');
  assert.match(res.json.error.message, /memory:write is required to save a correction/);
});

await r.test('maintenance: scope figures, export, import and forget, each with its permission', async () => {
  const admin = await createKey(DATA, '--permissions',
    'memory:read,memory:write,memory:feedback,memory:delete,memory:export');
  const turns = [['ms1', 'The albatross backup runs at midnight from the primary'],
    ['ms2', 'The heron report is due on the first Monday of each month']];
  for (const [session, text] of turns) {
    const ing = await request(main, 'POST', '/v1/scopes/maint/ingest', { key: FULL,
      body: ingestBody(text, session), headers: { 'Idempotency-Key': `maint-${session}-0001` } });
    assert.equal(ing.status, 202, ing.text);
    assert.equal((await waitJob(main, FULL, ing.json.job_id)).status, 'succeeded');
  }
  const hit = await request(main, 'POST', '/v1/scopes/maint/recall', { key: FULL, body: { query: 'albatross backup' } });
  const albatross = JSON.stringify(hit.json.evidence).match(/rec_[0-9a-f]{32}/)[0];
  const fb = await request(main, 'POST', '/v1/scopes/maint/feedback', { key: FULL,
    body: { rating: 'stale', action: 'ignore', memory_ids: [albatross] }, headers: { 'Idempotency-Key': 'maint-feedback-01' } });
  assert.equal(fb.status, 201, fb.text);
  const figures = async () => {
    const res = await request(main, 'GET', '/v1/scopes', { key: admin });
    assert.equal(res.status, 200, res.text);
    return res.json.scopes.find((x) => x.scope_name === 'maint');
  };
  const before = await figures();
  assert.equal(before.messages, 2, JSON.stringify(before));
  assert.equal(before.feedback, 1, JSON.stringify(before));

  assertEnvelope(await request(main, 'GET', '/v1/scopes/maint/export', { key: FULL }), 403, 'forbidden');
  const exported = await request(main, 'GET', '/v1/scopes/maint/export', { key: admin });
  assert.equal(exported.status, 200, exported.text);
  assert.deepEqual(exported.json.lines.map((l) => l.type), ['record', 'record', 'feedback']);

  // A record of another store imported: added once, then present.
  const line = { ...exported.json.lines[1], memory_id: `rec_${crypto.randomBytes(16).toString('hex')}`,
    session_id: 'imported', message_id: 'im1', content: 'The kingfisher audit was imported from elsewhere' };
  for (const [added, present] of [[1, 0], [0, 1]]) {
    const imported = await request(main, 'POST', '/v1/scopes/maint/import', { key: FULL, body: { lines: [line] } });
    assert.equal(imported.status, 200, imported.text);
    assert.equal(imported.json.records_added, added, imported.text);
    assert.equal(imported.json.records_present, present, imported.text);
  }
  const found = await request(main, 'POST', '/v1/scopes/maint/recall', { key: FULL, body: { query: 'kingfisher audit' } });
  assert.ok(found.json.prompt_evidence.content.includes('kingfisher audit'), found.text);

  assertEnvelope(await request(main, 'POST', '/v1/scopes/maint/forget', { key: FULL, body: { session_id: 'ms1' } }),
    403, 'forbidden');
  const dry = await request(main, 'POST', '/v1/scopes/maint/forget', { key: admin, body: { session_id: 'ms1', dry_run: true } });
  assert.equal(dry.status, 200, dry.text);
  assert.equal(dry.json.records, 1, dry.text);
  assert.equal((await figures()).messages, 3, 'a dry run deletes nothing');
  const forgot = await request(main, 'POST', '/v1/scopes/maint/forget', { key: admin, body: { session_id: 'ms1' } });
  assert.equal(forgot.status, 200, forgot.text);
  assert.equal(forgot.json.records, 1, forgot.text);
  assert.equal(forgot.json.feedback, 1, 'the feedback on the forgotten record goes with it');
  assert.equal(forgot.json.erase, 'done', forgot.text);
  const after = await figures();
  assert.equal(after.messages, 2, JSON.stringify(after));
  assert.equal(after.feedback, 0, JSON.stringify(after));
  const gone = await request(main, 'POST', '/v1/scopes/maint/recall', { key: FULL, body: { query: 'albatross backup midnight' } });
  assert.ok(!gone.text.includes('albatross'), gone.text);
  const left = await request(main, 'GET', '/v1/scopes/maint/export', { key: admin });
  assert.deepEqual(left.json.lines.map((l) => l.session_id).sort(), ['imported', 'ms2']);
});

/**
 * Holds the store's write lock from another process until release(): SQLite's, with
 * tmcra-store-check; on PostgreSQL, a lock on the jobs table (which an ingest writes) from psql.
 */
function holdStoreLock() {
  let holder;
  if (PG) {
    holder = spawn('psql', ['-h', '127.0.0.1', '-p', CLUSTER.port, '-U', 'tmcra', '-At', '-v', 'ON_ERROR_STOP=1',
      '-d', new URL(DATA.url).pathname.slice(1)], { stdio: ['pipe', 'pipe', 'pipe'],
      env: { ...ENV, PGPASSWORD: CLUSTER.password } });
    holder.stdin.write("BEGIN;\nLOCK TABLE mem_jobs IN EXCLUSIVE MODE;\nSELECT 'held';\n");
  } else {
    assert.ok(STORE_CHECK, 'TMCRA_STORE_CHECK (the tmcra-store-check binary) must be set; CTest sets it');
    holder = spawn(STORE_CHECK, ['--hold-write-lock', path.join(DATA.dir, 'memory.db')],
      { stdio: ['pipe', 'pipe', 'pipe'] });
  }
  const exit = new Promise((resolve) => holder.on('exit', (code) => resolve(code)));
  const held = new Promise((resolve, reject) => {
    let out = '';
    holder.stdout.on('data', (d) => { out += d; if (out.includes('held')) resolve(); });
    holder.on('exit', (code) => reject(new Error(`the lock holder exited ${code} before holding the lock`)));
  });
  return { held, exit, release: () => holder.stdin.end() };
}

await r.test('429 rate_limited with Retry-After: 1 under --max-concurrency 1', async () => {
  // A slot is taken once a request's body is in and given back once its answer is made. An
  // ingest waiting for the store's write lock (held by another process) holds the only slot; a
  // request sent meanwhile is answered 429.
  const holder = holdStoreLock();
  try {
    await holder.held;
    const waiting = request(main, 'POST', '/v1/scopes/team/ingest', { key: FULL,
      body: ingestBody('Written once the lock is free'), headers: { 'Idempotency-Key': 'slot-holder-0001' } });
    let limited;
    const deadline = Date.now() + 5000;
    while (!limited && Date.now() < deadline) {
      await sleep(50);
      const res = await request(main, 'GET', `/v1/jobs/${firstJob.job_id}`, { key: FULL });
      if (res.status === 429) limited = res; else assert.equal(res.status, 200, res.text);
    }
    assert.ok(limited, 'a request sent while the ingest waits was answered 429');
    assertEnvelope(limited, 429, 'rate_limited');
    assert.equal(limited.headers['retry-after'], '1');
    assert.equal(limited.json.error.retry_after_seconds, 1);
    const health = await request(main, 'GET', '/healthz');
    assert.equal(health.status, 200, 'health checks are not limited');
    holder.release();  // the lock goes: the ingest goes through
    const done = await waiting;
    assert.equal(done.status, 202, done.text);
  } finally {
    holder.release();
    assert.equal(await holder.exit, 0);
  }
  const after = await request(main, 'GET', `/v1/jobs/${firstJob.job_id}`, { key: FULL });
  assert.equal(after.status, 200, 'the slot is free again');
});

await r.test('a slow upload does not hold a slot (a slot is taken once the body is in)', async () => {
  const body = JSON.stringify(RECALL);
  let held;
  const slow = rawTls(main, 'POST /v1/scopes/team/recall HTTP/1.1\r\nHost: x\r\n' +
    `Authorization: Bearer ${FULL}\r\nContent-Type: application/json\r\nConnection: close\r\n` +
    `Content-Length: ${body.length}\r\n\r\n{`, { waitMs: 8000, onConnect: (s) => { held = s; } });
  await sleep(300);
  for (let i = 0; i < 5; i += 1) {
    const res = await request(main, 'GET', `/v1/jobs/${firstJob.job_id}`, { key: FULL });
    assert.equal(res.status, 200, res.text);
  }
  held.write(body.slice(1));
  const done = await slow;
  assert.match(done.data, /^HTTP\/1\.1 200 /, done.data.slice(0, 200));
});

await r.test('refused unread, connection closed: any Transfer-Encoding, Content-Encoding, two Content-Lengths, a GET with a body', async () => {
  const cases = [
    // Chunked, endless: answered at once, not read until memory runs out.
    ['POST /v1/scopes/team/recall HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n' +
      'Content-Type: application/json\r\n\r\n1000\r\n' + ' '.repeat(4096), 411, 'content_length_required'],
    ['DELETE /v1/jobs/x HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n10\r\n', 411, 'content_length_required'],
    ['POST /v1/scopes/team/ingest HTTP/1.1\r\nHost: x\r\nContent-Encoding: gzip\r\n' +
      'Content-Type: application/json\r\nContent-Length: 10\r\n\r\n', 415, 'unsupported_media_type'],
    ['POST /v1/scopes/team/recall HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nContent-Length: 40\r\n' +
      'Content-Type: application/json\r\n\r\n{}', 400, 'bad_request'],
    // A request hidden in the body of a GET or HEAD would be read as the next request.
    ['GET /v1/jobs/x HTTP/1.1\r\nHost: x\r\nContent-Length: 37\r\n\r\nGET /healthz HTTP/1.1\r\nHost: x\r\n\r\n', 400, 'bad_request'],
    // (A HEAD's answer has no body: its status says it.)
    ['HEAD /v1/jobs/x HTTP/1.1\r\nHost: x\r\nContent-Length: 37\r\n\r\nGET /healthz HTTP/1.1\r\nHost: x\r\n\r\n', 400, null],
    // A header folded onto the next line, a control character in a value, a bad request line.
    ['GET /healthz HTTP/1.1\r\nHost: x\r\nX-A: 1\r\n  folded\r\n\r\n', 400, 'bad_request'],
    ['GET /healthz HTTP/1.1\r\nHost: x\r\nX-A: a\x01b\r\n\r\n', 400, 'bad_request'],
    ['GET /healthz HTTP/2.0\r\nHost: x\r\n\r\n', 505, 'http_version_not_supported'],
    ['GET  /healthz HTTP/1.1\r\nHost: x\r\n\r\n', 400, 'bad_request'],
  ];
  for (const [text, status, code] of cases) {
    const res = await rawTls(main, text, { waitMs: 4000 });
    assert.match(res.data, new RegExp(`^HTTP/1\\.1 ${status} `), `${JSON.stringify(text.slice(0, 60))}: ${res.data.slice(0, 200)}`);
    if (code) assert.match(res.data, new RegExp(`"code":"${code}"`), res.data);
    assert.equal((res.data.match(/^HTTP\/1\.1 /gm) || []).length, 1, `one answer only: ${res.data}`);
    assert.match(res.data, /\r\nConnection: close\r\n/i);
    assert.equal(res.how, 'closed', `${JSON.stringify(text.slice(0, 60))}: the connection is closed`);
  }
  const after = await request(main, 'GET', '/healthz');
  assert.equal(after.status, 200);
});

/** Streams a request head that never ends; resolves with the bytes sent before the server closed. */
function endlessHead(srv, piece, limitBytes) {
  return new Promise((resolve) => {
    let sent = 0;
    let done = false;
    const finish = (how) => { if (!done) { done = true; s.destroy(); resolve({ sent, how }); } };
    const s = tls.connect({ host: '127.0.0.1', port: srv.port, ca: CA }, () => {
      s.write('GET /healthz HTTP/1.1\r\nHost: x\r\n');
      const pump = () => {
        while (!done) {
          if (sent > limitBytes) { finish('still open'); return; }
          sent += piece.length;
          if (!s.write(piece)) { s.once('drain', pump); return; }
        }
      };
      pump();
    });
    s.on('error', () => finish('closed'));
    s.on('close', () => finish('closed'));
    s.resume();
  });
}

await r.test('TLS: a request head past 64 KiB closes the connection (the library reads heads without bounds)', async () => {
  // What the client gets to write before it sees the reset is mostly its own and the kernel's
  // buffers; what matters is that the server stops reading (its memory does not grow).
  const rss = () => Number(/VmRSS:\s+(\d+)/.exec(fs.readFileSync(`/proc/${main.proc.pid}/status`, 'utf8'))[1]) * 1024;
  const before = rss();
  const line = await endlessHead(main, `X-Long: ${'a'.repeat(8192)}`, 64 << 20);
  assert.equal(line.how, 'closed', `an endless header line: ${line.sent} bytes sent`);
  let n = 0;
  const many = await endlessHead(main, Array.from({ length: 200 }, () => `X-H${n++}: v\r\n`).join(''), 64 << 20);
  assert.equal(many.how, 'closed', `endless header lines: ${many.sent} bytes sent`);
  assert.ok(rss() - before < (16 << 20), `tmcra-memd grew by ${rss() - before} bytes`);
  // A body sent in small TLS records (one per 40-byte write: the records' overhead counts
  // too) is read whole and answered.
  const body = JSON.stringify({ query: 'q'.repeat(400_000), max_windows: 8 });
  const small = await new Promise((resolve) => {
    let data = '';
    const t = tls.connect({ host: '127.0.0.1', port: main.port, ca: CA }, () => {
      t.write('POST /v1/scopes/team/recall HTTP/1.1\r\nHost: x\r\n' +
        `Authorization: Bearer ${FULL}\r\nContent-Type: application/json\r\nConnection: close\r\n` +
        `Content-Length: ${body.length}\r\n\r\n`);
      // Each write waits for the one before, so each goes out as a record of its own.
      const next = (i) => { if (i < body.length) t.write(body.slice(i, i + 40), () => next(i + 40)); };
      next(0);
    });
    t.on('data', (d) => { data += d; });
    t.on('error', (e) => resolve(`error ${e.code}`));
    t.on('close', () => resolve(data));
  });
  assert.match(small, /^HTTP\/1\.1 (200|422) /, String(small).slice(0, 200));
  // A large but bounded head (five 6 KB headers) is served, and so are keep-alive requests.
  const big = {};
  for (let i = 0; i < 5; i += 1) big[`X-Big-${i}`] = 'b'.repeat(6000);
  const ok = await request(main, 'GET', '/healthz', { headers: big });
  assert.equal(ok.status, 200, ok.text);
  const after = await request(main, 'GET', '/healthz');
  assert.equal(after.status, 200);
  // A connection serves up to 1,000 requests (at 100, every hundredth recall paid a new TLS
  // handshake): 150 requests, each sent once the previous answer is in, get 150 answers on one
  // connection.
  const kept = await new Promise((resolve) => {
    let data = '';
    let sent = 0;
    const next = (s) => {
      sent += 1;
      s.write(`GET /healthz HTTP/1.1\r\nHost: x\r\n${sent === 150 ? 'Connection: close\r\n' : ''}\r\n`);
    };
    const s = tls.connect({ host: '127.0.0.1', port: main.port, ca: CA }, () => next(s));
    s.on('data', (d) => {
      data += d;
      const answered = (data.match(/\{"status":"ok"\}/g) || []).length;
      if (answered === sent && sent < 150) next(s);
    });
    s.on('error', (e) => resolve({ data, how: `error ${e.code}` }));
    s.on('close', () => resolve({ data, how: 'closed' }));
  });
  assert.equal((kept.data.match(/HTTP\/1\.1 200 /g) || []).length, 150, kept.data.slice(-300));
  assert.equal(kept.how, 'closed');
});

await r.test('Expect: 100-continue over the body limit: 413 at once, connection closed', async () => {
  const res = await rawTls(main, 'POST /v1/scopes/team/ingest HTTP/1.1\r\nHost: x\r\n' +
    `Authorization: Bearer ${FULL}\r\nContent-Type: application/json\r\nContent-Length: 3000000\r\n` +
    'Expect: 100-continue\r\n\r\n', { waitMs: 4000 });
  assert.match(res.data, /^HTTP\/1\.1 413 /, res.data.slice(0, 200));
  assert.match(res.data, /"code":"request_too_large"/);
  assert.equal(res.how, 'closed');
  // Answered before routing, it still has one request id, in the header and the body.
  const header = /\r\nx-request-id: ([^\r]+)\r\n/i.exec(res.data);
  assert.ok(header, res.data.slice(0, 400));
  assert.match(res.data, new RegExp(`"request_id":"${header[1]}"`));
  // Within the limit, the client is told to go on and the request is served.
  const ok = await request(main, 'POST', '/v1/scopes/team/recall', { key: FULL, body: RECALL,
    headers: { Expect: '100-continue' } });
  assert.equal(ok.status, 200, ok.text);
});

await r.test('SIGTERM: exits 0', async () => {
  const exit = await stopMemd(main);
  assert.deepEqual(exit, { code: 0, signal: null });
  assert.match(main.stderr, /stopped: every request in progress was answered/);
});

// ---------------------------------------------------------------------------
// Shutdown without losing anything
// ---------------------------------------------------------------------------
/** serve's arguments for a server of its own on the main store. */
function tlsArgs() { return [...DATA.serveArgs(), '--tls-cert', CERT, '--tls-key', KEY]; }

await r.test('SIGTERM finishes a request in progress before exiting 0', async () => {
  const srv = await startMemd(tlsArgs());
  let held;
  const slow = rawTls(srv, 'POST /v1/scopes/team/recall HTTP/1.1\r\nHost: x\r\n' +
    `Authorization: Bearer ${FULL}\r\nContent-Type: application/json\r\nConnection: close\r\n` +
    `Content-Length: ${JSON.stringify(RECALL).length}\r\n\r\n{`, { waitMs: 8000, onConnect: (s) => { held = s; } });
  await sleep(300);
  srv.proc.kill('SIGTERM');
  await sleep(300);
  assert.equal(srv.exit, null, 'still running while a request is in progress');
  held.write(JSON.stringify(RECALL).slice(1));
  const done = await slow;
  assert.match(done.data, /^HTTP\/1\.1 200 /, done.data.slice(0, 200));
  // The whole answer: httplib writes no content-provider body once its listener is closed.
  const [head, answer] = done.data.split('\r\n\r\n');
  assert.equal(Buffer.byteLength(answer), Number(/content-length: (\d+)/i.exec(head)[1]), done.data.slice(0, 400));
  assert.ok(JSON.parse(answer).prompt_evidence, answer.slice(0, 200));
  const t0 = Date.now();
  const exit = await waitExit(srv);
  assert.deepEqual(exit, { code: 0, signal: null });
  assert.ok(Date.now() - t0 < 2000, `exited ${Date.now() - t0} ms after the last answer`);
});

await r.test('TLS: a client trickling its request head is closed at --head-timeout; others are served meanwhile', async () => {
  const srv = await startMemd([...tlsArgs(), '--threads', '1', '--head-timeout', '2']);
  const t0 = Date.now();
  let trickler;
  const trickled = new Promise((resolve) => {
    trickler = tls.connect({ host: '127.0.0.1', port: srv.port, ca: CA }, () => {
      trickler.write('GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: ');
      const timer = setInterval(() => trickler.write('a'), 500);  // well under the read timeout
      trickler.on('close', () => { clearInterval(timer); resolve(Date.now() - t0); });
    });
    trickler.on('error', () => {});
  });
  await sleep(300);
  // The trickler holds no thread: this request is answered at once.
  const other = await request(srv, 'GET', '/healthz');
  assert.equal(other.status, 200, other.text);
  const waited = Date.now() - t0;
  const resetAfter = await trickled;
  assert.ok(resetAfter >= 1500 && resetAfter < 6000, `trickler reset after ${resetAfter} ms`);
  assert.ok(waited < 1500, `the other request was answered after ${waited} ms`);
  assert.ok(await eventually(() => /closed 1 connection\(s\) that took too long to send a request \(head 2 s/.test(srv.stderr)), srv.stderr);
  // An idle keep-alive connection is not a trickler: its next request, 3 s after the answer
  // (past --head-timeout, inside the 5 s keep-alive), is served on the same connection.
  const kept = await new Promise((resolve) => {
    let data = '';
    const k = tls.connect({ host: '127.0.0.1', port: srv.port, ca: CA }, () => {
      k.write('GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n');
      setTimeout(() => k.write('GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n'), 3000);
    });
    k.on('data', (d) => { data += d; });
    k.on('error', (e) => resolve(`error ${e.code}: ${data}`));
    k.on('close', () => resolve(data));
  });
  assert.equal((kept.match(/HTTP\/1\.1 200 /g) || []).length, 2, kept.slice(0, 800));
  const exit = await stopMemd(srv);
  assert.deepEqual(exit, { code: 0, signal: null });
});

/** Polls `done` every 20 ms until it holds (true) or `ms` pass (false). */
async function eventually(done, ms = 10_000) {
  for (const end = Date.now() + ms; !done(); await sleep(20)) {
    if (Date.now() > end) return false;
  }
  return true;
}

/** Opens `n` TCP connections to the server, one after another, that send nothing. */
async function silentConnections(srv, n) {
  const sockets = [];
  for (let i = 0; i < n; i += 1) {
    sockets.push(await new Promise((resolve) => {
      const s = net.connect({ host: '127.0.0.1', port: srv.port }, () => resolve(s));
      s.on('error', () => resolve(s));
    }));
  }
  return sockets;
}

/** The server's open descriptors. */
const descriptors = (srv) => fs.readdirSync(`/proc/${srv.proc.pid}/fd`).length;

await r.test('a flood of silent connections: past --max-connections the one waiting longest for its head makes room; descriptors stay bounded', async () => {
  const srv = await startMemd([...tlsArgs(), '--max-connections', '8', '--max-connections-per-address', '0']);
  const before = descriptors(srv);
  const flood = await silentConnections(srv, 40);
  await sleep(300);  // time for the server to accept them all
  const grown = descriptors(srv) - before;
  assert.ok(grown <= 8 + 2, `${grown} more descriptors with 40 silent connections`);
  const t0 = Date.now();
  const res = await request(srv, 'GET', '/healthz');
  assert.equal(res.status, 200, res.text);
  assert.ok(Date.now() - t0 < 2000, `served ${Date.now() - t0} ms into the flood`);
  assert.ok(await eventually(() => /to make room for new ones \(--max-connections 8/.test(srv.stderr)), srv.stderr);
  for (const s of flood) s.destroy();
  const exit = await stopMemd(srv);
  assert.deepEqual(exit, { code: 0, signal: null });
});

/** Opens `n` TCP connections from `localAddress` that send nothing. */
async function silentFrom(srv, localAddress, n) {
  const sockets = [];
  for (let i = 0; i < n; i += 1) {
    sockets.push(await new Promise((resolve) => {
      const s = net.connect({ host: '127.0.0.1', port: srv.port, localAddress }, () => resolve(s));
      s.on('error', () => resolve(s));
    }));
  }
  return sockets;
}

await r.test('--max-connections-per-address: one address cannot hold more; another address is not affected', async () => {
  const srv = await startMemd([...tlsArgs(), '--max-connections-per-address', '4']);
  const before = descriptors(srv);
  const flood = await silentFrom(srv, '127.0.0.2', 20);
  await sleep(300);
  const grown = descriptors(srv) - before;
  assert.ok(grown <= 4 + 2, `${grown} more descriptors with 20 silent connections from one address`);
  const res = await request(srv, 'GET', '/healthz');  // from 127.0.0.1
  assert.equal(res.status, 200, res.text);
  for (const s of flood) s.destroy();
  const exit = await stopMemd(srv);
  assert.deepEqual(exit, { code: 0, signal: null });
});

await r.test('SIGTERM with silent connections held: exits 0 at once', async () => {
  const srv = await startMemd(tlsArgs());
  const flood = await silentConnections(srv, 6);
  const t0 = Date.now();
  srv.proc.kill('SIGTERM');
  const exit = await waitExit(srv);
  assert.deepEqual(exit, { code: 0, signal: null });
  assert.ok(Date.now() - t0 < 2000, `exited ${Date.now() - t0} ms after SIGTERM`);
  for (const s of flood) s.destroy();
});

await r.test('pipelined requests are answered in order, each once', async () => {
  const srv = await startMemd(tlsArgs());
  const ingest = JSON.stringify({ session_id: 'pipe', messages: [{ message_id: 'p1', role: 'user', content: 'pipelined fact', timestamp: '2026-07-15T00:00:00Z' }] });
  const text = 'GET /healthz HTTP/1.1\r\nHost: x\r\nX-Request-ID: first\r\n\r\n' +
    `POST /v1/scopes/team/ingest HTTP/1.1\r\nHost: x\r\nX-Request-ID: second\r\nAuthorization: Bearer ${FULL}\r\n` +
    `Idempotency-Key: pipelined-0001\r\nContent-Type: application/json\r\nContent-Length: ${ingest.length}\r\n\r\n${ingest}` +
    'GET /readyz HTTP/1.1\r\nHost: x\r\nX-Request-ID: third\r\nConnection: close\r\n\r\n';
  const res = await rawTls(srv, text, { waitMs: 5000 });
  const ids = [...res.data.matchAll(/\r\nx-request-id: ([^\r]+)\r\n/gi)].map((m) => m[1]);
  assert.deepEqual(ids, ['first', 'second', 'third'], res.data);
  const statuses = [...res.data.matchAll(/HTTP\/1\.1 (\d+) /g)].map((m) => Number(m[1]));
  assert.deepEqual(statuses, [200, 202, 200], res.data);
  assert.equal(res.how, 'closed');
  const exit = await stopMemd(srv);
  assert.deepEqual(exit, { code: 0, signal: null });
});

await r.test('request fields are escaped in the log: no CR, LF or ESC from a client reaches it', async () => {
  const srv = await startMemd(tlsArgs());
  await rawTls(srv, 'GE\x1b[31mT /healthz HTTP/1.1\r\nHost: x\r\n\r\n', { waitMs: 1500 });
  await rawTls(srv, 'GET /heal\x1b[2Jthz%0d%0aFORGED HTTP/1.1\r\nHost: x\r\n\r\n', { waitMs: 1500 });
  await rawTls(srv, 'GET /v1/jobs/x%1b%0d HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer \x1b[0m\r\nConnection: close\r\n\r\n', { waitMs: 1500 });
  const exit = await stopMemd(srv);
  assert.deepEqual(exit, { code: 0, signal: null });
  assert.ok(!srv.stderr.includes('\x1b'), `an ESC reached the log: ${JSON.stringify(srv.stderr.slice(-600))}`);
  assert.ok(!/\r/.test(srv.stderr), 'a CR reached the log');
  assert.ok(!/^FORGED/m.test(srv.stderr), 'a forged log line');
});

await r.test('while stopping, a new request gets a whole 503; a second SIGTERM exits at once', async () => {
  const srv = await startMemd(tlsArgs());
  const body = JSON.stringify(RECALL);
  let held;
  const slow = rawTls(srv, 'POST /v1/scopes/team/recall HTTP/1.1\r\nHost: x\r\n' +
    `Authorization: Bearer ${FULL}\r\nContent-Type: application/json\r\nConnection: close\r\n` +
    `Content-Length: ${body.length}\r\n\r\n{`, { waitMs: 8000, onConnect: (s) => { held = s; } });
  await sleep(300);
  srv.proc.kill('SIGTERM');
  await sleep(300);
  const late = await request(srv, 'POST', '/v1/scopes/team/recall', { key: FULL, body: RECALL });
  assertEnvelope(late, 503, 'unavailable');
  assert.equal(late.headers['retry-after'], '1');
  assert.equal(late.headers.connection, 'close');
  assert.equal(srv.exit, null, 'still draining');
  const t0 = Date.now();
  srv.proc.kill('SIGTERM');
  const exit = await waitExit(srv);
  assert.deepEqual(exit, { code: 1, signal: null });
  assert.ok(Date.now() - t0 < 2000, `exited ${Date.now() - t0} ms after the second signal`);
  held.destroy();
  await slow;
});

await r.test('an accepted job left queued at SIGTERM runs at the next start', async () => {
  const srv = await startMemd([...tlsArgs(), '--no-job-worker']);
  const content = 'Queued before shutdown: the cafeteria closes at three';
  const res = await request(srv, 'POST', '/v1/scopes/team/ingest', { key: FULL,
    body: ingestBody(content), headers: { 'Idempotency-Key': 'queued-key-0001' } });
  assert.equal(res.status, 202, res.text);
  const pending = await request(srv, 'GET', `/v1/jobs/${res.json.job_id}`, { key: FULL });
  assert.equal(pending.json.status, 'pending');
  assert.deepEqual(await stopMemd(srv), { code: 0, signal: null });
  const next = await startMemd(tlsArgs());
  const job = await waitJob(next, FULL, res.json.job_id);
  assert.equal(job.status, 'succeeded');
  const rec = await request(next, 'POST', '/v1/scopes/team/recall', { key: FULL,
    body: { query: 'cafeteria closes', max_windows: 8 } });
  assert.ok(rec.json.prompt_evidence.content.includes(content));
  assert.deepEqual(await stopMemd(next), { code: 0, signal: null });
});

await r.test('ingest then SIGTERM at once: exit 0, the job completes after a restart', async () => {
  const srv = await startMemd(tlsArgs());
  const content = 'Written just before a stop: the lab key is in drawer nine';
  const res = await request(srv, 'POST', '/v1/scopes/team/ingest', { key: FULL,
    body: ingestBody(content), headers: { 'Idempotency-Key': 'stop-key-00001' } });
  assert.equal(res.status, 202, res.text);
  assert.deepEqual(await stopMemd(srv), { code: 0, signal: null });
  const next = await startMemd(tlsArgs());
  assert.equal((await waitJob(next, FULL, res.json.job_id)).status, 'succeeded');
  const rec = await request(next, 'POST', '/v1/scopes/team/recall', { key: FULL,
    body: { query: 'lab key drawer', max_windows: 8 } });
  assert.ok(rec.json.prompt_evidence.content.includes(content));
  assert.deepEqual(await stopMemd(next), { code: 0, signal: null });
});

await r.test('--gzip auto (the default) and never: no gzip to a loopback peer unless it is a proxy; other values refused', async () => {
  const bad = await run(BIN, ['serve', ...tlsArgs(), '--gzip', 'sometimes'], { env: ENV });
  assert.equal(bad.code, 2);
  assert.match(bad.stderr, /--gzip must be auto, always or never/);
  for (const extra of [[], ['--gzip', 'auto'], ['--gzip', 'never']]) {
    const srv = await startMemd([...tlsArgs(), ...extra]);
    const rec = await request(srv, 'POST', '/v1/scopes/team/recall', { key: FULL,
      body: { query: 'lab key drawer', max_windows: 8 }, headers: { 'Accept-Encoding': 'gzip' } });
    assert.equal(rec.status, 200, rec.text);
    assert.ok(rec.raw.length >= 1024, `large enough to be gzipped under --gzip always: ${rec.text}`);
    assert.equal(rec.headers['content-encoding'], undefined, JSON.stringify(extra));
    assert.equal(Number(rec.headers['content-length']), rec.raw.length);
    // Through a proxy on the same host (it names the client it relays for): auto compresses.
    for (const header of [{ 'X-Forwarded-For': '203.0.113.7' }, { Forwarded: 'for=203.0.113.7' }]) {
      const proxied = await request(srv, 'POST', '/v1/scopes/team/recall', { key: FULL,
        body: { query: 'lab key drawer', max_windows: 8 }, headers: { 'Accept-Encoding': 'gzip', ...header } });
      assert.equal(proxied.status, 200, proxied.text);
      assert.equal(proxied.headers['content-encoding'], extra.includes('never') ? undefined : 'gzip',
        `${JSON.stringify(extra)} ${JSON.stringify(header)}`);
      assert.deepEqual({ ...proxied.json, query_id: '' }, { ...rec.json, query_id: '' });
    }
    assert.deepEqual(await stopMemd(srv), { code: 0, signal: null });
  }
});

await r.test('--postings-cache-mib: with the postings kept or not, the same answers; bad values refused', async () => {
  for (const value of ['x', '-1', '65537', '', '1.5']) {
    const bad = await run(BIN, ['serve', ...tlsArgs(), '--postings-cache-mib', value], { env: ENV });
    assert.equal(bad.code, 2, value);
    assert.match(bad.stderr, /--postings-cache-mib must be 0\.\.65536/);
  }
  const answers = [];
  for (const value of ['0', '1', '64']) {
    const srv = await startMemd([...tlsArgs(), '--postings-cache-mib', value]);
    const texts = [];
    for (let i = 0; i < 3; i++) {  // the first walks the words, the others find them kept
      const rec = await request(srv, 'POST', '/v1/scopes/team/recall', { key: FULL,
        body: { query: 'lab key drawer', max_windows: 8 } });
      assert.equal(rec.status, 200, rec.text);
      texts.push(rec.json.prompt_evidence.content);
    }
    assert.ok(texts[0].includes('drawer'), texts[0]);
    assert.deepEqual(texts, [texts[0], texts[0], texts[0]]);
    answers.push(texts[0]);
    assert.deepEqual(await stopMemd(srv), { code: 0, signal: null });
    // The stop logs the store's figures, the cache's among them when it keeps postings.
    const last = srv.stderr.split('\n').filter((l) => l.includes('memory store')).pop() ?? '';
    const figures = JSON.parse(last.slice(last.indexOf('{')));
    if (value === '0') {
      assert.equal(figures.postings_cache, undefined, last);
    } else {
      assert.ok(figures.postings_cache.hits >= 2, last);  // the second and third recalls
      assert.ok(figures.postings_cache.misses >= 1, last);
      assert.ok(figures.postings_cache.bytes > 0 && figures.postings_cache.bytes <= Number(value) << 20, last);
    }
  }
  assert.deepEqual(answers, [answers[0], answers[0], answers[0]]);
});

// ---------------------------------------------------------------------------
// --local
// ---------------------------------------------------------------------------
await testOnDataDir('--local: plain HTTP on 127.0.0.1, binding and identity files (0600 in 0700)', async () => {
  const root = path.join(TMP, 'local-root');
  const home = ENV.HOME;
  const srv = await startMemd(['--data-dir', root, '--local']);
  assert.match(srv.ready.listening, /^http:\/\/127\.0\.0\.1:\d+$/);
  const bindingPath = path.join(home, '.config', 'tmcra', 'local-memory.json');
  const identityPath = path.join(root, 'state', 'lite-cpu', 'secrets', 'client-plugin.json');
  assert.equal(srv.ready.binding, bindingPath);
  assert.equal(srv.ready.identity, identityPath);
  const bindingText = fs.readFileSync(bindingPath, 'utf8');
  assert.deepEqual(JSON.parse(bindingText), { schemaVersion: 1, mode: 'local', dataRoot: root, profile: 'lite-cpu' });
  const identity = JSON.parse(fs.readFileSync(identityPath, 'utf8'));
  assert.deepEqual(Object.keys(identity), ['schemaVersion', 'authMode', 'baseUrl', 'apiKey', 'tokenType',
    'scopeNamespace', 'globalScope', 'projectScopePrefix', 'timeoutMs', 'defaultScope', 'deploymentMode',
    'integrationIds']);
  assert.deepEqual({ ...identity, apiKey: '*' }, {
    schemaVersion: 2, authMode: 'api-key', baseUrl: `http://127.0.0.1:${srv.port}`, apiKey: '*',
    tokenType: 'Bearer', scopeNamespace: 'local', globalScope: 'local-global',
    projectScopePrefix: 'local-project', timeoutMs: 180000, defaultScope: 'personal',
    deploymentMode: 'local', integrationIds: {} });
  assert.match(identity.apiKey, /^tmcra_[0-9a-f]{24}\.[0-9a-f]{64}$/);
  assert.ok(!srv.stderr.includes(identity.apiKey.split('.')[1]), 'the key is never logged');
  assert.equal(mode(bindingPath), 0o600);
  assert.equal(mode(identityPath), 0o600);
  assert.equal(mode(path.dirname(identityPath)), 0o700);
  assert.equal(mode(path.join(home, '.config', 'tmcra')), 0o700);
  assert.equal(mode(root), 0o700);
  for (const dir of [path.dirname(identityPath), path.dirname(bindingPath)]) {
    assert.deepEqual(fs.readdirSync(dir).filter((f) => f.includes('.tmp')), [], 'no temporary file left');
  }
  const rec = await request(srv, 'POST', '/v1/scopes/personal/recall', { key: identity.apiKey, body: RECALL,
    headers: { 'X-TMCRA-Client-Platform': 'mcp' } });
  assert.equal(rec.status, 200, rec.text);
  assert.deepEqual(await stopMemd(srv), { code: 0, signal: null });

  // A restart keeps the key and, when it is free, the port: running MCP hosts keep working.
  const again = await startMemd(['--data-dir', root, '--local']);
  const identity2 = JSON.parse(fs.readFileSync(identityPath, 'utf8'));
  assert.equal(identity2.apiKey, identity.apiKey);
  assert.equal(again.port, srv.port);
  assert.deepEqual(await stopMemd(again), { code: 0, signal: null });

  // A revoked identity key is replaced.
  assert.equal((await keys({ keyArgs: ['--data-dir', root] }, 'revoke', identity.apiKey.slice(6, identity.apiKey.indexOf('.')))).code, 0);
  const third = await startMemd(['--data-dir', root, '--local']);
  const identity3 = JSON.parse(fs.readFileSync(identityPath, 'utf8'));
  assert.notEqual(identity3.apiKey, identity.apiKey);
  const ok = await request(third, 'POST', '/v1/scopes/personal/recall', { key: identity3.apiKey, body: RECALL });
  assert.equal(ok.status, 200, ok.text);
  assert.deepEqual(await stopMemd(third), { code: 0, signal: null });
});

await testOnDataDir('--local honours TMCRA_LOCAL_BINDING_FILE', async () => {
  const root = path.join(TMP, 'local-root-2');
  const binding = path.join(TMP, 'elsewhere', 'binding.json');
  const srv = await startMemd(['--data-dir', root, '--local', '--listen', '127.0.0.1:0'],
    { env: { ...ENV, TMCRA_LOCAL_BINDING_FILE: binding } });
  assert.equal(JSON.parse(fs.readFileSync(binding, 'utf8')).dataRoot, root);
  assert.equal(mode(binding), 0o600);
  assert.equal(mode(path.dirname(binding)), 0o700);
  assert.deepEqual(await stopMemd(srv), { code: 0, signal: null });
});

await r.finish();
