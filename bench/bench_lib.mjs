// Helpers shared by the Node benchmark drivers (lifecycle_latency.mjs, remote_latency.mjs).
import { execFileSync, spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';

const REPO = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

export const CONNECT_TIMEOUT_MS = 30_000;
export const CALL_TIMEOUT_MS = 60_000;  // a read_your_writes commit may wait up to 30 s by design
export const CLOSE_TIMEOUT_MS = 10_000;

export function withTimeout(promise, ms, what) {
  let timer;
  const timeout = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} timed out after ${ms} ms`)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

export function summarize(samples) {
  const s = [...samples].sort((a, b) => a - b);
  const n = s.length;
  if (n === 0) return { n: 0 };
  const rank = (p) => s[Math.min(n - 1, Math.max(0, Math.ceil((p / 100) * n) - 1))];
  const median = n % 2 ? s[(n - 1) / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
  const mean = s.reduce((acc, v) => acc + v, 0) / n;
  return { n, p50: median, p90: rank(90), p99: rank(99), min: s[0], max: s[n - 1], mean };
}

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

export function runOr(cmd, args, fallback = null) {
  try {
    return execFileSync(cmd, args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'], timeout: 10_000 }).trim();
  } catch {
    return fallback;
  }
}

export function readFileOr(p, fallback = '') {
  try { return fs.readFileSync(p, 'utf8'); } catch { return fallback; }
}

export const f = (v, d = 2) => (v == null || Number.isNaN(v) ? 'n/a' : v.toFixed(d));

export function verdict(value, target, lowerIsBetter = true) {
  if (value == null || Number.isNaN(value)) return 'n/a';
  const met = lowerIsBetter ? value <= target : value >= target;
  if (met) return 'met';
  return lowerIsBetter ? `MISSED: ${f(value / target)}× the target`
    : `MISSED: ${f((value / target) * 100, 0)} % of the target`;
}

// ---- tmcra-mcp sessions --------------------------------------------------------------------
// Both kinds have one interface: call(name, args) -> { value: structuredContent, bytes, lastByteMs }
// (raw pipe only: bytes, the answer line's length, and lastByteMs, the time from the request's
// write to the arrival of the answer's last byte), close(), pid, stderr().

/** A newline-delimited JSON-RPC pipe without the SDK: server time plus pipe, no client-side
 *  schema validation. */
export async function connectRaw(bin, env, label, clientName) {
  const child = spawn(bin, [], { env, stdio: ['pipe', 'pipe', 'pipe'] });
  let stderr = '';
  child.stderr.on('data', (c) => { stderr = (stderr + c.toString('utf8')).slice(-4096); });
  const pending = new Map();
  // Bytes, not text: a line is decoded once it is whole. The time a line's last byte reached
  // this process is taken as its chunk arrives, before decoding and JSON.parse, so that a
  // benchmark can stop its clock where the floor's driver stops its own (the whole answer
  // received, not yet interpreted).
  let chunks = [];
  let nextId = 1;
  const exited = new Promise((resolve) => child.once('close', (code, signal) => resolve({ code, signal })));
  exited.then(({ code, signal }) => {
    for (const p of pending.values()) p.reject(new Error(`${label}: exited (${code}, ${signal})\n${stderr}`));
    pending.clear();
  });
  child.stdin.on('error', () => {});
  child.stdout.on('data', (chunk) => {
    const arrived = performance.now();
    let start = 0;
    let nl;
    while ((nl = chunk.indexOf(10, start)) >= 0) {
      chunks.push(chunk.subarray(start, nl));
      const line = (chunks.length === 1 ? chunks[0] : Buffer.concat(chunks)).toString('utf8');
      chunks = [];
      start = nl + 1;
      if (!line.trim()) continue;
      const msg = JSON.parse(line);
      const p = msg.id !== undefined ? pending.get(msg.id) : undefined;
      if (p) {
        pending.delete(msg.id);
        if (msg.error) p.reject(new Error(`${label}: JSON-RPC error ${JSON.stringify(msg.error)}`));
        else p.resolve({ result: msg.result, bytes: Buffer.byteLength(line), lastByteMs: arrived - p.sentAt });
      }
    }
    if (start < chunk.length) chunks.push(chunk.subarray(start));
  });
  const request = (method, params) => {
    const id = nextId++;
    const line = `${JSON.stringify({ jsonrpc: '2.0', id, method, params })}\n`;
    const entry = { sentAt: 0 };
    const done = new Promise((resolve, reject) => pending.set(id, Object.assign(entry, { resolve, reject })));
    entry.sentAt = performance.now();
    child.stdin.write(line);
    return withTimeout(done, CALL_TIMEOUT_MS, `${label}: ${method}`);
  };
  await withTimeout(request('initialize', {
    protocolVersion: '2025-11-25', capabilities: {},
    clientInfo: { name: clientName, version: '0.0.0' },
  }), CONNECT_TIMEOUT_MS, `${label}: initialize`);
  child.stdin.write('{"jsonrpc":"2.0","method":"notifications/initialized"}\n');
  await request('tools/list', {});
  const call = async (name, args) => {
    const { result: r, bytes, lastByteMs } = await request('tools/call', { name, arguments: args });
    if (r.isError) {
      throw new Error(`${label}: ${name} returned an error: ${JSON.stringify(r.content).slice(0, 500)}\n${stderr}`);
    }
    return { value: r.structuredContent ?? {}, bytes, lastByteMs };
  };
  const close = async () => {
    child.stdin.end();
    const ok = await Promise.race([exited, sleep(CLOSE_TIMEOUT_MS).then(() => null)]);
    if (!ok) child.kill('SIGKILL');
  };
  return { call, close, pid: child.pid, stderr: () => stderr };
}

/** The official SDK client over stdio, as a host runs it. */
export async function connectSdk(bin, env, label, clientName) {
  const transport = new StdioClientTransport({ command: bin, args: [], env, stderr: 'pipe' });
  let stderr = '';
  transport.stderr?.on('data', (c) => { stderr = (stderr + c.toString('utf8')).slice(-4096); });
  const client = new Client({ name: clientName, version: '0.0.0' });
  try {
    await withTimeout(client.connect(transport), CONNECT_TIMEOUT_MS, `${label}: connect`);
    await withTimeout(client.listTools(), CALL_TIMEOUT_MS, `${label}: tools/list`);
  } catch (err) {
    await transport.close().catch(() => {});
    throw new Error(`${err.message}\n--- stderr tail ---\n${stderr}`);
  }
  const call = async (name, args) => {
    const r = await withTimeout(client.callTool({ name, arguments: args }), CALL_TIMEOUT_MS, `${label}: ${name}`);
    if (r.isError) {
      throw new Error(`${label}: ${name} returned an error: ${JSON.stringify(r.content).slice(0, 500)}`
        + `\n--- stderr tail ---\n${stderr}`);
    }
    return { value: r.structuredContent ?? {}, bytes: null };
  };
  const close = () => withTimeout(client.close(), CLOSE_TIMEOUT_MS, `${label}: close`).catch(() => {});
  return { call, close, pid: transport.pid, stderr: () => stderr };
}

// ---- turn text -------------------------------------------------------------------------------
// A few topic words that recur (so recall finds earlier turns, as in a real conversation) and a
// made-up entity per turn (so not every turn matches every other). With `unique`, no word recurs
// between turns, so recall finds nothing and the prepared recall (which tmcra_turn_commit echoes
// in its answer) is small.
const SYLLABLES = ['ka', 'lo', 'mi', 'ren', 'ta', 'vo', 'shi', 'pa', 'dor', 'el', 'qu', 'ni', 'zan', 'bu'];
const TOPICS = ['deploy region', 'retention period', 'on-call owner', 'backup window', 'budget limit',
  'release codename', 'database port', 'api rate limit'];
function word(i, n) {
  let w = '';
  for (let k = 0; k < n; k += 1) w += SYLLABLES[(i * 7 + k * 11 + (i >> 3)) % SYLLABLES.length];
  return w;
}
function uniqueText(i, role) {
  const words = [];
  for (let k = 0; k < 24; k += 1) words.push(`${word(i * 31 + k, 3)}${i}x${k}${role}`);
  return words.join(' ');
}
export function userText(i, unique = false) {
  if (unique) return uniqueText(i, 'u');
  const topic = TOPICS[i % TOPICS.length];
  return `Can you remind me what the ${topic} of the ${word(i, 3)}-${100 + (i % 900)} service is, `
    + `and whether it changed after the ${word(i + 1, 2)} review last week?`;
}
export function assistantText(i, unique = false) {
  if (unique) return uniqueText(i, 'a');
  const topic = TOPICS[i % TOPICS.length];
  return `The ${topic} of the ${word(i, 3)}-${100 + (i % 900)} service is ${word(i + 2, 3)}-${i % 97}. `
    + `It changed after the ${word(i + 1, 2)} review: the runbook has the new value and the on-call `
    + 'owner signed it off, so nothing else needs to be done before the next release.';
}

// ---- tmcra-memd's benchmark corpus ----------------------------------------------------------
// The turns the memd drivers (memd_postgres.mjs, memd_mcp.mjs) ingest through ingest/batch and
// the queries they recall with: topics and words in a fixed rotation, one turn per number.

export const MEMD_TOPICS = ['billing API deployment failed', 'the doctor prescribed rest',
  'invoice service latency', 'database migration rolled back', 'weekly planning notes',
  'kubernetes readiness probe', 'flaky retry loop in the outbox', 'quarterly roadmap review',
  'TLS certificate renewal', 'the cache stampede on monday'];
export const MEMD_WORDS = ['kestrel', 'harbour', 'lantern', 'granite', 'meadow', 'copper',
  'orchard', 'falcon', 'saffron', 'tundra', 'beacon', 'willow', 'cobalt', 'ember', 'quartz',
  'juniper'];

/** ingest/batch items for turns first .. first+count-1 (a user and an assistant message each). */
export function memdTurnItems(first, count) {
  const items = [];
  for (let n = first; n < first + count; n += 1) {
    const w = (k) => MEMD_WORDS[(n * 7 + k * 3) % MEMD_WORDS.length];
    items.push({
      session_id: `s${n % 500}`,
      idempotency_key: `bench-turn-${n}`,
      messages: [
        { message_id: `u${n}`, role: 'user', timestamp: '2026-12-01T10:00:00Z',
          content: `About ${MEMD_TOPICS[n % MEMD_TOPICS.length]}: what did we decide on the ${w(1)} ${w(2)} item ${n}?` },
        { message_id: `a${n}`, role: 'assistant', timestamp: '2026-12-01T10:00:05Z',
          content: `We agreed to move the ${w(3)} work after the ${w(4)} review; ticket ${n} tracks it.` },
      ],
    });
  }
  return items;
}

/** The ten recall queries of the memd drivers. */
export const MEMD_QUERIES = MEMD_TOPICS.map((t, i) =>
  `${t} ${MEMD_WORDS[i]} ${MEMD_WORDS[(i * 5) % MEMD_WORDS.length]}`);

/** `--name value` pairs of argv as {name: value}. */
export function parseFlags(argv = process.argv.slice(2)) {
  return Object.fromEntries(argv.reduce((out, a, i, all) => {
    if (a.startsWith('--')) out.push([a.slice(2), all[i + 1]]);
    return out;
  }, []));
}

// ---- the machine -----------------------------------------------------------------------------

/** What the results were measured on: CPU, memory, kernel, compiler and build type of the build
 *  `bin` belongs to, the commit, the load average. */
export function describeMachine(bin) {
  const lscpu = runOr('lscpu', []) || '';
  const field = (name) => lscpu.match(new RegExp(`^${name}:\\s*(.+)$`, 'm'))?.[1]?.trim() ?? null;
  const memKb = Number(readFileOr('/proc/meminfo').match(/^MemTotal:\s+(\d+)/m)?.[1] ?? 0);
  const buildDir = path.resolve(path.dirname(bin), '..', '..');
  const cache = readFileOr(path.join(buildDir, 'CMakeCache.txt'));
  const cacheVar = (name) => cache.match(new RegExp(`^${name}:[A-Z]+=(.*)$`, 'm'))?.[1]?.trim() || null;
  const cxx = cacheVar('CMAKE_CXX_COMPILER');
  const gitHead = runOr('git', ['-C', REPO, 'rev-parse', '--short=12', 'HEAD']);
  const gitDirty = runOr('git', ['-C', REPO, 'status', '--porcelain']);
  return {
    nproc: os.availableParallelism ? os.availableParallelism() : os.cpus().length,
    cpu_model: field('Model name') ?? os.cpus()[0]?.model,
    hypervisor: field('Hypervisor vendor'),
    mem_total_gib: Number((memKb / 1024 / 1024).toFixed(1)),
    kernel: `${os.type()} ${os.release()}`,
    distro: readFileOr('/etc/os-release').match(/^PRETTY_NAME="?([^"\n]*)"?$/m)?.[1] ?? null,
    node: process.version,
    compiler: cxx ? (runOr(cxx, ['--version']) || '').split('\n')[0] : null,
    build_type: cacheVar('CMAKE_BUILD_TYPE'),
    git_head: gitHead ? `${gitHead}${gitDirty ? ' (+uncommitted changes)' : ''}` : null,
    load_avg_at_start: os.loadavg().map((v) => Number(v.toFixed(2))),
  };
}
