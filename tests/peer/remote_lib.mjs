// remote_lib.mjs — shared parts of the remote-mode peer tests (remote_*.mjs): a certificate
// authority made at test time with openssl, a real tmcra-memd over HTTPS on 127.0.0.1, and a
// fault proxy that sits between tmcra-mcp and tmcra-memd and misbehaves on purpose.
//
// Nothing private is committed: every key and certificate is generated into a temp directory.
// The memd binary comes from TMCRA_MEMD (CTest sets it), the store checker from TMCRA_STORE_CHECK.
import { spawn, spawnSync } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import https from 'node:https';
import path from 'node:path';
import readline from 'node:readline';
import tls from 'node:tls';

import { assert, serverEnv, tmpDir } from './lib.mjs';

export function memdBin() {
  const bin = process.env.TMCRA_MEMD;
  assert.ok(bin && fs.existsSync(bin), 'TMCRA_MEMD (the tmcra-memd binary) must be set; CTest sets it');
  return bin;
}

function openssl(args, cwd) {
  const out = spawnSync('openssl', args, { cwd, encoding: 'utf8' });
  if (out.status !== 0) throw new Error(`openssl ${args.join(' ')}: ${out.stderr}`);
}

/** A CA and a leaf for 127.0.0.1 signed by it: {dir, ca, cert, key}. */
export function makeCerts(dir = path.join(tmpDir(), 'pki')) {
  fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
  openssl(['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-days', '2', '-subj', '/CN=tmcra test CA',
    '-keyout', 'ca.key', '-out', 'ca.pem', '-addext', 'basicConstraints=critical,CA:TRUE',
    '-addext', 'keyUsage=critical,keyCertSign,cRLSign'], dir);
  openssl(['req', '-newkey', 'rsa:2048', '-nodes', '-subj', '/CN=127.0.0.1', '-keyout', 'leaf.key',
    '-out', 'leaf.csr'], dir);
  fs.writeFileSync(path.join(dir, 'leaf.ext'),
    'subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n');
  openssl(['x509', '-req', '-in', 'leaf.csr', '-CA', 'ca.pem', '-CAkey', 'ca.key', '-CAcreateserial',
    '-days', '2', '-extfile', 'leaf.ext', '-out', 'leaf.pem'], dir);
  return { dir, ca: path.join(dir, 'ca.pem'), cert: path.join(dir, 'leaf.pem'), key: path.join(dir, 'leaf.key') };
}

/**
 * The test CA, for a script that talks to memd with node's fetch, which trusts a CA only through
 * NODE_EXTRA_CA_CERTS, read when node starts: the first call makes the CA and runs the script
 * again with it set (and exits with that run's status); in that run it returns the certificates.
 */
export function withTestCa() {
  if (!process.env.TMCRA_TEST_PKI) {
    const certs = makeCerts();
    const child = spawnSync(process.execPath, process.argv.slice(1), {
      stdio: 'inherit',
      env: { ...process.env, NODE_EXTRA_CA_CERTS: certs.ca, TMCRA_TEST_PKI: certs.dir },
    });
    process.exit(child.status ?? 1);
  }
  const dir = process.env.TMCRA_TEST_PKI;
  return { dir, ca: path.join(dir, 'ca.pem'), cert: path.join(dir, 'leaf.pem'), key: path.join(dir, 'leaf.key') };
}

/** `tmcra-memd keys create`: the new key (printed once on stdout). */
export function createKey(dataDir, permissions = 'memory:read,memory:write,memory:feedback') {
  const out = spawnSync(memdBin(), ['keys', 'create', '--data-dir', dataDir, '--permissions', permissions],
    { encoding: 'utf8' });
  assert.equal(out.status, 0, `tmcra-memd keys create failed: ${out.stderr}`);
  const key = out.stdout.trim().split('\n').pop().trim();
  assert.match(key, /^tmcra_[A-Za-z0-9]+\.[A-Za-z0-9_-]+$/, 'keys create prints a tmcra_<id>.<secret> key');
  return key;
}

/**
 * Starts `tmcra-memd serve` and waits for its readiness line ({"listening": url}).
 * Returns {url, proc, stderr(), stop(signal)}; stop resolves with the exit {code, signal}.
 */
export async function startMemd({ dataDir, certs, args = [], env = {}, local = false, port = 0 }) {
  const argv = ['serve', '--data-dir', dataDir, '--listen', `127.0.0.1:${port}`, ...args];
  if (local) argv.push('--local');
  else argv.push('--tls-cert', certs.cert, '--tls-key', certs.key);
  const proc = spawn(memdBin(), argv, { env: { ...serverEnv(), ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  let err = '';
  proc.stderr.on('data', (d) => { err += d; if (err.length > 200_000) err = err.slice(-100_000); });
  const exited = new Promise((resolve) => proc.on('exit', (code, signal) => resolve({ code, signal })));
  const url = await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`tmcra-memd not ready in 20 s:\n${err}`)), 20_000);
    const rl = readline.createInterface({ input: proc.stdout });
    rl.on('line', (line) => {
      try {
        const m = JSON.parse(line);
        if (m.listening) { clearTimeout(timer); resolve(m.listening); }
      } catch { /* not the readiness line */ }
    });
    exited.then((x) => { clearTimeout(timer); reject(new Error(`tmcra-memd exited ${JSON.stringify(x)}:\n${err}`)); });
  });
  return {
    url, port: Number(new URL(url).port), proc, exited,
    stderr: () => err,
    async stop(signal = 'SIGTERM') {
      if (proc.exitCode === null && proc.signalCode === null) proc.kill(signal);
      return exited;
    },
  };
}

/** What tmcra-store-check reports of a data directory (memory.db and outbox.sqlite3). */
export function storeCheck(dataDir) {
  const tool = process.env.TMCRA_STORE_CHECK;
  assert.ok(tool, 'TMCRA_STORE_CHECK must be set; CTest sets it');
  const out = spawnSync(tool, [dataDir], { encoding: 'utf8' });
  assert.equal(out.status, 0, `tmcra-store-check failed: ${out.stderr}`);
  return JSON.parse(out.stdout);
}

/** The environment of a tmcra-mcp that talks to `url` with `key`, trusting `ca`. */
export function remoteEnv({ url, key, ca, extra = {} }) {
  return serverEnv({
    TMCRA_API_KEY: key,
    TMCRA_BASE_URL: url,
    TMCRA_DEFAULT_SCOPE: 'team',
    SSL_CERT_FILE: ca,
    TMCRA_MAX_ATTEMPTS: '2',
    TMCRA_REQUEST_TIMEOUT_SECONDS: '5',
    ...extra,
  });
}

const sha256 = (b) => crypto.createHash('sha256').update(b).digest('hex');

/**
 * A TLS proxy in front of tmcra-memd that can misbehave on each request.
 *
 * plan(req) is called once per request with {n, method, path, headers, body, key} (key = the
 * Idempotency-Key) and returns one of:
 *   'pass'                        forward, answer with the upstream answer
 *   {status, headers, body}       answer this without forwarding (the write never happens)
 *   'drop-before'                 close the connection without forwarding
 *   'drop-after'                  forward (the write happens), then reset the connection
 *   'truncate-after'              forward, then send the headers and half the body, and close
 *   {forward: true, status, headers, body, rewrite}   forward (the write happens), then answer
 *                                 this instead; rewrite(job) edits each job of the real answer
 *   {stall: ms}                   say nothing for ms, then close
 * Every request is recorded in `ledger` (n, method, path, key, bodySha, authorization seen,
 * action) so a test can prove what the server received.
 */
export class FaultProxy {
  constructor({ upstream, certs, plan = () => 'pass' }) {
    this.upstream = new URL(upstream);
    this.ca = fs.readFileSync(certs.ca);
    this.plan = plan;
    this.ledger = [];
    this.connections = 0;
    this.agent = new https.Agent({ keepAlive: true, ca: this.ca, maxSockets: 16 });
    this.server = https.createServer({ cert: fs.readFileSync(certs.cert), key: fs.readFileSync(certs.key) },
      (req, res) => this.handle(req, res));
    this.server.on('connection', () => { this.connections += 1; });
    this.server.keepAliveTimeout = 30_000;
  }

  async listen() {
    await new Promise((resolve) => this.server.listen(0, '127.0.0.1', resolve));
    this.url = `https://127.0.0.1:${this.server.address().port}`;
    return this.url;
  }

  async close() {
    this.server.closeAllConnections?.();
    await new Promise((resolve) => this.server.close(resolve));
    this.agent.destroy();
  }

  forward(req, body) {
    return new Promise((resolve, reject) => {
      const headers = { ...req.headers, host: this.upstream.host };
      delete headers['accept-encoding'];  // the proxy reads the body as it is
      const up = https.request({
        host: this.upstream.hostname, port: this.upstream.port, method: req.method, path: req.url,
        headers, agent: this.agent,
      }, (r) => {
        const chunks = [];
        r.on('data', (c) => chunks.push(c));
        r.on('end', () => resolve({ status: r.statusCode, headers: r.headers, body: Buffer.concat(chunks) }));
        r.on('error', reject);
      });
      up.on('error', reject);
      up.end(body);
    });
  }

  async handle(req, res) {
    const chunks = [];
    for await (const c of req) chunks.push(c);
    const body = Buffer.concat(chunks);
    const n = this.ledger.length + 1;
    const info = {
      n, method: req.method, path: req.url, headers: req.headers, body,
      key: req.headers['idempotency-key'] ?? null,
    };
    let action;
    try { action = this.plan(info) ?? 'pass'; } catch (e) { action = { status: 500, body: String(e) }; }
    this.ledger.push({
      n, method: req.method, path: req.url, key: info.key, bodySha: sha256(body),
      authorization: req.headers.authorization ?? null,
      action: typeof action === 'string' ? action : JSON.stringify({ ...action, body: undefined }),
    });
    const sock = req.socket;
    const answer = (status, headers, payload) => {
      const b = Buffer.isBuffer(payload) ? payload : Buffer.from(payload ?? '');
      res.writeHead(status, { 'content-type': 'application/json', 'content-length': b.length, ...headers });
      res.end(b);
    };
    try {
      if (action === 'drop-before') { sock.destroy(); return; }
      if (action && typeof action === 'object' && action.stall) {
        setTimeout(() => sock.destroy(), action.stall);
        return;
      }
      if (action && typeof action === 'object' && !action.forward) {
        answer(action.status, action.headers ?? {}, action.body ?? '');
        return;
      }
      const up = await this.forward(req, body);
      const entry = this.ledger[n - 1];
      entry.upstreamStatus = up.status;
      if (up.status >= 400) {
        try { entry.upstreamCode = JSON.parse(up.body.toString('utf8')).error?.code ?? null; } catch { /* not JSON */ }
      }
      if (action === 'drop-after') { sock.resetAndDestroy ? sock.resetAndDestroy() : sock.destroy(); return; }
      if (action === 'truncate-after') {
        res.writeHead(up.status, { 'content-type': 'application/json', 'content-length': up.body.length });
        res.write(up.body.subarray(0, Math.floor(up.body.length / 2)));
        setTimeout(() => sock.destroy(), 20);
        return;
      }
      if (action && typeof action === 'object' && action.forward) {
        let payload = action.body ?? up.body;
        if (action.rewrite && up.status < 300) {
          const doc = JSON.parse(up.body.toString('utf8'));
          for (const job of Array.isArray(doc.jobs) ? doc.jobs : [doc]) action.rewrite(job);
          payload = JSON.stringify(doc);
        }
        answer(action.status ?? up.status, action.headers ?? {}, payload);
        return;
      }
      const h = { ...up.headers };
      delete h['content-length']; delete h['transfer-encoding']; delete h.connection; delete h['keep-alive'];
      answer(up.status, h, up.body);
    } catch (e) {
      if (!res.headersSent) answer(502, {}, JSON.stringify({ error: { code: 'proxy', message: String(e) } }));
      else sock.destroy();
    }
  }
}

/** A raw TLS listener that counts connections and never answers (a redirect target). */
export async function countingListener(certs) {
  let connections = 0;
  const server = tls.createServer({ cert: fs.readFileSync(certs.cert), key: fs.readFileSync(certs.key) },
    (s) => { connections += 1; s.destroy(); });
  server.on('connection', () => { connections += 1; });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `https://127.0.0.1:${server.address().port}`,
    connections: () => connections,
    close: () => new Promise((resolve) => server.close(resolve)),
  };
}

/**
 * The secret canary sweep (docs/reliability.md §5, row S1): the secret part of `key`, or any 8
 * characters of it, must not appear in any file under `dirs` (outbox, its -wal/-shm, control
 * state, logs, memd's data) nor in `texts` (stderr, tool answers, errors). Returns the places
 * it was found (empty when clean).
 *
 * The secret is 64 random hex digits and the files are full of other hex (idempotency keys,
 * hashes, ids), so 8 of its digits turn up inside an unrelated hex string by chance: a run of
 * 32 bits against hundreds of thousands of windows (CI saw it once). A match therefore counts
 * when it stands alone (no hex digit either side of the longest run it belongs to, as a cut or
 * masked key would), or when that run is 16 digits or more, which chance does not give.
 */
export function findSecret(key, { dirs = [], files = [], texts = [] }) {
  const secret = key.includes('.') ? key.split('.').slice(1).join('.') : key;
  const isHex = (c) => c !== undefined && /[0-9a-fA-F]/.test(c);
  const hits = [];
  const scan = (label, buf) => {
    const text = buf.toString('latin1');
    if (text.includes(secret)) { hits.push(`${label} holds the secret`); return; }
    for (let i = 0; i + 8 <= secret.length; i += 1) {
      for (let at = text.indexOf(secret.slice(i, i + 8)); at !== -1;
        at = text.indexOf(secret.slice(i, i + 8), at + 1)) {
        let from = at;
        let to = at + 8;
        let s = i;
        let e = i + 8;
        while (s > 0 && from > 0 && text[from - 1] === secret[s - 1]) { s -= 1; from -= 1; }
        while (e < secret.length && to < text.length && text[to] === secret[e]) { e += 1; to += 1; }
        const alone = !isHex(text[from - 1]) && !isHex(text[to]);
        if (alone || to - from >= 16) {
          hits.push(`${label} holds ${to - from} characters of the secret ` +
            `(${JSON.stringify(text.slice(Math.max(0, from - 16), to + 16))})`);
          return;
        }
      }
    }
  };
  const seen = new Set();
  const walk = (p) => {
    let st;
    try { st = fs.lstatSync(p); } catch { return; }
    if (st.isDirectory()) { for (const e of fs.readdirSync(p)) walk(path.join(p, e)); return; }
    if (!st.isFile() || seen.has(`${st.dev}:${st.ino}`)) return;
    seen.add(`${st.dev}:${st.ino}`);
    scan(p, fs.readFileSync(p));
  };
  for (const d of dirs) walk(d);
  for (const f of files) walk(f);
  texts.forEach((t, i) => scan(`text #${i}`, Buffer.from(String(t))));
  return hits;
}
