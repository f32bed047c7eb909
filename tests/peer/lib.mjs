// lib.mjs — shared helpers for the tmcra-mcp independent-peer tests.
//
// Every script is run as:  node <script>.mjs <server-bin> <testserver-bin>
// and ends with a line "<N> passed, <M> failed" (exit 0 iff M == 0).
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export { assert };
export const HERE = path.dirname(fileURLToPath(import.meta.url));
export const TAP = path.join(HERE, 'tap.mjs');
export const BIN_DIR = path.join(HERE, 'node_modules', '.bin');
export const SUPPORTED_VERSIONS = ['2024-11-05', '2025-03-26', '2025-06-18', '2025-11-25'];
export const NEWEST_VERSION = '2025-11-25';

// ---------------------------------------------------------------------------
// Test runner: sequential named tests, counters, final "N passed, M failed".
// ---------------------------------------------------------------------------
export class Runner {
  constructor(name, { budgetMs = 90_000 } = {}) {
    this.name = name;
    this.passed = 0;
    this.failed = 0;
    this.failures = [];
    this.t0 = Date.now();
    this.cleanups = [];
    // Hard watchdog: a hung peer must not hang CI.
    this.watchdog = setTimeout(() => {
      this.log(`FATAL: ${name} exceeded its ${budgetMs} ms budget; aborting`);
      this.failed += 1;
      this.failures.push('watchdog: script budget exceeded');
      this.finish();
    }, budgetMs);
    this.watchdog.unref();
  }

  log(...a) { console.log(...a); }

  /** Run one test. fn may be async; a thrown error marks it failed. */
  async test(title, fn, { timeoutMs = 30_000 } = {}) {
    const t = Date.now();
    try {
      await withTimeout(Promise.resolve().then(fn), timeoutMs, `test "${title}"`);
      this.passed += 1;
      this.log(`ok   - ${title} (${Date.now() - t} ms)`);
    } catch (err) {
      this.failed += 1;
      this.failures.push(title);
      this.log(`FAIL - ${title} (${Date.now() - t} ms)`);
      this.log(indent(describeError(err)));
    }
  }

  /** Register a cleanup (run in reverse order by finish()). */
  onCleanup(fn) { this.cleanups.push(fn); }

  async finish() {
    clearTimeout(this.watchdog);
    for (const fn of this.cleanups.reverse()) {
      try { await withTimeout(Promise.resolve().then(fn), 10_000, 'cleanup'); } catch (e) { this.log(`cleanup error: ${e.message}`); }
    }
    this.cleanups = [];
    const secs = ((Date.now() - this.t0) / 1000).toFixed(1);
    if (this.failed) this.log(`\n${this.name}: failed tests:\n${this.failures.map((f) => `  - ${f}`).join('\n')}`);
    this.log(`\n${this.name}: finished in ${secs} s`);
    this.log(`${this.passed} passed, ${this.failed} failed`);
    process.exit(this.failed === 0 && this.passed > 0 ? 0 : 1);
  }
}

export function describeError(err) {
  if (!err) return String(err);
  let s = err.stack || String(err);
  if (err.code !== undefined && !s.includes(String(err.code))) s += `\n(code ${err.code})`;
  if (err.generatedMessage === false || err.actual !== undefined) {
    // node:assert errors already carry a readable message.
  }
  return s;
}

export function indent(s, pre = '       ') {
  return String(s).split('\n').map((l) => pre + l).join('\n');
}

export function withTimeout(promise, ms, what) {
  let timer;
  return Promise.race([
    promise,
    new Promise((_, reject) => {
      timer = setTimeout(() => reject(new Error(`${what}: timed out after ${ms} ms`)), ms);
      timer.unref?.();
    }),
  ]).finally(() => clearTimeout(timer));
}

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// ---------------------------------------------------------------------------
// Command line and environment
// ---------------------------------------------------------------------------
/** Parse "<server-bin> <testserver-bin>"; exits 2 with a clear message if unusable. */
export function parseBins(scriptName) {
  const [server, testserver] = process.argv.slice(2);
  const usage = `usage: node ${scriptName} <tmcra-mcp binary> <tmcra-mcp-testserver binary>`;
  if (!server || !testserver) {
    console.error(usage);
    console.log('0 passed, 1 failed');
    process.exit(2);
  }
  const out = {};
  for (const [k, p] of [['server', server], ['testserver', testserver]]) {
    const abs = path.resolve(p);
    try {
      fs.accessSync(abs, fs.constants.X_OK);
    } catch {
      console.error(`${scriptName}: ${k} binary "${abs}" does not exist or is not executable\n${usage}`);
      console.log('0 passed, 1 failed');
      process.exit(2);
    }
    out[k] = abs;
  }
  return out;
}

/** Fail early (with a clear message) if `npm ci` has not been run in tests/peer. */
export function requireNodeModules(scriptName, pkgs) {
  const missing = pkgs.filter((p) => !fs.existsSync(path.join(HERE, 'node_modules', ...p.split('/'), 'package.json')));
  if (missing.length) {
    console.error(`${scriptName}: missing npm packages ${missing.join(', ')}; run: npm ci --prefix ${HERE}`);
    console.log('0 passed, 1 failed');
    process.exit(2);
  }
}

let tmpRoot;
/** A per-script temp dir (removed at exit unless PEER_KEEP_TMP=1). */
export function tmpDir(prefix = 'tmcra-peer-') {
  if (!tmpRoot) {
    tmpRoot = fs.mkdtempSync(path.join(os.tmpdir(), prefix));
    process.on('exit', () => {
      if (process.env.PEER_KEEP_TMP === '1') {
        console.log(`(kept temp dir ${tmpRoot})`);
      } else {
        try { fs.rmSync(tmpRoot, { recursive: true, force: true }); } catch { /* ignore */ }
      }
    });
  }
  return tmpRoot;
}

let logCounter = 0;
/** A fresh log path for one tapped server process. */
export function newLogPath(label) {
  logCounter += 1;
  return path.join(tmpDir(), `${String(logCounter).padStart(2, '0')}-${label.replace(/[^A-Za-z0-9_.%-]/g, '_')}.stdout.log`);
}

/** Environment for a server process: inherit ours, but keep HOME/XDG dirs in our temp dir. */
export function serverEnv(extra = {}) {
  const home = path.join(tmpDir(), 'home');
  fs.mkdirSync(home, { recursive: true });
  const inherited = {};
  // Never let a developer's TMCRA_API_KEY / TMCRA_BASE_URL / TMCRA_DATA_DIR reach the
  // server under test: these tests use a throw-away local store only.
  for (const [k, v] of Object.entries(process.env)) {
    if (k.startsWith('TMCRA_') && k !== 'TMCRA_LOG_LEVEL') continue;
    inherited[k] = v;
  }
  return {
    ...inherited,
    TMCRA_DATA_DIR: path.join(home, 'tmcra-data'),
    HOME: home,
    XDG_DATA_HOME: path.join(home, '.local', 'share'),
    XDG_CONFIG_HOME: path.join(home, '.config'),
    XDG_STATE_HOME: path.join(home, '.local', 'state'),
    XDG_CACHE_HOME: path.join(home, '.cache'),
    ...extra,
  };
}

// The "env" tmcra-mcp-setup writes into a new Gemini CLI entry when installing with `env`:
// TMCRA_HOOKS (with `hooks`), then, sorted, a "$NAME" reference for each variable it passes on
// (TMCRA_* but TMCRA_HOOKS, SSL_CERT_FILE, SSL_CERT_DIR, HTTPS_PROXY, NO_PROXY; setup::EntryFor,
// docs/setup.md).
export function geminiEntryEnv(env, hooks = true) {
  const passed = Object.keys(env).filter((k) => (k.startsWith('TMCRA_') && k !== 'TMCRA_HOOKS')
    || ['SSL_CERT_FILE', 'SSL_CERT_DIR', 'HTTPS_PROXY', 'NO_PROXY'].includes(k)).sort();
  return { ...(hooks ? { TMCRA_HOOKS: 'gemini-cli' } : {}), ...Object.fromEntries(passed.map((k) => [k, `$${k}`])) };
}

/**
 * The environment for a host's CLI (Claude Code, Codex, Gemini CLI) run in a throw-away `home`:
 * nothing of the caller's host, TMCRA or XDG settings leaks in, the XDG dirs are under `home`,
 * and updaters, telemetry and colour are off. The embedded store lives in `home` too.
 */
export function hostCliEnv(home) {
  const env = {};
  for (const [k, v] of Object.entries(process.env)) {
    if (/^(CLAUDE|ANTHROPIC|MCP_|CODEX|OPENAI|GEMINI|GOOGLE_|XDG_)/i.test(k)) continue;
    if (k.startsWith('TMCRA_') && k !== 'TMCRA_LOG_LEVEL') continue; // local store only
    env[k] = v;
  }
  return Object.assign(env, {
    HOME: home,
    XDG_CONFIG_HOME: path.join(home, '.config'),
    XDG_CACHE_HOME: path.join(home, '.cache'),
    XDG_DATA_HOME: path.join(home, '.local', 'share'),
    XDG_STATE_HOME: path.join(home, '.local', 'state'),
    DISABLE_AUTOUPDATER: '1',
    CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: '1',
    DISABLE_TELEMETRY: '1',
    DISABLE_ERROR_REPORTING: '1',
    NO_COLOR: '1',
    CI: process.env.CI ?? '1',
    TMCRA_DATA_DIR: path.join(home, 'tmcra-data'),
  });
}

/**
 * How to run Claude Code. `npm ci` runs the package's postinstall, which puts the native binary
 * at bin/claude.exe; with `npm ci --ignore-scripts` that file stays a small shell stub and the
 * package's cli-wrapper.cjs finds the same binary in the platform package.
 */
export function claudeCommand() {
  const pkg = path.join(BIN_DIR, '..', '@anthropic-ai', 'claude-code');
  const exe = path.join(pkg, 'bin', 'claude.exe');
  if (fs.existsSync(exe) && fs.statSync(exe).size > 1_000_000) return { cmd: exe, pre: [], how: 'bin/claude.exe (postinstall ran)' };
  return { cmd: process.execPath, pre: [path.join(pkg, 'cli-wrapper.cjs')], how: 'cli-wrapper.cjs (postinstall skipped)' };
}

/** {command,args} that runs bin through the wiretap, logging stdout to logPath. */
export function tapped(bin, args, logPath) {
  return { command: process.execPath, args: [TAP, logPath, bin, ...args] };
}

// ---------------------------------------------------------------------------
// stdout purity
// ---------------------------------------------------------------------------
/**
 * Check a tap stdout log: every byte must belong to a newline-terminated line holding
 * one JSON-RPC 2.0 message object (no banners, no blank lines, no CR, valid UTF-8).
 * Returns {messages, problems}.
 */
export function checkStdoutLog(logPath) {
  const problems = [];
  const messages = [];
  let buf;
  try {
    buf = fs.readFileSync(logPath);
  } catch (e) {
    return { messages, problems: [`cannot read ${logPath}: ${e.message}`] };
  }
  let text;
  try {
    text = new TextDecoder('utf-8', { fatal: true }).decode(buf);
  } catch {
    problems.push('stdout is not valid UTF-8');
    text = buf.toString('utf8');
  }
  if (text.length === 0) return { messages, problems };
  const lines = text.split('\n');
  const tail = lines.pop();
  if (tail !== '') problems.push(`stdout does not end with "\\n"; unterminated tail: ${JSON.stringify(tail.slice(0, 200))}`);
  lines.forEach((line, i) => {
    const where = `stdout line ${i + 1}`;
    if (line.endsWith('\r')) problems.push(`${where}: ends with CR`);
    let m;
    try {
      m = JSON.parse(line);
    } catch {
      problems.push(`${where}: not JSON: ${JSON.stringify(line.slice(0, 200))}`);
      return;
    }
    const why = jsonRpcShapeProblem(m);
    if (why) problems.push(`${where}: ${why}: ${line.slice(0, 200)}`);
    else messages.push(m);
  });
  return { messages, problems };
}

function jsonRpcShapeProblem(m) {
  if (Array.isArray(m)) return 'JSON array (batch) on stdout';
  if (m === null || typeof m !== 'object') return 'not a JSON object';
  if (m.jsonrpc !== '2.0') return 'missing "jsonrpc":"2.0"';
  const hasId = Object.prototype.hasOwnProperty.call(m, 'id');
  if (hasId && !(typeof m.id === 'string' || Number.isInteger(m.id) || m.id === null)) return 'bad id type';
  if (typeof m.method === 'string') {
    if (hasId && m.id === null) return 'request with null id';
    if ('result' in m || 'error' in m) return 'request/notification carrying result or error';
    return null;
  }
  if ('method' in m) return 'non-string method';
  if (!hasId) return 'response without id';
  const hasRes = 'result' in m;
  const hasErr = 'error' in m;
  if (hasRes === hasErr) return 'response must have exactly one of result/error';
  if (hasErr) {
    if (!m.error || typeof m.error !== 'object' || !Number.isInteger(m.error.code) || typeof m.error.message !== 'string') return 'malformed error object';
  } else if (m.result === null || typeof m.result !== 'object' || Array.isArray(m.result)) {
    return 'result is not an object';
  }
  return null;
}

/** Parse a tap .stdin log (what the client sent); lenient (clients are not under test). */
export function readClientMessages(logPath) {
  let text = '';
  try { text = fs.readFileSync(logPath + '.stdin', 'utf8'); } catch { return []; }
  return text.split('\n').filter((l) => l.trim()).map((l) => { try { return JSON.parse(l); } catch { return { unparsable: l }; } });
}

/** The tap's exit record (or null if the tapped process never finished). */
export function readExitInfo(logPath) {
  try { return JSON.parse(fs.readFileSync(logPath + '.exit.json', 'utf8')); } catch { return null; }
}

/** Wait until the tap wrote a final exit record with an exit time. */
export async function waitForExitInfo(logPath, ms = 6000) {
  const until = Date.now() + ms;
  for (;;) {
    const info = readExitInfo(logPath);
    if (info && info.exitedAtMs !== null) return info;
    if (Date.now() > until) return info;
    await sleep(50);
  }
}

/**
 * Assert the tapped server exited by itself with code 0 after its stdin closed,
 * i.e. the client never had to escalate to SIGTERM/SIGKILL.
 */
export async function assertCleanExit(logPath, { ms = 6000 } = {}) {
  const info = await waitForExitInfo(logPath, ms);
  assert.ok(info, `no exit record for ${logPath} (tap never ran?)`);
  assert.notEqual(info.exitedAtMs, null, `server still running ${ms} ms after the client closed (log ${logPath})`);
  assert.deepEqual(info.forwardedSignals, [], `client had to signal the server (it did not exit on stdin EOF): ${JSON.stringify(info.forwardedSignals)}`);
  assert.equal(info.signal, null, `server was killed by ${info.signal}`);
  assert.equal(info.code, 0, `server exit code ${info.code}, expected 0`);
  assert.equal(info.stdinEnded, true, 'server exited before its stdin was closed');
  return info;
}

/** Collected purity check over many logs, as one assertion. */
export function assertAllStdoutPure(logPaths) {
  const bad = [];
  let total = 0;
  for (const p of logPaths) {
    const { messages, problems } = checkStdoutLog(p);
    total += messages.length;
    for (const pr of problems) bad.push(`${path.basename(p)}: ${pr}`);
  }
  assert.ok(logPaths.length > 0, 'no stdout logs were recorded');
  assert.deepEqual(bad, [], `stdout purity violations:\n${bad.join('\n')}`);
  return total;
}

// ---------------------------------------------------------------------------
// Misc
// ---------------------------------------------------------------------------
/** Run a command to completion; returns {code, signal, stdout, stderr, ms}. */
export function run(cmd, args, { env = process.env, cwd, timeoutMs = 30_000, input } = {}) {
  return new Promise((resolve, reject) => {
    const t = Date.now();
    const p = spawn(cmd, args, { env, cwd, stdio: ['pipe', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    p.stdout.on('data', (d) => { stdout += d; });
    p.stderr.on('data', (d) => { stderr += d; });
    const timer = setTimeout(() => {
      p.kill('SIGKILL');
      reject(new Error(`${cmd} ${args.join(' ')}: timed out after ${timeoutMs} ms\nstdout: ${stdout}\nstderr: ${stderr}`));
    }, timeoutMs);
    p.on('error', (e) => { clearTimeout(timer); reject(e); });
    p.on('close', (code, signal) => { clearTimeout(timer); resolve({ code, signal, stdout, stderr, ms: Date.now() - t }); });
    p.stdin.on('error', () => {});
    if (input !== undefined) p.stdin.end(input); else p.stdin.end();
  });
}

/** Concatenated text of all text blocks of a CallToolResult. */
export function textOf(result) {
  return (result?.content ?? []).filter((c) => c.type === 'text').map((c) => c.text).join('\n');
}

/**
 * Check the "structuredContent + same JSON in a text block" convention.
 * Returns the parsed object.
 */
export function assertStructuredAndText(result, { requireStructured = true } = {}) {
  assert.ok(Array.isArray(result.content), 'result.content must be an array');
  assert.notEqual(result.isError, true, `tool returned isError: ${textOf(result)}`);
  const texts = result.content.filter((c) => c.type === 'text');
  assert.ok(texts.length >= 1, 'expected at least one text content block');
  let parsedText;
  for (const t of texts) {
    try { parsedText = JSON.parse(t.text); break; } catch { /* try next */ }
  }
  assert.ok(parsedText && typeof parsedText === 'object', `no text block holds a JSON object: ${textOf(result).slice(0, 300)}`);
  if (requireStructured) {
    assert.ok(result.structuredContent && typeof result.structuredContent === 'object', 'structuredContent missing');
  }
  if (result.structuredContent !== undefined) {
    assert.deepEqual(parsedText, result.structuredContent, 'text block JSON differs from structuredContent');
  }
  return result.structuredContent ?? parsedText;
}

// ---------------------------------------------------------------------------
// SDK sessions through the tap
// ---------------------------------------------------------------------------
function collectStderr(transport) {
  let text = '';
  const s = transport.stderr;
  if (s) s.on('data', (d) => { text += d; if (process.env.PEER_VERBOSE === '1') process.stderr.write(d); });
  return () => text;
}

/**
 * Connect an @modelcontextprotocol/sdk (v1) Client to bin through the tap.
 * protocolVersion: force the version the client asks for in `initialize`. The v1 SDK
 * hard-codes LATEST_PROTOCOL_VERSION in Client.connect(), so a subclass rewrites the
 * initialize params in Client.request() (everything else is the SDK's own code path).
 */
export async function connectV1({ bin, args = [], label = 'v1', protocolVersion, capabilities = {}, setup, env } = {}) {
  const { Client } = await import('@modelcontextprotocol/sdk/client/index.js');
  const { StdioClientTransport } = await import('@modelcontextprotocol/sdk/client/stdio.js');
  class VersionedClient extends Client {
    async request(req, schema, options) {
      let r = req;
      if (r.method === 'initialize' && protocolVersion) r = { ...r, params: { ...r.params, protocolVersion } };
      const res = await super.request(r, schema, options);
      if (r.method === 'initialize') this.negotiatedVersion = res?.protocolVersion;
      return res;
    }
  }
  const logPath = newLogPath(label);
  const transport = new StdioClientTransport({ ...tapped(bin, args, logPath), env: env ?? serverEnv(), stderr: 'pipe' });
  const stderr = collectStderr(transport);
  const client = new VersionedClient({ name: 'tmcra-peer-v1', version: '0.0.0' }, { capabilities });
  const errors = [];
  client.onerror = (e) => errors.push(e);
  if (setup) setup(client);
  try {
    await withTimeout(client.connect(transport), 15_000, `v1 connect (${label})`);
  } catch (e) {
    e.message += `\nserver stderr:\n${stderr()}`;
    try { await client.close(); } catch { /* ignore */ }
    throw e;
  }
  return makeSession(client, logPath, errors, stderr, 'v1');
}

/**
 * Connect an @modelcontextprotocol/client (v2) Client through the tap.
 * mode: 'legacy' | 'auto'. protocolVersion: offer this version in `initialize`
 * (v2 supports this natively via supportedProtocolVersions).
 * inPlace: use a subclass of StdioClientTransport, which makes 'auto' mode probe on the
 * session's own process (the base class probes on a throw-away sibling process).
 */
export async function connectV2({ bin, args = [], label = 'v2', mode = 'legacy', protocolVersion, capabilities = {}, setup, inPlace = false, probeTimeoutMs = 20_000, env } = {}) {
  const { Client } = await import('@modelcontextprotocol/client');
  const { StdioClientTransport } = await import('@modelcontextprotocol/client/stdio');
  const logPath = newLogPath(label + (mode === 'auto' && !inPlace ? '-%p' : ''));
  const T = inPlace ? class InPlaceStdioClientTransport extends StdioClientTransport {} : StdioClientTransport;
  const transport = new T({ ...tapped(bin, args, logPath), env: env ?? serverEnv(), stderr: 'pipe' });
  const stderr = collectStderr(transport);
  const opts = { capabilities, versionNegotiation: { mode, probe: { timeoutMs: probeTimeoutMs } } };
  if (protocolVersion) opts.supportedProtocolVersions = [protocolVersion];
  const client = new Client({ name: 'tmcra-peer-v2', version: '0.0.0' }, opts);
  const errors = [];
  client.onerror = (e) => errors.push(e);
  if (setup) setup(client);
  try {
    await withTimeout(client.connect(transport), 30_000, `v2 connect (${label}, ${mode})`);
  } catch (e) {
    e.message += `\nserver stderr:\n${stderr()}`;
    try { await client.close(); } catch { /* ignore */ }
    throw e;
  }
  client.negotiatedVersion = client.getNegotiatedProtocolVersion?.();
  const session = makeSession(client, logPath.replace('%p', String(transport.pid)), errors, stderr, 'v2');
  session.logTemplate = logPath;
  return session;
}

/** All tap logs written for a '%p' template (e.g. probe sibling + session process). */
export function logsForTemplate(template) {
  const dir = path.dirname(template);
  const [pre, post] = path.basename(template).split('%p');
  return fs.readdirSync(dir)
    .filter((f) => f.startsWith(pre) && f.endsWith(post) && /^\d+$/.test(f.slice(pre.length, f.length - post.length)))
    .map((f) => path.join(dir, f));
}

function makeSession(client, logPath, errors, stderr, sdk) {
  return {
    client,
    logPath,
    errors,
    stderr,
    sdk,
    /** callTool with request options ({signal, timeout}); hides the v1/v2 signature difference. */
    call(params, options) {
      return sdk === 'v1' ? client.callTool(params, undefined, options) : client.callTool(params, options);
    },
    /** SDK close (stdin EOF → 2 s → SIGTERM …) then assert the server exited 0 by itself. */
    async closeAndCheckExit() {
      await withTimeout(client.close(), 10_000, 'client.close()');
      return assertCleanExit(logPath);
    },
    async closeQuietly() {
      try { await withTimeout(client.close(), 10_000, 'client.close()'); } catch { /* ignore */ }
    },
    /** No transport/protocol errors (stray stdout, unknown response ids, …) were reported. */
    assertNoClientErrors() {
      assert.deepEqual(errors.map((e) => e.message), [], 'SDK client reported protocol/transport errors');
    },
  };
}

/** Assert that promise rejects within ms (and not merely because our own timer fired). */
export async function assertRejectsWithin(promise, ms, what) {
  const TIMEOUT = Symbol('timeout');
  let timer;
  const outcome = await Promise.race([
    promise.then((v) => ({ value: v }), (e) => ({ error: e })),
    new Promise((res) => { timer = setTimeout(() => res(TIMEOUT), ms); }),
  ]).finally(() => clearTimeout(timer));
  assert.notEqual(outcome, TIMEOUT, `${what}: still pending after ${ms} ms (expected a rejection)`);
  assert.ok('error' in outcome, `${what}: resolved (expected a rejection): ${JSON.stringify(outcome.value)?.slice(0, 300)}`);
  return outcome.error;
}

/** Assert a JSON-RPC error with the given code was thrown (McpError / ProtocolError). */
export async function assertRpcError(promise, code, what) {
  let err;
  try {
    const r = await promise;
    assert.fail(`${what}: expected JSON-RPC error ${code}, got result ${JSON.stringify(r).slice(0, 300)}`);
  } catch (e) {
    if (e instanceof assert.AssertionError) throw e;
    err = e;
  }
  assert.equal(err.code, code, `${what}: expected error code ${code}, got ${err.code} (${err.message})`);
  return err;
}

// ---------------------------------------------------------------------------
// Memory tools (used by memory_e2e.mjs and concurrent_ingest.mjs)
// ---------------------------------------------------------------------------
/** sha256 hex of a string's UTF-8 bytes. */
export async function sha256Hex(text) {
  const { createHash } = await import('node:crypto');
  return createHash('sha256').update(Buffer.from(text, 'utf8')).digest('hex');
}

/**
 * tools/call on a v1 SDK Client that must succeed: asserts no isError (quoting the
 * server's text, prefixed by `what`) and the structuredContent/text convention; returns
 * structuredContent. options go to the SDK request (e.g. {timeout}).
 */
export async function callOk(client, name, args, { what = name, options } = {}) {
  const res = await client.callTool({ name, arguments: args }, undefined, options);
  assert.notEqual(res.isError, true, `${what}: isError: ${textOf(res)}`);
  return assertStructuredAndText(res);
}
