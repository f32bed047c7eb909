#!/usr/bin/env node
// startup_latency.mjs — side-by-side benchmark of tmcra-mcp and @modelcontextprotocol/server-memory.
//
// For each server, driven by the same official client (@modelcontextprotocol/sdk v1 Client +
// StdioClientTransport) and, separately, by a raw newline-delimited JSON-RPC pipe:
//   * cold start   — N fresh processes; time from spawn to the `initialize` result
//                    (SDK: `client.connect()` resolving; raw: the initialize response line read);
//   * call latency — M sequential `tools/call` round trips in one session after a warm-up;
//   * peak RSS     — VmHWM from /proc/<server pid>/status after the calls, before close.
// Reports medians and p99 (nearest rank) as a Markdown table on stdout and writes every sample,
// plus a description of the machine, to bench/results/<timestamp>.json.
//
// This is a benchmark, not a test: it never fails on a figure. It exits non-zero only if a server
// cannot be started or answers with an error. Every loop is bounded and every wait has a timeout.
//
// Usage: node startup_latency.mjs [--bin PATH] [--build-dir DIR] [--starts N] [--calls N]
//                                 [--warmup N] [--out DIR] [--only tmcra|memory]

import { spawn, execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';

const HERE = path.dirname(fileURLToPath(import.meta.url));
const REPO = path.resolve(HERE, '..');

// ---------------------------------------------------------------------------------------------
// Options
// ---------------------------------------------------------------------------------------------
function parseArgs(argv) {
  const opts = {
    buildDir: path.join(REPO, 'build', 'bench'),
    bin: null,
    starts: 50,
    calls: 500,
    warmup: 100,
    out: path.join(HERE, 'results'),
    only: null,
  };
  for (let i = 0; i < argv.length; i += 1) {
    const a = argv[i];
    const next = () => {
      if (i + 1 >= argv.length) throw new Error(`${a} needs a value`);
      i += 1;
      return argv[i];
    };
    const count = (v) => {
      const n = Number.parseInt(v, 10);
      if (!Number.isInteger(n) || n < 1 || n > 100_000) throw new Error(`${a}: bad count '${v}'`);
      return n;
    };
    switch (a) {
      case '--bin': opts.bin = path.resolve(next()); break;
      case '--build-dir': opts.buildDir = path.resolve(next()); break;
      case '--starts': opts.starts = count(next()); break;
      case '--calls': opts.calls = count(next()); break;
      case '--warmup': opts.warmup = count(next()); break;
      case '--out': opts.out = path.resolve(next()); break;
      case '--only': opts.only = next(); break;
      case '-h': case '--help':
        console.log('usage: node startup_latency.mjs [--bin PATH] [--build-dir DIR] [--starts N] '
          + '[--calls N] [--warmup N] [--out DIR] [--only tmcra|memory]');
        process.exit(0);
        break;
      default: throw new Error(`unknown argument '${a}'`);
    }
  }
  if (!opts.bin) opts.bin = path.join(opts.buildDir, 'src', 'app', 'tmcra-mcp');
  if (opts.only && !['tmcra', 'memory'].includes(opts.only)) throw new Error('--only takes tmcra or memory');
  return opts;
}

const CONNECT_TIMEOUT_MS = 30_000;  // per spawn+initialize
const CALL_TIMEOUT_MS = 10_000;     // per tools/call
const CLOSE_TIMEOUT_MS = 10_000;    // per shutdown

// ---------------------------------------------------------------------------------------------
// Small helpers
// ---------------------------------------------------------------------------------------------
function withTimeout(promise, ms, what) {
  let timer;
  const timeout = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} timed out after ${ms} ms`)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

/** Keeps the last `limit` bytes written to a stream, for error messages. */
function tailCollector(stream, limit = 4096) {
  const box = { text: '' };
  stream?.on('data', (chunk) => {
    box.text = (box.text + chunk.toString('utf8')).slice(-limit);
  });
  return box;
}

/** Median (mean of the two middle values for even n) and nearest-rank percentiles. */
function summarize(samples) {
  const s = [...samples].sort((a, b) => a - b);
  const n = s.length;
  const rank = (p) => s[Math.min(n - 1, Math.max(0, Math.ceil((p / 100) * n) - 1))];
  const median = n % 2 ? s[(n - 1) / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
  const mean = s.reduce((acc, v) => acc + v, 0) / n;
  return { n, median, p90: rank(90), p99: rank(99), min: s[0], max: s[n - 1], mean };
}

/** Fields of /proc/<pid>/status in kB. */
function procStatus(pid) {
  const text = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
  const field = (name) => {
    const m = text.match(new RegExp(`^${name}:\\s+(\\d+) kB`, 'm'));
    return m ? Number(m[1]) : null;
  };
  return { VmHWM_kB: field('VmHWM'), VmRSS_kB: field('VmRSS'), Threads: Number((text.match(/^Threads:\s+(\d+)/m) || [])[1]) };
}

/** What the process really is: its executable and argv, so a wrapper can't be measured by mistake. */
function procIdentity(pid) {
  const exe = fs.readlinkSync(`/proc/${pid}/exe`);
  const argv = fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').filter(Boolean);
  return { exe, argv };
}

function packageVersion(dir) {
  return JSON.parse(fs.readFileSync(path.join(dir, 'package.json'), 'utf8')).version;
}

function readFileOr(p, fallback = '') {
  try { return fs.readFileSync(p, 'utf8'); } catch { return fallback; }
}

function runOr(cmd, args, fallback = null) {
  try {
    return execFileSync(cmd, args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'], timeout: 10_000 }).trim();
  } catch {
    return fallback;
  }
}

// ---------------------------------------------------------------------------------------------
// The servers
// ---------------------------------------------------------------------------------------------
function makeServers(opts, tmp) {
  const memoryPkg = path.join(HERE, 'node_modules', '@modelcontextprotocol', 'server-memory');
  const memoryMeta = JSON.parse(fs.readFileSync(path.join(memoryPkg, 'package.json'), 'utf8'));
  const memoryEntry = path.join(memoryPkg, memoryMeta.bin['mcp-server-memory']);
  const memoryFile = path.join(tmp, 'memory', 'memory.jsonl');
  fs.mkdirSync(path.dirname(memoryFile), { recursive: true });
  // A small graph, so search_nodes has something to match: 3 entities, 1 relation.
  const seed = [
    { type: 'entity', name: 'bench-project', entityType: 'project', observations: ['benchmarked against tmcra-mcp'] },
    { type: 'entity', name: 'alice', entityType: 'person', observations: ['runs the bench'] },
    { type: 'entity', name: 'tmcra-mcp', entityType: 'server', observations: ['C++20 stdio MCP server'] },
    { type: 'relation', from: 'alice', to: 'bench-project', relationType: 'works_on' },
  ];
  fs.writeFileSync(memoryFile, seed.map((o) => JSON.stringify(o)).join('\n') + '\n');

  const home = path.join(tmp, 'home');
  fs.mkdirSync(home, { recursive: true });
  const tmcraData = path.join(tmp, 'tmcra-data');

  const sdkVersion = packageVersion(path.join(HERE, 'node_modules', '@modelcontextprotocol', 'sdk'));
  // Which SDK copy does server-memory itself load? (npm dedupes it to the top level when compatible.)
  const nestedSdk = path.join(memoryPkg, 'node_modules', '@modelcontextprotocol', 'sdk');
  const memorySdk = fs.existsSync(nestedSdk) ? packageVersion(nestedSdk) : sdkVersion;

  const servers = [
    {
      key: 'tmcra',
      label: 'tmcra-mcp',
      version: runOr(opts.bin, ['--version'], 'unknown'),
      command: opts.bin,
      args: [],
      // HOME points at an empty temp dir: no user config is read, nothing is written in the real home.
      env: { TMCRA_LOG_LEVEL: 'warn', HOME: home, TMCRA_DATA_DIR: tmcraData },
      tool: { name: 'tmcra_status', arguments: {} },
      expectExe: (id) => fs.realpathSync(id.exe) === fs.realpathSync(opts.bin),
    },
    {
      key: 'memory',
      label: '@modelcontextprotocol/server-memory',
      version: `${memoryMeta.version} (node ${process.versions.node}, its SDK ${memorySdk})`,
      // Started as `node dist/index.js` directly (no npx, no shell), so the spawned pid IS the server.
      command: process.execPath,
      args: [memoryEntry],
      env: { MEMORY_FILE_PATH: memoryFile, HOME: home },
      tool: { name: 'search_nodes', arguments: { query: 'bench' } },
      expectExe: (id) => fs.realpathSync(id.exe) === fs.realpathSync(process.execPath)
        && id.argv.includes(memoryEntry),
    },
  ];
  return { servers: servers.filter((s) => !opts.only || s.key === opts.only), sdkVersion };
}

// ---------------------------------------------------------------------------------------------
// SDK-driven measurements
// ---------------------------------------------------------------------------------------------
async function sdkSession(server) {
  const transport = new StdioClientTransport({
    command: server.command,
    args: server.args,
    env: server.env,
    stderr: 'pipe',
  });
  const stderr = tailCollector(transport.stderr);
  const client = new Client({ name: 'tmcra-bench', version: '0.0.0' });
  const t0 = performance.now();
  try {
    await withTimeout(client.connect(transport), CONNECT_TIMEOUT_MS, `${server.label}: SDK connect`);
  } catch (err) {
    await transport.close().catch(() => {});
    throw new Error(`${err.message}\n--- stderr tail ---\n${stderr.text}`);
  }
  const t1 = performance.now();
  return { client, transport, stderr, connectMs: t1 - t0 };
}

async function sdkClose(session) {
  await withTimeout(session.client.close(), CLOSE_TIMEOUT_MS, 'SDK close');
}

async function sdkColdStart(server) {
  const s = await sdkSession(server);
  try {
    const pid = s.transport.pid;
    let rss = null;
    try { rss = procStatus(pid); } catch { /* exited already: leave null */ }
    // What a host does next: list the tools (untimed), then the first call of the process, timed
    // (for tmcra-mcp this includes opening its memory store, which happens on first use).
    await withTimeout(s.client.listTools(), CALL_TIMEOUT_MS, 'tools/list');
    const t0 = performance.now();
    const first = await withTimeout(s.client.callTool(server.tool), CALL_TIMEOUT_MS, `first tools/call ${server.tool.name}`);
    const firstCallMs = performance.now() - t0;
    if (first.isError) throw new Error(`${server.label}: first ${server.tool.name} returned an error`);
    return { ms: s.connectMs, rssAfterInit: rss, firstCallMs };
  } finally {
    await sdkClose(s);
  }
}

async function sdkCalls(server, opts) {
  const s = await sdkSession(server);
  try {
    const pid = s.transport.pid;
    const identity = procIdentity(pid);
    if (!server.expectExe(identity)) {
      throw new Error(`${server.label}: pid ${pid} is not the server (${identity.exe} ${identity.argv.join(' ')})`);
    }
    const afterInit = procStatus(pid);
    // As a host does: list the tools once (this also primes the SDK's output-schema validators).
    const listed = await withTimeout(s.client.listTools(), CALL_TIMEOUT_MS, 'tools/list');
    if (!listed.tools.some((t) => t.name === server.tool.name)) {
      throw new Error(`${server.label}: tool ${server.tool.name} not listed`);
    }
    const call = () => withTimeout(s.client.callTool(server.tool), CALL_TIMEOUT_MS, `tools/call ${server.tool.name}`);
    const first = await call();
    if (first.isError) throw new Error(`${server.label}: ${server.tool.name} returned an error: ${JSON.stringify(first.content)}`);
    const responseBytes = Buffer.byteLength(JSON.stringify(first));
    for (let i = 1; i < opts.warmup; i += 1) await call();
    const samples = [];
    for (let i = 0; i < opts.calls; i += 1) {
      const t0 = performance.now();
      const r = await call();
      samples.push(performance.now() - t0);
      if (r.isError) throw new Error(`${server.label}: call ${i} returned an error`);
    }
    const peak = procStatus(pid);
    return { samples, afterInit, peak, identity, responseBytes };
  } finally {
    await sdkClose(s).catch(() => {});
  }
}

// ---------------------------------------------------------------------------------------------
// Raw-pipe measurements: child_process + newline-delimited JSON-RPC, no SDK in the loop.
// ---------------------------------------------------------------------------------------------
class RawSession {
  constructor(server) {
    this.server = server;
    this.pending = new Map();
    this.nextId = 1;
    this.buf = '';
    this.t0 = performance.now();
    this.child = spawn(server.command, server.args, {
      env: { PATH: process.env.PATH ?? '/usr/bin:/bin', ...server.env },
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    this.stderr = tailCollector(this.child.stderr);
    this.exited = new Promise((resolve) => this.child.once('close', (code, signal) => resolve({ code, signal })));
    this.child.once('error', (err) => this.failAll(err));
    this.exited.then(({ code, signal }) => this.failAll(new Error(
      `${server.label} exited (code ${code}, signal ${signal})\n--- stderr tail ---\n${this.stderr.text}`)));
    this.child.stdin.on('error', () => {});
    this.child.stdout.setEncoding('utf8');
    this.child.stdout.on('data', (chunk) => {
      this.buf += chunk;
      let nl;
      while ((nl = this.buf.indexOf('\n')) >= 0) {
        const line = this.buf.slice(0, nl);
        this.buf = this.buf.slice(nl + 1);
        if (!line.trim()) continue;
        const t = performance.now();
        let msg;
        try { msg = JSON.parse(line); } catch { this.failAll(new Error(`non-JSON line on stdout: ${line.slice(0, 200)}`)); return; }
        const p = msg.id !== undefined ? this.pending.get(msg.id) : undefined;
        if (p) {
          this.pending.delete(msg.id);
          if (msg.error) p.reject(new Error(`JSON-RPC error ${JSON.stringify(msg.error)}`));
          else p.resolve({ result: msg.result, t, bytes: Buffer.byteLength(line) + 1 });
        }
      }
    });
  }

  failAll(err) {
    for (const p of this.pending.values()) p.reject(err);
    this.pending.clear();
  }

  request(method, params) {
    const id = this.nextId++;
    const done = new Promise((resolve, reject) => this.pending.set(id, { resolve, reject }));
    this.child.stdin.write(`${JSON.stringify({ jsonrpc: '2.0', id, method, params })}\n`);
    return withTimeout(done, CALL_TIMEOUT_MS, `${this.server.label}: raw ${method}`);
  }

  notify(method, params) {
    this.child.stdin.write(`${JSON.stringify({ jsonrpc: '2.0', method, ...(params ? { params } : {}) })}\n`);
  }

  async initialize() {
    const r = await withTimeout(this.request('initialize', {
      protocolVersion: '2025-11-25',
      capabilities: {},
      clientInfo: { name: 'tmcra-bench-raw', version: '0.0.0' },
    }), CONNECT_TIMEOUT_MS, `${this.server.label}: raw initialize`);
    const ms = r.t - this.t0;
    this.notify('notifications/initialized');
    return ms;
  }

  async close() {
    this.child.stdin.end();
    const graceful = await Promise.race([this.exited, new Promise((r) => setTimeout(r, CLOSE_TIMEOUT_MS / 2).unref())]);
    if (!graceful) {
      this.child.kill('SIGKILL');
      await withTimeout(this.exited, CLOSE_TIMEOUT_MS / 2, 'raw close');
    }
  }
}

async function rawColdStart(server) {
  const s = new RawSession(server);
  try {
    return { ms: await s.initialize() };
  } finally {
    await s.close();
  }
}

async function rawCalls(server, opts) {
  const s = new RawSession(server);
  try {
    await s.initialize();
    await s.request('tools/list', {});
    const callParams = server.tool;
    const first = await s.request('tools/call', callParams);
    if (first.result.isError) throw new Error(`${server.label}: raw ${server.tool.name} returned an error`);
    for (let i = 1; i < opts.warmup; i += 1) await s.request('tools/call', callParams);
    const samples = [];
    for (let i = 0; i < opts.calls; i += 1) {
      const t0 = performance.now();
      const r = await s.request('tools/call', callParams);
      samples.push(r.t - t0);
    }
    const peak = procStatus(s.child.pid);
    return { samples, peak, responseBytes: first.bytes };
  } finally {
    await s.close();
  }
}

// ---------------------------------------------------------------------------------------------
// Machine description
// ---------------------------------------------------------------------------------------------
function describeMachine(opts) {
  const cpuinfo = readFileOr('/proc/cpuinfo');
  const lscpuModel = (runOr('lscpu', []) || '').match(/^Model name:\s*(.+)$/m)?.[1]?.trim();
  const cpuModel = lscpuModel || cpuinfo.match(/^model name\s*:\s*(.+)$/m)?.[1]?.trim() || os.cpus()[0]?.model;
  const memKb = Number(readFileOr('/proc/meminfo').match(/^MemTotal:\s+(\d+)/m)?.[1] ?? 0);
  const cache = readFileOr(path.join(opts.buildDir, 'CMakeCache.txt'));
  const cacheVar = (name) => cache.match(new RegExp(`^${name}:[A-Z]+=(.*)$`, 'm'))?.[1]?.trim() || null;
  const cxx = cacheVar('CMAKE_CXX_COMPILER');
  const cxxVersion = cxx ? (runOr(cxx, ['--version']) || '').split('\n')[0] : null;
  const distro = readFileOr('/etc/os-release').match(/^PRETTY_NAME="?([^"\n]*)"?$/m)?.[1] ?? null;
  const gitHead = runOr('git', ['-C', REPO, 'rev-parse', '--short=12', 'HEAD']);
  const gitDirty = runOr('git', ['-C', REPO, 'status', '--porcelain', '--untracked-files=no']);
  return {
    nproc: os.availableParallelism ? os.availableParallelism() : os.cpus().length,
    cpu_model: cpuModel,
    mem_total_gib: Number((memKb / 1024 / 1024).toFixed(1)),
    kernel: `${os.type()} ${os.release()}`,
    distro,
    node: process.version,
    compiler: cxxVersion,
    build_type: cacheVar('CMAKE_BUILD_TYPE'),
    cxx_flags_release: cacheVar('CMAKE_CXX_FLAGS_RELEASE'),
    binary: opts.bin,
    binary_bytes: fs.statSync(opts.bin).size,
    git_head: gitHead ? `${gitHead}${gitDirty ? ' (+uncommitted changes)' : ''}` : null,
    load_avg_at_start: os.loadavg().map((v) => Number(v.toFixed(2))),
  };
}

// ---------------------------------------------------------------------------------------------
// Report
// ---------------------------------------------------------------------------------------------
const fmtMs = (v, d = 3) => (v == null ? 'n/a' : v.toFixed(d));
const fmtMiB = (kb) => (kb == null ? 'n/a' : (kb / 1024).toFixed(1));

const TARGETS = {
  cold_start_median_ms: 25,
  call_median_ms: 0.2,
  peak_rss_mb: 10,  // 10^6 bytes
};

function verdict(value, target) {
  if (value == null) return 'n/a';
  if (value <= target) return `met (${((value / target) * 100).toFixed(0)} % of target)`;
  return `MISSED by ${(value - target).toFixed(3)} (${(value / target).toFixed(2)}x)`;
}

function renderTable(result) {
  const cols = result.servers.map((s) => s.label);
  const row = (name, cells) => `| ${name} | ${cells.join(' | ')} |`;
  const lines = [];
  lines.push(row('metric', cols));
  lines.push(`|---|${cols.map(() => '---:').join('|')}|`);
  const get = (fn) => result.servers.map((s) => { try { return fn(s); } catch { return 'n/a'; } });
  const { starts, calls } = result.params;
  lines.push(row(`cold start, SDK client: median / p99 ms (${starts} spawns)`,
    get((s) => `${fmtMs(s.cold_start_sdk.median, 1)} / ${fmtMs(s.cold_start_sdk.p99, 1)}`)));
  lines.push(row(`cold start, raw pipe: median / p99 ms (${starts} spawns)`,
    get((s) => `${fmtMs(s.cold_start_raw.median, 1)} / ${fmtMs(s.cold_start_raw.p99, 1)}`)));
  lines.push(row(`first \`tools/call\` of a new process, SDK client: median / p99 ms (${starts} processes)`,
    get((s) => `${fmtMs(s.first_call_sdk.median)} / ${fmtMs(s.first_call_sdk.p99)}`)));
  lines.push(row(`\`tools/call\`, SDK client: median / p99 ms (${calls} calls)`,
    get((s) => `${fmtMs(s.call_sdk.median)} / ${fmtMs(s.call_sdk.p99)}`)));
  lines.push(row(`\`tools/call\`, raw pipe: median / p99 ms (${calls} calls)`,
    get((s) => `${fmtMs(s.call_raw.median)} / ${fmtMs(s.call_raw.p99)}`)));
  lines.push(row('tool called', get((s) => `\`${s.tool}\``)));
  lines.push(row('response size, bytes', get((s) => String(s.response_bytes_raw))));
  lines.push(row('RSS after `initialize`, MiB (VmHWM, median of cold starts)',
    get((s) => fmtMiB(s.rss_after_init_kB.median))));
  lines.push(row(`peak RSS after ${calls} SDK calls, MiB (VmHWM)`, get((s) => fmtMiB(s.peak_rss_sdk.VmHWM_kB))));
  lines.push(row(`peak RSS after ${calls} raw calls, MiB (VmHWM)`, get((s) => fmtMiB(s.peak_rss_raw.VmHWM_kB))));
  return lines.join('\n');
}

function renderTargets(result) {
  const ours = result.servers.find((s) => s.key === 'tmcra');
  if (!ours) return '';
  const peakKb = Math.max(ours.peak_rss_sdk.VmHWM_kB, ours.peak_rss_raw.VmHWM_kB);
  const rssMB = (peakKb * 1024) / 1e6;  // the target is in MB (10^6 bytes), the stricter reading
  return [
    '| target (tmcra-mcp) | figure | verdict |',
    '|---|---:|---|',
    `| cold start ≤ ${TARGETS.cold_start_median_ms} ms (median, SDK client) | ${fmtMs(ours.cold_start_sdk.median, 1)} ms | ${verdict(ours.cold_start_sdk.median, TARGETS.cold_start_median_ms)} |`,
    `| \`tmcra_status\` call ≤ ${TARGETS.call_median_ms} ms (median, SDK client) | ${fmtMs(ours.call_sdk.median)} ms | ${verdict(ours.call_sdk.median, TARGETS.call_median_ms)} |`,
    `| \`tmcra_status\` call ≤ ${TARGETS.call_median_ms} ms (median, raw pipe) | ${fmtMs(ours.call_raw.median)} ms | ${verdict(ours.call_raw.median, TARGETS.call_median_ms)} |`,
    `| peak RSS ≤ ${TARGETS.peak_rss_mb} MB (VmHWM) | ${rssMB.toFixed(1)} MB (${fmtMiB(peakKb)} MiB) | ${verdict(rssMB, TARGETS.peak_rss_mb)} |`,
  ].join('\n');
}

// ---------------------------------------------------------------------------------------------
// Main
// ---------------------------------------------------------------------------------------------
async function main() {
  const opts = parseArgs(process.argv.slice(2));
  if (!fs.existsSync(opts.bin)) {
    throw new Error(`no tmcra-mcp binary at ${opts.bin}; build it with: cmake --preset bench && cmake --build --preset bench`);
  }
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'tmcra-bench-'));
  const started = new Date();
  try {
    const { servers, sdkVersion } = makeServers(opts, tmp);
    const machine = describeMachine(opts);
    const log = (...a) => console.error('[bench]', ...a);
    log(`tmcra-mcp: ${opts.bin}`);
    log(`client: @modelcontextprotocol/sdk ${sdkVersion}, node ${process.version}`);
    if (machine.load_avg_at_start[0] > 0.5) {
      log(`warning: 1-minute load average is ${machine.load_avg_at_start[0]} on ${machine.nproc} CPUs; `
        + 'other work on the machine will show in the figures (p99 first)');
    }

    // One unrecorded spawn of each server first, so the page cache holds the binaries/modules
    // for every recorded start alike ("cold" = new process, warm page cache).
    for (const s of servers) { await sdkColdStart(s); await rawColdStart(s); }

    const cold = Object.fromEntries(servers.map((s) => [s.key, { sdk: [], raw: [], rss: [], first: [] }]));
    log(`cold start: ${opts.starts} spawns per server and client kind, interleaved`);
    for (let i = 0; i < opts.starts; i += 1) {
      // Alternate the order each round so neither server always runs right after the other.
      const order = i % 2 ? [...servers].reverse() : servers;
      for (const s of order) {
        const r = await sdkColdStart(s);
        cold[s.key].sdk.push(r.ms);
        cold[s.key].first.push(r.firstCallMs);
        if (r.rssAfterInit?.VmHWM_kB) cold[s.key].rss.push(r.rssAfterInit.VmHWM_kB);
        cold[s.key].raw.push((await rawColdStart(s)).ms);
      }
    }

    const out = [];
    for (const s of servers) {
      log(`${s.label}: ${opts.warmup} warm-up + ${opts.calls} timed tools/call ${s.tool.name} (SDK client)`);
      const sdk = await sdkCalls(s, opts);
      log(`${s.label}: ${opts.warmup} warm-up + ${opts.calls} timed tools/call ${s.tool.name} (raw pipe)`);
      const raw = await rawCalls(s, opts);
      out.push({
        key: s.key,
        label: s.label,
        version: s.version,
        command: [s.command, ...s.args].join(' '),
        process_identity: sdk.identity,
        tool: s.tool.name,
        tool_arguments: s.tool.arguments,
        response_bytes_sdk: sdk.responseBytes,
        response_bytes_raw: raw.responseBytes,
        cold_start_sdk: summarize(cold[s.key].sdk),
        cold_start_raw: summarize(cold[s.key].raw),
        rss_after_init_kB: summarize(cold[s.key].rss),
        first_call_sdk: summarize(cold[s.key].first),
        call_sdk: summarize(sdk.samples),
        call_raw: summarize(raw.samples),
        status_after_init_sdk: sdk.afterInit,
        peak_rss_sdk: sdk.peak,
        peak_rss_raw: raw.peak,
        samples: {
          cold_start_sdk_ms: cold[s.key].sdk,
          cold_start_raw_ms: cold[s.key].raw,
          rss_after_init_kB: cold[s.key].rss,
          first_call_sdk_ms: cold[s.key].first,
          call_sdk_ms: sdk.samples,
          call_raw_ms: raw.samples,
        },
      });
    }

    const result = {
      benchmark: 'tmcra-mcp bench/startup_latency.mjs',
      started_at: started.toISOString(),
      finished_at: new Date().toISOString(),
      load_avg_at_end: os.loadavg().map((v) => Number(v.toFixed(2))),
      command: `node ${path.relative(REPO, fileURLToPath(import.meta.url))} ${process.argv.slice(2).join(' ')}`.trim(),
      params: { starts: opts.starts, calls: opts.calls, warmup: opts.warmup, percentile_method: 'nearest-rank', median_method: 'mean of middle two for even n' },
      client: { sdk: `@modelcontextprotocol/sdk ${sdkVersion}`, node: process.version },
      targets: TARGETS,
      machine,
      servers: out,
    };

    fs.mkdirSync(opts.out, { recursive: true });
    const file = path.join(opts.out, `${started.toISOString().replace(/[:]/g, '-').replace(/\.\d+Z$/, 'Z')}.json`);
    fs.writeFileSync(file, `${JSON.stringify(result, null, 2)}\n`);

    console.log(`## tmcra-mcp vs server-memory — ${started.toISOString()}\n`);
    console.log(`Machine: ${machine.nproc} CPU (${machine.cpu_model}), ${machine.mem_total_gib} GiB RAM, `
      + `${machine.kernel}, ${machine.distro}; ${machine.compiler}, ${machine.build_type}; node ${process.version}; `
      + `client @modelcontextprotocol/sdk ${sdkVersion}\n`);
    console.log(renderTable(result));
    const targets = renderTargets(result);
    if (targets) console.log(`\n${targets}`);
    const shown = path.relative(process.cwd(), file);
    console.log(`\nmedian / p99 (nearest rank); every sample in ${shown.startsWith('..') ? file : shown}`);
  } finally {
    fs.rmSync(tmp, { recursive: true, force: true });
  }
}

main().catch((err) => {
  console.error(`bench failed: ${err.stack || err}`);
  process.exit(1);
});
