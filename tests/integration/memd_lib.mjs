// memd_lib.mjs — helpers to run the real tmcra-memd over TLS on 127.0.0.1 from node, shared by
// the memd tests in tests/integration/ and the benchmark bench/memd_slow_clients.mjs:
// a test-time certificate, keys, starting and stopping the server, one HTTPS request, slow
// clients that trickle bytes and reconnect when the server closes them, and fresh databases on
// the suite's PostgreSQL cluster.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import https from 'node:https';
import net from 'node:net';
import path from 'node:path';
import tls from 'node:tls';

import { run, sleep } from '../peer/lib.mjs';

/** Makes a self-signed certificate for IP:127.0.0.1 in `dir`: {cert, key, ca}. */
export async function makeCertificate(dir) {
  const cert = path.join(dir, 'cert.pem');
  const key = path.join(dir, 'key.pem');
  const res = await run('openssl', ['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', key,
    '-out', cert, '-days', '1', '-subj', '/CN=127.0.0.1', '-addext', 'subjectAltName=IP:127.0.0.1']);
  if (res.code !== 0) throw new Error(`openssl: ${res.stderr}`);
  fs.chmodSync(key, 0o600);
  return { cert, key, ca: fs.readFileSync(cert) };
}

/** `tmcra-memd keys create --data-dir DIR ...args`: the new key. */
export async function createKey(bin, dataDir, env, ...args) {
  const res = await run(bin, ['keys', 'create', '--data-dir', dataDir, ...args], { env });
  if (res.code !== 0) throw new Error(`keys create: ${res.stderr}`);
  return res.stdout.trim();
}

/**
 * Starts `[...prefix, bin, 'serve', ...args]` (prefix: e.g. a namespace wrapper); resolves
 * once the readiness line is printed: {proc, port, stderr, exited, exit}.
 */
export function startMemd(bin, args, { env, prefix = [] } = {}) {
  return new Promise((resolve, reject) => {
    const argv = [...prefix, bin, 'serve', ...args];
    const proc = spawn(argv[0], argv.slice(1), { env, stdio: ['ignore', 'pipe', 'pipe'] });
    const srv = { proc, stderr: '', exit: null };
    srv.exited = new Promise((res) => proc.on('exit', (code, signal) => {
      srv.exit = { code, signal };
      res(srv.exit);
    }));
    proc.stderr.on('data', (d) => { srv.stderr += d; });
    let line = '';
    const timer = setTimeout(() => reject(new Error(`no readiness line in 15 s\n${srv.stderr}`)), 15_000);
    proc.stdout.on('data', (d) => {
      line += d;
      const nl = line.indexOf('\n');
      if (nl >= 0 && !srv.port) {
        clearTimeout(timer);
        srv.port = Number(new URL(JSON.parse(line.slice(0, nl)).listening).port);
        resolve(srv);
      }
    });
    srv.exited.then((e) => {
      clearTimeout(timer);
      if (!srv.port) reject(new Error(`tmcra-memd exited ${JSON.stringify(e)} before ready\n${srv.stderr}`));
    });
  });
}

/** SIGTERM, then the exit (SIGKILL after 15 s). */
export async function stopMemd(srv) {
  if (srv.exit) return srv.exit;
  srv.proc.kill('SIGTERM');
  const exit = await Promise.race([srv.exited, sleep(15_000).then(() => null)]);
  if (exit) return exit;
  srv.proc.kill('SIGKILL');
  return srv.exited;
}

/**
 * One HTTPS request: {status, headers, text, json, ms}. `agent` false: a new connection;
 * `timeoutMs` bounds the whole request (status 0 and `error` on a time-out or failure).
 */
export function request(port, ca, method, urlPath, { key, body, headers = {}, agent = false, timeoutMs = 30_000 } = {}) {
  return new Promise((resolve) => {
    const t0 = process.hrtime.bigint();
    const h = { ...headers };
    if (key) h.Authorization = `Bearer ${key}`;
    let payload;
    if (body !== undefined) {
      payload = Buffer.from(JSON.stringify(body));
      h['Content-Type'] = 'application/json';
      h['Content-Length'] = payload.length;
    }
    let done = false;
    const finish = (out) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      resolve({ ...out, ms: Number(process.hrtime.bigint() - t0) / 1e6 });
    };
    const req = https.request({ host: '127.0.0.1', port, method, path: urlPath, headers: h, agent, ca }, (res) => {
      const chunks = [];
      res.on('data', (c) => chunks.push(c));
      res.on('end', () => {
        const text = Buffer.concat(chunks).toString('utf8');
        let json;
        try { json = JSON.parse(text); } catch { json = undefined; }
        finish({ status: res.statusCode, headers: res.headers, text, json });
      });
      res.on('error', (e) => finish({ status: 0, error: e.message }));
    });
    const timer = setTimeout(() => { req.destroy(); finish({ status: 0, error: 'timed out' }); }, timeoutMs);
    req.on('error', (e) => finish({ status: 0, error: e.message }));
    if (payload) req.write(payload);
    req.end();
  });
}

/**
 * `count` slow clients spread over `addresses` (127.x.y.z source addresses): half trickle a
 * TLS handshake (raw bytes, a byte every `byteMs`), half finish the handshake and trickle a
 * request head. Each reconnects at once when the server closes it. Bounded: stop() ends them
 * all. Returns {stop, stats: {connects, closes, open}}.
 */
export function slowClients({ port, ca, count, addresses, byteMs = 1000 }) {
  const stats = { connects: 0, closes: 0, open: 0 };
  const sockets = new Set();
  let stopped = false;
  const start = (i) => {
    if (stopped) return;
    const localAddress = addresses[i % addresses.length];
    const handshakeOnly = i % 2 === 0;
    let timer;
    const opened = (s, first) => {
      stats.connects += 1;
      stats.open += 1;
      s.counted = true;
      let n = 0;
      const trickle = () => {
        if (stopped || s.destroyed) return;
        s.write(n === 0 ? first : 'a');
        n += 1;
        timer = setTimeout(trickle, byteMs);
      };
      trickle();
    };
    const s = handshakeOnly
      ? net.connect({ host: '127.0.0.1', port, localAddress }, () => opened(s, '\x16'))
      : tls.connect({ host: '127.0.0.1', port, localAddress, ca }, () => opened(s, 'GET /healthz HTTP/1.1\r\nX-Slow: '));
    sockets.add(s);
    let closed = false;
    const onClose = () => {
      if (closed) return;
      closed = true;
      clearTimeout(timer);
      sockets.delete(s);
      if (s.counted) stats.open -= 1;
      stats.closes += 1;
      if (!stopped) setTimeout(() => start(i), 10);
    };
    s.on('error', onClose);
    s.on('close', onClose);
  };
  for (let i = 0; i < count; i += 1) start(i);
  return {
    stats,
    stop() {
      stopped = true;
      for (const s of sockets) s.destroy();
      sockets.clear();
    },
  };
}

/** Loopback source addresses 127.0.0.2 .. 127.0.0.(n+1). */
export function loopbackAddresses(n) {
  return Array.from({ length: n }, (_, i) => `127.0.0.${i + 2}`);
}

/**
 * The suite's PostgreSQL cluster (tests/support/pg_cluster.sh), from the directory CTest's
 * fixture `postgres` names in TMCRA_PG_DIR: its port, password file and password.
 */
export function pgCluster(dir) {
  const settings = Object.fromEntries(fs.readFileSync(path.join(dir, 'env'), 'utf8').trim()
    .split('\n').map((line) => line.split('=')));
  const passwordFile = settings.TMCRA_PG_PASSWORD_FILE;
  return { port: settings.TMCRA_PG_PORT, passwordFile,
    password: fs.readFileSync(passwordFile, 'utf8').trim() };
}

/**
 * A fresh database on `cluster` for one test, dropped by the runner's cleanups: its URI (no
 * password in it).
 */
export async function freshDatabase(cluster, runner, label, env) {
  const name = `memd_${label}_${process.pid}_${Date.now() % 100000}`.replace(/[^a-z0-9_]/g, '_');
  const psql = (sql) => run('psql', ['-h', '127.0.0.1', '-p', cluster.port, '-U', 'tmcra',
    '-d', 'postgres', '-v', 'ON_ERROR_STOP=1', '-c', sql],
  { env: { ...env, PGPASSWORD: cluster.password } });
  const res = await psql(`CREATE DATABASE ${name}`);
  if (res.code !== 0) throw new Error(`createdb: ${res.stderr}`);
  runner.cleanups.push(() => psql(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`));
  return `postgresql://tmcra@127.0.0.1:${cluster.port}/${name}`;
}
