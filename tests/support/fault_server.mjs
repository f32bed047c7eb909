#!/usr/bin/env node
// A misbehaving HTTP/1.1 server for the HTTP client tests (tests/integration/http_client_test.cc).
//
// It speaks HTTP/1.1 by hand on raw sockets, so every byte and every fault is under the test's
// control. Certificates are made at start with `openssl` in a private temporary directory:
// a CA, a leaf for 127.0.0.1/localhost, an expired leaf, a leaf for another host, and a second
// CA that signed nothing of ours (to play "untrusted").
//
// Listeners (all on 127.0.0.1, ephemeral ports):
//   tls        HTTPS with the good leaf            (the scripted server)
//   expired    HTTPS with the expired leaf         (scripted the same way)
//   wronghost  HTTPS with the other-host leaf      (scripted the same way)
//   plain      HTTP                                (scripted the same way; local mode)
//   target     a TCP listener that only counts connections (redirect targets)
//   proxy      an HTTP CONNECT proxy that logs what it sees and tunnels
//
// Control: one JSON command per stdin line, one JSON answer per stdout line (nothing else is
// ever written to stdout). The first stdout line is
//   {"ready":true,"ports":{...},"ca":"<path>","other_ca":"<path>","dir":"<path>"}.
// Commands (an "id" field is echoed back):
//   {"cmd":"script","listener":"tls","actions":[ACTION,...]}  queue actions, one per request
//   {"cmd":"default","listener":"tls","action":ACTION}       used when the queue is empty
//   {"cmd":"ledger"}   -> {"requests":[{listener, conn, method, target, headers:[[n,v]...],
//                          has_authorization, body_sha256, body_len, body}]}
//   {"cmd":"stats"}    -> {"connections":{listener:{tcp, tls}}, "proxy":[{line, headers}]}
//   {"cmd":"reset"}    clears scripts, ledger and counters
//   {"cmd":"close","listener":"tls"}  stops listening (new connections are refused)
// ACTION fields (all optional):
//   status (default 200), reason, headers [[name, value], ...] (duplicates allowed) or {...},
//   body (string) | json (any, stringified) | body_b64 | body_hex, repeat (body repeated n times),
//   gzip (compress, adds Content-Encoding), framing "length" (default) | "chunked" | "close",
//   content_length (announce this instead of the real length), close (Connection: close),
//   raw (a latin1 string written instead of an answer, then the connection is closed),
//   delay_ms (before answering), drip_ms (with fault "drip"), truncate_at (bytes),
//   fault: "reset_before_head" | "close_before_head" | "stall" | "reset_after_head" |
//          "reset_mid_body" | "reset_after_body" | "truncate" | "drip" | "endless"
// The server exits when stdin closes, removing its directory.
import { execFileSync } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import readline from 'node:readline';
import tls from 'node:tls';
import zlib from 'node:zlib';

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tmcra-fault-'));

function openssl(args) {
  execFileSync('openssl', args, { cwd: dir, stdio: ['ignore', 'ignore', 'pipe'] });
}

function makeCa(name) {
  openssl(['req', '-x509', '-new', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1',
    '-nodes', '-keyout', `${name}.key`, '-out', `${name}.pem`, '-days', '2',
    '-subj', `/CN=tmcra test ${name}`,
    '-addext', 'basicConstraints=critical,CA:TRUE',
    '-addext', 'keyUsage=critical,keyCertSign,cRLSign']);
}

function makeLeaf(name, ca, san, days) {
  fs.writeFileSync(path.join(dir, `${name}.ext`),
    `subjectAltName=${san}\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n`);
  openssl(['req', '-new', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes',
    '-keyout', `${name}.key`, '-out', `${name}.csr`, '-subj', `/CN=${name}`]);
  // A negative -days gives notAfter = now - n days: an expired certificate.
  openssl(['x509', '-req', '-in', `${name}.csr`, '-CA', `${ca}.pem`, '-CAkey', `${ca}.key`,
    '-CAcreateserial', '-out', `${name}.pem`, '-days', String(days), '-extfile', `${name}.ext`]);
  return {
    key: fs.readFileSync(path.join(dir, `${name}.key`)),
    cert: fs.readFileSync(path.join(dir, `${name}.pem`)),
  };
}

makeCa('ca');
makeCa('other_ca');
const good = makeLeaf('leaf', 'ca', 'IP:127.0.0.1,DNS:localhost', 2);
const expired = makeLeaf('expired', 'ca', 'IP:127.0.0.1,DNS:localhost', -1);
const wronghost = makeLeaf('wronghost', 'ca', 'DNS:wrong.example.invalid', 2);

// ------------------------------------------------------------------------------------------
// State

const scripts = {};
const defaults = {};
let ledger = [];
let proxyLog = [];
const counters = {};
let connSeq = 0;
const openSockets = new Set();

function counter(name) {
  counters[name] ??= { tcp: 0, tls: 0 };
  return counters[name];
}

function nextAction(listener) {
  const queue = scripts[listener];
  if (queue && queue.length > 0) return queue.shift();
  return defaults[listener] ?? { status: 200, json: { ok: true } };
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

function send(obj) {
  process.stdout.write(`${JSON.stringify(obj)}\n`);
}

// ------------------------------------------------------------------------------------------
// HTTP/1.1 by hand

const REASONS = {
  200: 'OK', 201: 'Created', 202: 'Accepted', 204: 'No Content', 301: 'Moved Permanently',
  302: 'Found', 307: 'Temporary Redirect', 308: 'Permanent Redirect', 400: 'Bad Request',
  401: 'Unauthorized', 403: 'Forbidden', 404: 'Not Found', 405: 'Method Not Allowed',
  408: 'Request Timeout', 409: 'Conflict', 410: 'Gone', 411: 'Length Required',
  413: 'Content Too Large', 422: 'Unprocessable Content', 425: 'Too Early',
  429: 'Too Many Requests', 500: 'Internal Server Error', 501: 'Not Implemented',
  502: 'Bad Gateway', 503: 'Service Unavailable', 504: 'Gateway Timeout',
};

function reset(raw) {
  // An RST, not a FIN: resetAndDestroy works on the TCP socket under a TLS one.
  try {
    raw.resetAndDestroy();
  } catch {
    raw.destroy();
  }
}

function alive(sock) {
  return !sock.destroyed && sock.writable;
}

function bodyOf(a) {
  let body;
  if (a.body_b64 !== undefined) body = Buffer.from(a.body_b64, 'base64');
  else if (a.body_hex !== undefined) body = Buffer.from(a.body_hex, 'hex');
  else if (a.json !== undefined) body = Buffer.from(JSON.stringify(a.json));
  else body = Buffer.from(a.body ?? '', 'utf8');
  if (a.repeat) body = Buffer.concat(Array(a.repeat).fill(body));
  if (a.gzip) body = zlib.gzipSync(body);
  return body;
}

async function perform(a, sock, raw) {
  if (a.delay_ms) await sleep(a.delay_ms);
  if (!alive(sock)) return false;
  if (a.raw !== undefined) {  // bytes instead of an HTTP answer, then FIN
    sock.end(Buffer.from(a.raw, 'latin1'));
    return false;
  }
  switch (a.fault) {
    case 'reset_before_head': reset(raw); return false;
    case 'close_before_head': sock.end(); return false;
    case 'stall': return false;  // never answers; the client gives up
    default: break;
  }
  const status = a.status ?? 200;
  const body = bodyOf(a);
  const framing = a.framing ?? 'length';
  let head = `HTTP/1.1 ${status} ${a.reason ?? REASONS[status] ?? 'Status'}\r\n`;
  // [[name, value], ...] (duplicates allowed) or {name: value}.
  const headers = Array.isArray(a.headers) ? a.headers : Object.entries(a.headers ?? {});
  for (const [name, value] of headers) head += `${name}: ${value}\r\n`;
  if (a.gzip) head += 'Content-Encoding: gzip\r\n';
  if (a.fault === 'endless' || framing === 'chunked') {
    head += 'Transfer-Encoding: chunked\r\n';
  } else if (framing === 'length') {
    head += `Content-Length: ${a.content_length ?? body.length}\r\n`;
  }
  const closing = a.close || framing === 'close';
  if (closing) head += 'Connection: close\r\n';
  head += '\r\n';
  sock.write(head);

  switch (a.fault) {
    case 'reset_after_head': await sleep(20); reset(raw); return false;
    case 'reset_mid_body':
      sock.write(body.subarray(0, Math.floor(body.length / 2)));
      await sleep(20);
      reset(raw);
      return false;
    case 'truncate':
      sock.write(body.subarray(0, a.truncate_at ?? Math.floor(body.length / 2)));
      sock.end();
      return false;
    case 'drip':
      for (let i = 0; i < body.length && alive(sock); ++i) {
        sock.write(body.subarray(i, i + 1));
        await sleep(a.drip_ms ?? 1000);
      }
      return alive(sock) && !closing;
    case 'endless': {
      const chunk = Buffer.alloc(64 * 1024, 0x20);
      const framed = Buffer.concat([Buffer.from(`${chunk.length.toString(16)}\r\n`), chunk,
        Buffer.from('\r\n')]);
      sock.write(Buffer.from(`1\r\n{\r\n`));
      while (alive(sock)) {
        if (!sock.write(framed)) {
          await new Promise((resolve) => {
            sock.once('drain', resolve);
            sock.once('close', resolve);
          });
        }
      }
      return false;
    }
    default: break;
  }
  if (framing === 'chunked') {
    if (body.length > 0) sock.write(`${body.length.toString(16)}\r\n`);
    if (body.length > 0) sock.write(body);
    if (body.length > 0) sock.write('\r\n');
    sock.write('0\r\n\r\n');
  } else {
    sock.write(body);
  }
  if (a.fault === 'reset_after_body') {
    await sleep(100);
    reset(raw);
    return false;
  }
  if (closing) {
    sock.end();
    return false;
  }
  return true;
}

// Reads requests off `sock` (the TLS socket, or the TCP one for plain HTTP); `raw` is the TCP
// socket underneath, for resets.
function serveHttp(listener, sock, raw) {
  const conn = ++connSeq;
  let buf = Buffer.alloc(0);
  let busy = false;
  sock.on('error', () => {});
  raw.on('error', () => {});

  const pump = async () => {
    while (!busy) {
      const end = buf.indexOf('\r\n\r\n');
      if (end < 0) {
        if (buf.length > 1024 * 1024) sock.destroy();
        return;
      }
      const lines = buf.subarray(0, end).toString('latin1').split('\r\n');
      const [method, target] = lines[0].split(' ');
      const headers = [];
      for (const line of lines.slice(1)) {
        const colon = line.indexOf(':');
        headers.push([line.slice(0, colon).trim().toLowerCase(), line.slice(colon + 1).trim()]);
      }
      const lengthHeader = headers.find(([n]) => n === 'content-length');
      const length = lengthHeader ? Number.parseInt(lengthHeader[1], 10) : 0;
      if (buf.length < end + 4 + length) return;
      const body = buf.subarray(end + 4, end + 4 + length);
      buf = buf.subarray(end + 4 + length);
      ledger.push({
        listener, conn, method, target, headers,
        raw_head: lines.join('\n'),
        has_authorization: headers.some(([n]) => n === 'authorization'),
        body_sha256: crypto.createHash('sha256').update(body).digest('hex'),
        body_len: body.length,
        body: body.subarray(0, 64 * 1024).toString('utf8'),
      });
      busy = true;
      let keep = false;
      const action = nextAction(listener);
      ledger[ledger.length - 1].answer = action.fault ?? action.status ?? (action.raw ? 'raw' : 200);
      try {
        keep = await perform(action, sock, raw);
      } catch (e) {  // a broken action is a bug in the test: say so, and end the connection
        process.stderr.write(`fault_server: action failed: ${e}\n`);
        sock.destroy();
        keep = false;
      }
      busy = false;
      if (!keep) return;
    }
  };
  sock.on('data', (chunk) => {
    buf = Buffer.concat([buf, chunk]);
    pump();
  });
}

function trackSocket(sock) {
  sock.setNoDelay(true);  // no Nagle: every write leaves at once, so fault timing is exact
  openSockets.add(sock);
  sock.on('close', () => openSockets.delete(sock));
}

function tlsListener(name, identity) {
  const context = tls.createSecureContext({ key: identity.key, cert: identity.cert });
  const server = net.createServer((raw) => {
    counter(name).tcp++;
    trackSocket(raw);
    raw.on('error', () => {});
    const secure = new tls.TLSSocket(raw, {
      isServer: true, secureContext: context, ALPNProtocols: ['http/1.1'],
    });
    secure.on('error', () => {});
    secure.on('secure', () => {
      counter(name).tls++;
      serveHttp(name, secure, raw);
    });
  });
  return server;
}

function plainListener(name) {
  return net.createServer((raw) => {
    counter(name).tcp++;
    trackSocket(raw);
    serveHttp(name, raw, raw);
  });
}

function targetListener(name) {
  return net.createServer((raw) => {
    counter(name).tcp++;
    trackSocket(raw);
    raw.on('error', () => {});
    raw.destroy();
  });
}

function proxyListener(name) {
  return net.createServer((client) => {
    counter(name).tcp++;
    trackSocket(client);
    client.on('error', () => {});
    let buf = Buffer.alloc(0);
    const onData = (chunk) => {
      buf = Buffer.concat([buf, chunk]);
      const end = buf.indexOf('\r\n\r\n');
      if (end < 0) return;
      client.off('data', onData);
      const lines = buf.subarray(0, end).toString('latin1').split('\r\n');
      const rest = buf.subarray(end + 4);
      const headers = lines.slice(1).map((l) => [l.slice(0, l.indexOf(':')).trim().toLowerCase(),
        l.slice(l.indexOf(':') + 1).trim()]);
      proxyLog.push({ line: lines[0], headers });
      const [method, target] = lines[0].split(' ');
      if (method !== 'CONNECT') {
        client.end('HTTP/1.1 405 Method Not Allowed\r\nContent-Length: 0\r\n\r\n');
        return;
      }
      const colon = target.lastIndexOf(':');
      const upstream = net.connect(Number(target.slice(colon + 1)), target.slice(0, colon), () => {
        client.write('HTTP/1.1 200 Connection established\r\n\r\n');
        if (rest.length > 0) upstream.write(rest);
        client.pipe(upstream);
        upstream.pipe(client);
      });
      trackSocket(upstream);
      upstream.on('error', () => client.destroy());
      client.on('close', () => upstream.destroy());
    };
    client.on('data', onData);
  });
}

const servers = {
  tls: tlsListener('tls', good),
  expired: tlsListener('expired', expired),
  wronghost: tlsListener('wronghost', wronghost),
  plain: plainListener('plain'),
  target: targetListener('target'),
  proxy: proxyListener('proxy'),
};

const ports = {};
await Promise.all(Object.entries(servers).map(([name, server]) => new Promise((resolve) => {
  server.listen(0, '127.0.0.1', () => {
    ports[name] = server.address().port;
    counter(name);
    resolve();
  });
})));

send({
  ready: true, ports, dir,
  ca: path.join(dir, 'ca.pem'), other_ca: path.join(dir, 'other_ca.pem'),
});

// ------------------------------------------------------------------------------------------
// Control

function handle(cmd) {
  switch (cmd.cmd) {
    case 'script':
      scripts[cmd.listener] ??= [];
      scripts[cmd.listener].push(...cmd.actions);
      return {};
    case 'default':
      defaults[cmd.listener] = cmd.action;
      return {};
    case 'ledger':
      return { requests: ledger };
    case 'close':  // stop accepting connections (open ones stay): "connection refused" from now
      servers[cmd.listener].close();
      return {};
    case 'stats':
      return { connections: counters, proxy: proxyLog };
    case 'reset':
      for (const k of Object.keys(scripts)) delete scripts[k];
      for (const k of Object.keys(defaults)) delete defaults[k];
      ledger = [];
      proxyLog = [];
      for (const k of Object.keys(counters)) counters[k] = { tcp: 0, tls: 0 };
      return {};
    default:
      return { ok: false, error: `unknown command ${cmd.cmd}` };
  }
}

const rl = readline.createInterface({ input: process.stdin });
rl.on('line', (line) => {
  if (line.trim() === '') return;
  let cmd;
  try {
    cmd = JSON.parse(line);
  } catch {
    send({ ok: false, error: 'invalid JSON command' });
    return;
  }
  send({ ok: true, id: cmd.id, ...handle(cmd) });
});
rl.on('close', () => {
  for (const sock of openSockets) sock.destroy();
  for (const server of Object.values(servers)) server.close();
  fs.rmSync(dir, { recursive: true, force: true });
  process.exit(0);
});
