#!/usr/bin/env node
// remote_latency.mjs — the remote-memory benchmark (bench/run_remote.sh runs it).
//
// In one run, against a real tmcra-memd over HTTPS on 127.0.0.1 (TLS verified against a test
// CA made by run_remote.sh), serving the store memory_bench built (scope "bench"):
//   * body check   — a tmcra-mcp behind a logging TLS proxy sends two tmcra_recalls; the first
//                    body has no projection, the second (tmcra-memd having said it keeps the
//                    snapshot under prompt_only) must equal, byte for byte, the one the floor
//                    sends (remote_bench body), so floor and tool ask the same thing;
//   * the floor    — remote_bench floor: one libcurl easy handle, keep-alive, HTTP/1.1, the
//                    same headers and body as HttpMemoryApi; p50/p99 of POST .../recall;
//   * tmcra_recall — the same questions through tmcra-mcp (TMCRA_BASE_URL=https://127.0.0.1:P,
//                    SSL_CERT_FILE=ca.pem, TMCRA_DEFAULT_SCOPE=bench), raw pipe (newline JSON-RPC,
//                    no SDK) and the official SDK client, in rounds interleaved with the floor;
//                    the client's overhead = tmcra_recall p50 (raw pipe) − floor p50, both
//                    clocks stopped alike: the floor's when libcurl hands over the answer's
//                    last byte, the raw pipe's when the answer line's last byte reaches Node
//                    (before decoding and JSON.parse; the parsed figure is reported beside it);
//                    then, as a diagnostic, the same rounds with tmcra-memd pinned to a CPU of
//                    its own and the clients to the others (split placement, as if tmcra-memd
//                    ran on another machine; needs taskset; --skip split leaves it out);
//   * lean host    — a diagnostic: remote_bench alternate runs tmcra-mcp itself, as leanly as the
//                    floor runs libcurl (socketpairs, one write per request, 1 MiB reads, no
//                    event loop), in short blocks alternating with the floor's from one process;
//                    what Node adds to the raw pipe's figure shows as the difference;
//   * throughput   — remote_bench throughput: 1 client for reference, then in each of R rounds
//                    (default 3) C clients (default 16), each its own keep-alive handle, for T
//                    seconds, and as a diagnostic the same C clients against a second
//                    tmcra-memd on the same file started with --gzip always (the default does
//                    not compress for loopback clients), and a third started with
//                    --postings-cache-mib 0 (each recall walks its words' doclists, as the
//                    benchmark's repeated questions otherwise never make it); recalls/s,
//                    p50/p99, and the CPU
//                    tmcra-memd and the machine used meanwhile. The verdict takes the median
//                    round: the host's speed can drift by a fifth within the hour. Last, a
//                    diagnostic run of C clients while one ingest every 250 ms is written;
//   * commit       — tmcra_turn_prepare then tmcra_turn_commit (timed), eventual and
//                    read_your_writes, raw pipe and SDK client, on the same tmcra-memd;
//   * delivery     — lifecycle_bench delivery --remote: 10,000 pending outbox items drained
//                    over HTTPS into a second tmcra-memd on an empty store (ingest/batch), and
//                    the same into an embedded store for reference.
// Prints a Markdown summary on stdout, progress on stderr, and writes every sample and a
// description of the machine to bench/results/remote-<timestamp>.json. Never fails on a figure;
// exits non-zero only when a server or driver fails or answers with an error.
//
// Usage: node remote_latency.mjs --bin TMCRA_MCP --memd TMCRA_MEMD --remote-driver REMOTE_BENCH
//          --lifecycle-driver LIFECYCLE_BENCH --work DIR --certs DIR --store DIR --questions FILE
//          [--store-report FILE] [--rounds R] [--calls N] [--warmup N] [--turns N] [--gap-ms MS]
//          [--clients C] [--seconds T] [--throughput-rounds R] [--memd-threads N]
//          [--memd-concurrency N]
//          [--delivery-items N] [--skip recall,lean,split,throughput,commit,delivery] [--out DIR]
import { execFileSync, spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import https from 'node:https';
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import readline from 'node:readline';
import { fileURLToPath } from 'node:url';

import {
  assistantText, connectRaw, connectSdk, describeMachine as describeMachineBase, f, readFileOr, runOr,
  sleep, summarize, userText, verdict,
} from './bench_lib.mjs';

const HERE = path.dirname(fileURLToPath(import.meta.url));

const SCOPE = 'bench';

const NO_POSTINGS_CACHE = 'tmcra-memd `--postings-cache-mib 0` (no postings kept: each recall walks its words\' doclists)';
const TARGETS = { recall_overhead_ms: 0.3, delivery_items_per_second: 2000, recalls_per_second: 2000 };

function parseArgs(argv) {
  const o = {
    bin: null, memd: null, remoteDriver: null, lifecycleDriver: null, work: null, certs: null,
    store: null, questions: null, storeReport: null, rounds: 4, calls: 400, warmup: 30, turns: 200,
    gapMs: 100, clients: 16, seconds: 10, throughputRounds: 3, memdThreads: 32, memdConcurrency: 32,
    deliveryItems: 10000, skip: new Set(), out: path.join(HERE, 'results'),
  };
  for (let i = 0; i < argv.length; i += 1) {
    const a = argv[i];
    const next = () => {
      if (i + 1 >= argv.length) throw new Error(`${a} needs a value`);
      i += 1;
      return argv[i];
    };
    const count = () => {
      const v = next();
      const n = Number.parseInt(v, 10);
      if (!Number.isInteger(n) || n < 0 || n > 1_000_000) throw new Error(`${a}: bad count '${v}'`);
      return n;
    };
    switch (a) {
      case '--bin': o.bin = path.resolve(next()); break;
      case '--memd': o.memd = path.resolve(next()); break;
      case '--remote-driver': o.remoteDriver = path.resolve(next()); break;
      case '--lifecycle-driver': o.lifecycleDriver = path.resolve(next()); break;
      case '--work': o.work = path.resolve(next()); break;
      case '--certs': o.certs = path.resolve(next()); break;
      case '--store': o.store = path.resolve(next()); break;
      case '--questions': o.questions = path.resolve(next()); break;
      case '--store-report': o.storeReport = path.resolve(next()); break;
      case '--rounds': o.rounds = Math.max(1, count()); break;
      case '--calls': o.calls = Math.max(1, count()); break;
      // At least one: the warm-up is also where tmcra-mcp learns the projection the floor uses.
      case '--warmup': o.warmup = Math.max(1, count()); break;
      case '--turns': o.turns = Math.max(1, count()); break;
      case '--gap-ms': o.gapMs = count(); break;
      case '--clients': o.clients = Math.max(1, count()); break;
      case '--seconds': o.seconds = Math.max(1, count()); break;
      case '--throughput-rounds': o.throughputRounds = Math.max(1, count()); break;
      case '--memd-threads': o.memdThreads = Math.max(1, count()); break;
      case '--memd-concurrency': o.memdConcurrency = Math.max(1, count()); break;
      case '--delivery-items': o.deliveryItems = Math.max(1, count()); break;
      case '--skip': for (const s of next().split(',')) o.skip.add(s.trim()); break;
      case '--out': o.out = path.resolve(next()); break;
      default: throw new Error(`unknown argument '${a}'`);
    }
  }
  for (const k of ['bin', 'memd', 'remoteDriver', 'lifecycleDriver', 'work', 'certs', 'store', 'questions']) {
    if (!o[k]) throw new Error(`--${k.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`)} is required`);
  }
  return o;
}

const log = (...a) => console.error('[remote]', ...a);

/** Median (mean of the two middle values for even n) and nearest-rank percentiles. */

/** Runs a C++ driver; its stdout's last line is one JSON object. */
function driver(bin, args, timeoutMs, env = undefined) {
  const r = spawnSync(bin, args, { encoding: 'utf8', timeout: timeoutMs, maxBuffer: 256 << 20, env });
  if (r.status !== 0) {
    throw new Error(`${path.basename(bin)} ${args.join(' ')} failed (status ${r.status}, `
      + `signal ${r.signal}): ${r.stderr.slice(-2000)} ${r.stdout.slice(-2000)}`);
  }
  return JSON.parse(r.stdout.trim().split('\n').pop());
}

/** Busy and total jiffies of the whole machine (/proc/stat), and of one process. */
function cpuJiffies() {
  const f = readFileOr('/proc/stat').split('\n')[0].trim().split(/\s+/).slice(1).map(Number);
  const idle = f[3] + (f[4] || 0);
  const total = f.reduce((a, b) => a + b, 0);
  return { busy: total - idle, total };
}
function processJiffies(pid) {
  const stat = readFileOr(`/proc/${pid}/stat`);
  const rest = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return Number(rest[11]) + Number(rest[12]);  // utime + stime (fields 14 and 15)
}
const HZ = Number(runOr('getconf', ['CLK_TCK'], '100')) || 100;

/** Other processes using CPU right now (not ours): what ran concurrently. */
function busyProcesses() {
  const out = runOr('ps', ['-eo', 'pid,ppid,pcpu,etimes,comm', '--sort=-pcpu', '--no-headers']) || '';
  const mine = new Set([String(process.pid)]);
  return out.split('\n').map((l) => l.trim().split(/\s+/)).filter((f) => f.length >= 5)
    .filter((f) => Number(f[2]) >= 5 && !mine.has(f[0]) && !mine.has(f[1]))
    .slice(0, 8).map((f) => `${f[4]} (pid ${f[0]}, ${f[2]} % CPU over its ${f[3]} s)`);
}

function describeMachine(opts) {
  return {
    ...describeMachineBase(opts.bin),
    libcurl: (runOr('curl-config', ['--version']) || '').trim() || null,
    openssl: runOr('openssl', ['version']),
    busy_at_start: busyProcesses(),
  };
}

// ---- tmcra-memd -----------------------------------------------------------------------------

function createKey(opts, dataDir, file) {
  const out = spawnSync(opts.memd, ['keys', 'create', '--data-dir', dataDir, '--label', 'remote bench'],
    { encoding: 'utf8', env: { PATH: process.env.PATH, TMCRA_LOG_LEVEL: 'warn' } });
  if (out.status !== 0) throw new Error(`tmcra-memd keys create failed: ${out.stderr}`);
  const key = out.stdout.trim().split('\n').pop().trim();
  if (!/^tmcra_[A-Za-z0-9]+\.[A-Za-z0-9_-]+$/.test(key)) throw new Error('keys create printed no key');
  fs.writeFileSync(file, `${key}\n`, { mode: 0o600 });
  fs.chmodSync(file, 0o600);
  return key;
}

async function startMemd(opts, dataDir, label, extra = []) {
  const certs = { cert: path.join(opts.certs, 'leaf.pem'), key: path.join(opts.certs, 'leaf.key') };
  const args = ['serve', '--data-dir', dataDir, '--listen', '127.0.0.1:0', '--tls-cert', certs.cert,
    '--tls-key', certs.key, '--threads', String(opts.memdThreads),
    '--max-concurrency', String(opts.memdConcurrency), ...extra];
  // warn: no access line per request (they would go through a pipe to this process).
  const proc = spawn(opts.memd, args, {
    env: { PATH: process.env.PATH, TMCRA_LOG_LEVEL: 'warn' }, stdio: ['ignore', 'pipe', 'pipe'],
  });
  let err = '';
  proc.stderr.on('data', (d) => { err = (err + d).slice(-20_000); });
  const exited = new Promise((resolve) => proc.on('exit', (code, signal) => resolve({ code, signal })));
  const url = await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${label}: tmcra-memd not ready in 60 s:\n${err}`)), 60_000);
    const rl = readline.createInterface({ input: proc.stdout });
    rl.on('line', (line) => {
      try {
        const m = JSON.parse(line);
        if (m.listening) { clearTimeout(timer); resolve(m.listening); }
      } catch { /* not the readiness line */ }
    });
    exited.then((x) => { clearTimeout(timer); reject(new Error(`${label}: tmcra-memd exited ${JSON.stringify(x)}:\n${err}`)); });
  });
  log(`${label}: tmcra-memd ${url} (pid ${proc.pid}, ${args.slice(args.indexOf('--threads')).join(' ')})`);
  return {
    url, pid: proc.pid, args, stderr: () => err,
    async stop() {
      if (proc.exitCode === null && proc.signalCode === null) proc.kill('SIGTERM');
      const r = await Promise.race([exited, sleep(15_000).then(() => null)]);
      if (!r) { proc.kill('SIGKILL'); return exited; }
      return r;
    },
  };
}

// ---- MCP sessions ---------------------------------------------------------------------------

function remoteEnv(opts, memd, key, label) {
  const home = path.join(opts.work, `home-${label}`);
  fs.mkdirSync(home, { recursive: true });
  return {
    PATH: process.env.PATH ?? '/usr/bin:/bin',
    TMCRA_LOG_LEVEL: 'warn',
    HOME: home,
    XDG_CONFIG_HOME: path.join(home, '.config'),
    XDG_DATA_HOME: path.join(home, '.local', 'share'),
    XDG_STATE_HOME: path.join(home, '.local', 'state'),
    XDG_CACHE_HOME: path.join(home, '.cache'),
    TMCRA_DATA_DIR: path.join(home, 'tmcra-data'),  // the outbox and controls
    TMCRA_API_KEY: key,
    TMCRA_BASE_URL: memd.url,
    SSL_CERT_FILE: path.join(opts.certs, 'ca.pem'),
    TMCRA_DEFAULT_SCOPE: SCOPE,
  };
}

const connect = (kind, opts, env, label) => (kind === 'sdk'
  ? connectSdk(opts.bin, env, label, 'tmcra-remote-bench')
  : connectRaw(opts.bin, env, label, 'tmcra-remote-bench-raw'));

// ---- body check: what tmcra_recall really sends ----------------------------------------------

/** A TLS proxy in front of tmcra-memd that records every request (method, path, headers, body). */
async function loggingProxy(opts, upstream) {
  const ca = fs.readFileSync(path.join(opts.certs, 'ca.pem'));
  const agent = new https.Agent({ keepAlive: true, ca });
  const seen = [];
  const up = new URL(upstream);
  const server = https.createServer({
    cert: fs.readFileSync(path.join(opts.certs, 'leaf.pem')),
    key: fs.readFileSync(path.join(opts.certs, 'leaf.key')),
  }, async (req, res) => {
    const chunks = [];
    for await (const c of req) chunks.push(c);
    const body = Buffer.concat(chunks);
    const headers = { ...req.headers };
    seen.push({ method: req.method, path: req.url, headers: Object.keys(headers).sort(), body: body.toString('utf8') });
    const r = https.request({ host: up.hostname, port: up.port, method: req.method, path: req.url,
      headers: { ...headers, host: up.host }, agent }, (answer) => {
      res.writeHead(answer.statusCode, answer.headers);
      answer.pipe(res);
    });
    r.on('error', (e) => { res.writeHead(502); res.end(String(e)); });
    r.end(body);
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `https://127.0.0.1:${server.address().port}`,
    seen,
    close: async () => { server.closeAllConnections?.(); await new Promise((r) => server.close(r)); agent.destroy(); },
  };
}

async function bodyCheck(opts, memd, key, question) {
  const proxy = await loggingProxy(opts, memd.url);
  const session = await connect('raw', opts, remoteEnv(opts, { url: proxy.url }, key, 'bodycheck'), 'body check');
  try {
    // Twice: the first answer tells tmcra-mcp that tmcra-memd keeps the snapshot under
    // prompt_only, which it then asks for (the body of every later call, and the floor's).
    await session.call('tmcra_recall', { query: question });
    await session.call('tmcra_recall', { query: question });
  } finally {
    await session.close();
    await proxy.close();
  }
  const recalls = proxy.seen.filter((s) => s.method === 'POST' && s.path === `/v1/scopes/${SCOPE}/recall`);
  if (recalls.length !== 2) throw new Error(`body check: expected two recalls, saw ${JSON.stringify(proxy.seen)}`);
  const floorBody = execFileSync(opts.remoteDriver, ['body', '--query', question], { encoding: 'utf8' }).replace(/\n$/, '');
  const first = JSON.parse(recalls[0].body);
  if (first.response_projection !== undefined || JSON.parse(floorBody).response_projection !== 'prompt_only') {
    throw new Error(`body check: the first recall asks for ${first.response_projection}, the floor for `
      + `${JSON.parse(floorBody).response_projection}: ${recalls[0].body} / ${floorBody}`);
  }
  const sent = recalls[1];
  const same = sent.body === floorBody;
  log(`body check: tmcra_recall sent ${sent.body.length} bytes, the floor sends ${floorBody.length}: `
    + `${same ? 'identical' : 'DIFFERENT'}`);
  if (!same) throw new Error(`the floor's recall body differs from tmcra_recall's:\n tool:  ${sent.body}\n floor: ${floorBody}`);
  return { identical: same, tool_body: sent.body, tool_headers: sent.headers, requests_seen: proxy.seen.length };
}

// ---- the floor and tmcra_recall --------------------------------------------------------------

async function recallOverhead(opts, memd, key, keyFile, questions) {
  const Q = questions.length;
  const perRound = Math.ceil(opts.calls / opts.rounds);
  const floorArgs = ['floor', '--url', memd.url, '--key-file', keyFile, '--ca', path.join(opts.certs, 'ca.pem'),
    '--scope', SCOPE, '--questions', opts.questions];
  const sessions = {};
  // raw_last: the raw pipe's clock stopped where the floor's stops (last byte received).
  const samples = { floor: [], raw: [], raw_last: [], sdk: [] };
  const asked = { floor: [], raw: [], raw_last: [], sdk: [] };
  const bytes = { raw: 0 };
  const cpu = { raw: 0, sdk: 0 };  // tmcra-mcp's CPU (jiffies) during the timed calls
  let floorInfo = null;
  try {
    for (const kind of ['raw', 'sdk']) {
      sessions[kind] = await connect(kind, opts, remoteEnv(opts, memd, key, `recall-${kind}`), `recall (${kind})`);
      log(`recall (${kind}): ${opts.warmup} warm-up calls`);
      for (let i = 0; i < opts.warmup; i += 1) {
        await sessions[kind].call('tmcra_recall', { query: questions[(Q - 1 - i + Q * 8) % Q].question });
      }
    }
    for (let round = 0; round < opts.rounds; round += 1) {
      const offset = (round * perRound) % Q;
      const order = round % 2 ? ['sdk', 'raw', 'floor'] : ['floor', 'raw', 'sdk'];
      log(`round ${round + 1}/${opts.rounds}: ${order.join(', ')} ×${perRound} (questions from #${offset})`);
      for (const kind of order) {
        if (kind === 'floor') {
          const f = driver(opts.remoteDriver, [...floorArgs, '--iterations', String(perRound), '--warmup', '10',
            '--offset', String(offset)], 600_000);
          samples.floor.push(...f.samples_ms);
          asked.floor.push(...f.questions);
          floorInfo = { connections: (floorInfo?.connections ?? 0) + f.connections,
            mean_answer_bytes: f.mean_answer_bytes, mean_wire_bytes: f.mean_wire_bytes,
            cpu_ms: (floorInfo?.cpu_ms ?? 0) + f.cpu_ms_per_call * f.samples_ms.length };
          continue;
        }
        const cpu0 = processJiffies(sessions[kind].pid);
        for (let i = 0; i < perRound; i += 1) {
          const q = (offset + i) % Q;
          const t0 = performance.now();
          const r = await sessions[kind].call('tmcra_recall', { query: questions[q].question });
          const ms = performance.now() - t0;
          if (typeof r.value.injectable_context?.content !== 'string') throw new Error('tmcra_recall: no injectable_context');
          samples[kind].push(ms);
          asked[kind].push(q);
          if (r.bytes) bytes.raw += r.bytes;
          if (r.lastByteMs !== undefined) {
            samples.raw_last.push(r.lastByteMs);
            asked.raw_last.push(q);
          }
        }
        cpu[kind] += processJiffies(sessions[kind].pid) - cpu0;
      }
    }
  } finally {
    for (const s of Object.values(sessions)) await s.close();
  }
  // Paired: the same question in the same round, tool minus floor.
  const paired = (kind) => {
    const diffs = [];
    for (let i = 0; i < samples[kind].length && i < samples.floor.length; i += 1) {
      if (asked[kind][i] === asked.floor[i]) diffs.push(samples[kind][i] - samples.floor[i]);
    }
    return summarize(diffs);
  };
  const floor = summarize(samples.floor);
  const out = { per_round: perRound, floor: { ...floor, ...floorInfo,
    cpu_ms_per_call: floorInfo ? floorInfo.cpu_ms / Math.max(1, samples.floor.length) : null,
    samples_ms: samples.floor, questions: asked.floor } };
  for (const kind of ['raw', 'raw_last', 'sdk']) {
    const s = summarize(samples[kind]);
    out[kind] = {
      ...s,
      overhead_p50_ms: s.p50 - floor.p50,
      overhead_p99_ms: s.p99 - floor.p99,
      paired_overhead: paired(kind),
      mean_answer_bytes: kind === 'raw' ? Math.round(bytes.raw / samples.raw.length) : null,
      server_cpu_ms_per_call: kind === 'raw_last' ? null
        : ((cpu[kind] / HZ) * 1000) / Math.max(1, samples[kind].length),
      samples_ms: samples[kind],
      questions: asked[kind],
    };
  }
  out.paced = pacedFloor(opts, floorArgs, perRound, out.raw_last.p50 - floor.p50);
  return out;
}

// Diagnostic: the floor's client asks back to back, so tmcra-memd answers it from a CPU that
// was busy a moment ago; behind tmcra-mcp it waits, between an answer and the next request, for
// about the measured overhead longer. The floor is run again pausing that long before each
// request (outside its clock), in blocks alternating with the plain floor: the difference is
// what the idle gap alone costs the next answer on this machine, a part of the overhead that
// no work in tmcra-mcp can remove except by being shorter. Not the verdict.
function pacedFloor(opts, floorArgs, perRound, overheadMs) {
  const pauseUs = Math.max(0, Math.round(overheadMs * 1000));
  const samples = { tight: [], paced: [] };
  const blocks = ['tight', 'paced', 'paced', 'tight'];
  log(`paced floor (diagnostic): ${blocks.join(', ')} ×${perRound}, pausing ${pauseUs} µs before each paced request`);
  blocks.forEach((kind, b) => {
    const f = driver(opts.remoteDriver, [...floorArgs, '--iterations', String(perRound), '--warmup', '10',
      '--offset', String((b * perRound) % 1000), '--pause-us', String(kind === 'paced' ? pauseUs : 0)], 600_000);
    samples[kind].push(...f.samples_ms);
  });
  const tight = summarize(samples.tight);
  const paced = summarize(samples.paced);
  return { pause_us: pauseUs, tight, paced, idle_cost_p50_ms: paced.p50 - tight.p50 };
}

// Diagnostic: tmcra_recall from a host as lean as the floor's client. remote_bench alternate
// starts a tmcra-mcp of its own (the same environment as the raw pipe's, the key from the key
// file) on socketpairs, writes each request with one write(2) and reads the answer with 1 MiB
// reads up to its newline (no event loop, nothing decoded on the clock), and alternates short
// blocks of it with blocks of the floor from the same process, so a drift of the host's speed
// between blocks falls on both. What Node adds to the raw pipe's figure is the difference;
// the verdict stays the raw pipe's.
function leanHost(opts, memd, key, keyFile) {
  const blocks = Math.max(4, Math.round(opts.calls / 10));
  const args = ['alternate', '--url', memd.url, '--key-file', keyFile, '--ca', path.join(opts.certs, 'ca.pem'),
    '--scope', SCOPE, '--questions', opts.questions, '--bin', opts.bin, '--blocks', String(blocks),
    '--block-calls', '40', '--block-warmup', '3', '--warmup', String(opts.warmup)];
  log(`lean host (diagnostic): remote_bench alternate, ${blocks} blocks of 40 (+3) calls of each`);
  // The driver reads the key from the key file and gives it to tmcra-mcp itself.
  const { TMCRA_API_KEY: _unused, ...env } = remoteEnv(opts, memd, key, 'recall-lean');
  const r = driver(opts.remoteDriver, args, 600_000, env);
  return {
    blocks: r.blocks, block_calls: r.block_calls, connections: r.connections, stdio: r.stdio,
    floor: summarize(r.floor.samples_ms), tool: summarize(r.tool.samples_ms),
    overhead_p50_ms: r.overhead_p50_ms, paired_median_ms: r.paired_median_ms,
    block_median_ms: r.block_median_ms, block_diffs_ms: r.block_diffs_ms,
    mcp_cpu_ms_per_call: r.mcp_cpu_ms_per_call, mean_answer_bytes: r.mean_answer_bytes,
    floor_samples_ms: r.floor.samples_ms, tool_samples_ms: r.tool.samples_ms,
  };
}

// The same rounds with tmcra-memd on a CPU of its own (the last) and every client (this
// process, the floor's driver, tmcra-mcp) on the others, as when tmcra-memd runs on another
// machine: its caches are not shared with the client side, and the client side's hand-offs
// (Node -> tmcra-mcp -> Node) stay on one CPU. A diagnostic beside the shared-placement figure,
// which stays the verdict's. Needs >= 2 CPUs and taskset (util-linux); null when either is
// missing. Affinities are restored afterwards, also on failure.
async function splitPlacement(opts, memd, key, keyFile, questions) {
  const n = os.cpus().length;
  if (n < 2) { log('split placement: skipped (one CPU)'); return null; }
  const pin = (pid, cpus) => execFileSync('taskset', ['-a', '-p', '-c', cpus, String(pid)], { stdio: 'ignore' });
  const all = `0-${n - 1}`;
  const clientCpus = n === 2 ? '0' : `0-${n - 2}`;
  try {
    pin(memd.pid, String(n - 1));
    pin(process.pid, clientCpus);
  } catch (err) {
    log(`split placement: skipped (taskset: ${err.message.split('\n')[0]})`);
    try { pin(memd.pid, all); pin(process.pid, all); } catch { /* as it was */ }
    return null;
  }
  log(`split placement: tmcra-memd on CPU ${n - 1}, clients on CPU ${clientCpus}`);
  try {
    return { memd_cpus: String(n - 1), client_cpus: clientCpus,
      ...await recallOverhead(opts, memd, key, keyFile, questions) };
  } finally {
    pin(memd.pid, all);
    pin(process.pid, all);
  }
}

// ---- throughput ----------------------------------------------------------------------------

function throughput(opts, memd, keyFile, clients, seconds, extra = []) {
  const args = ['throughput', '--url', memd.url, '--key-file', keyFile, '--ca', path.join(opts.certs, 'ca.pem'),
    '--scope', SCOPE, '--questions', opts.questions, '--clients', String(clients), '--seconds', String(seconds),
    ...extra];
  const m0 = cpuJiffies();
  const p0 = processJiffies(memd.pid);
  const r = driver(opts.remoteDriver, args, (seconds + 120) * 1000);
  const m1 = cpuJiffies();
  const p1 = processJiffies(memd.pid);
  // Includes the warm-up and connection set-up (a fraction of a second).
  r.memd_cpu_seconds = (p1 - p0) / HZ;
  r.memd_cpu_ms_per_recall = r.recalls > 0 ? ((p1 - p0) / HZ / r.recalls) * 1000 : null;
  r.machine_busy_fraction = (m1.busy - m0.busy) / Math.max(1, m1.total - m0.total);
  r.memd_cpus_used = (p1 - p0) / HZ / r.seconds;
  return r;
}

/**
 * C clients against the main tmcra-memd and against a second one on the same file started with
 * --gzip always (what compressing every answer costs, as for a client on another machine; the
 * default, --gzip auto, does not compress for loopback clients such as these), and a third with
 * --postings-cache-mib 0 (the benchmark's 200 questions repeat, so the default server finds
 * nearly every word's postings kept; this one walks them on every recall, as a server whose
 * recalls never share a word would), for `rounds` rounds, each starting with the next server, so
 * that a drift of the host's speed shows in all and in the spread.
 */
async function throughputRounds(opts, memd, keyFile, clients, seconds, rounds) {
  const other = await startMemd(opts, opts.store, 'gzip always', ['--no-job-worker', '--gzip', 'always']);
  const uncached = await startMemd(opts, opts.store, 'no postings cache', ['--no-job-worker', '--postings-cache-mib', '0']);
  const runs = [];
  try {
    const servers = [
      { memd, name: 'the main tmcra-memd' },
      { memd: other, name: 'tmcra-memd --gzip always (diagnostic)',
        variant: 'tmcra-memd `--gzip always` (every answer compressed, as for a remote client)' },
      { memd: uncached, name: 'tmcra-memd --postings-cache-mib 0', variant: NO_POSTINGS_CACHE },
    ];
    for (let round = 1; round <= rounds; round += 1) {
      // Each round starts with the next server, so that no server always runs first.
      for (let k = 0; k < servers.length; k += 1) {
        const s = servers[(round - 1 + k) % servers.length];
        log(`throughput: ${clients} clients, ${s.name}, ${seconds} s (round ${round} of ${rounds})`);
        const r = throughput(opts, s.memd, keyFile, clients, seconds);
        if (s.variant) r.variant = s.variant;
        runs.push({ ...r, round });
      }
    }
  } finally {
    await other.stop();
    await uncached.stop();
  }
  // A live server takes writes while it answers: one ingest every 250 ms during the window.
  // Its worker compacts only after 0.5 s without a job, so the new segments stay for the run.
  log(`throughput: ${clients} clients, ${seconds} s, one ingest every 250 ms (diagnostic)`);
  const live = throughput(opts, memd, keyFile, clients, seconds, ['--write-every-ms', '250']);
  const writes = Object.entries(live.writes ?? {}).map(([k, v]) => `${k} ×${v}`).join(', ');
  live.variant = `one ingest every 250 ms during the run (${writes || 'no writes'}; new segments stay until writes pause)`;
  runs.push(live);
  return runs;
}


// ---- commit --------------------------------------------------------------------------------

async function commitLatency(opts, memd, key) {
  const sessions = [];
  const runId = Date.now().toString(36);
  try {
    for (const kind of ['raw', 'sdk']) {
      const server = await connect(kind, opts, remoteEnv(opts, memd, key, `commit-${kind}`), `commit (${kind})`);
      let turn = 0;
      const s = { kind, server, samples: { eventual: [], read_your_writes: [] },
        statuses: { eventual: {}, read_your_writes: {} }, bytes: { eventual: 0, read_your_writes: 0 } };
      s.oneTurn = async (consistency, timed) => {
        turn += 1;
        const id = `remote-${runId}-${kind}-${turn}`;
        await server.call('tmcra_turn_prepare', {
          turn_id: id, session_id: `remote-bench-${kind}-${Math.floor(turn / 20)}`,
          user_message_id: `u${turn}`, user_content: userText(turn),
        });
        const t0 = performance.now();
        const r = await server.call('tmcra_turn_commit', {
          turn_id: id, assistant_message_id: `a${turn}`, assistant_content: assistantText(turn), consistency,
        });
        const ms = performance.now() - t0;
        if (timed) {
          s.samples[consistency].push(ms);
          s.statuses[consistency][r.value.status] = (s.statuses[consistency][r.value.status] ?? 0) + 1;
          s.bytes[consistency] += Buffer.byteLength(JSON.stringify(r.value));
        }
        if (opts.gapMs > 0) await sleep(opts.gapMs);
      };
      sessions.push(s);
    }
    const warm = Math.min(opts.warmup, 10);
    log(`commit: ${warm} warm-up turns per mode and client`);
    for (const s of sessions) {
      for (let i = 0; i < warm; i += 1) {
        await s.oneTurn('eventual', false);
        await s.oneTurn('read_your_writes', false);
      }
    }
    const perRound = Math.ceil(opts.turns / opts.rounds);
    for (let round = 0; round < opts.rounds; round += 1) {
      log(`commit round ${round + 1}/${opts.rounds}: per client eventual ×${perRound}, read_your_writes ×${perRound}`);
      const modes = round % 2 ? ['read_your_writes', 'eventual'] : ['eventual', 'read_your_writes'];
      const order = round % 2 ? [...sessions].reverse() : sessions;
      for (const s of order) {
        for (const mode of modes) {
          for (let i = 0; i < perRound && s.samples[mode].length < opts.turns; i += 1) await s.oneTurn(mode, true);
        }
      }
    }
  } finally {
    for (const s of sessions) await s.server.close();
  }
  const out = {};
  for (const s of sessions) {
    out[s.kind] = {};
    for (const [mode, values] of Object.entries(s.samples)) {
      out[s.kind][mode] = { ...summarize(values), statuses: s.statuses[mode],
        mean_result_bytes: Math.round(s.bytes[mode] / Math.max(1, values.length)), samples_ms: values };
    }
  }
  return out;
}

// ---- delivery ------------------------------------------------------------------------------

async function delivery(opts) {
  const dataDir = path.join(opts.work, 'memd-delivery');
  const keyFile = path.join(opts.work, 'delivery.key');
  createKey(opts, dataDir, keyFile);
  const memd = await startMemd(opts, dataDir, 'delivery');
  let remote;
  try {
    log(`delivery over HTTPS: ${opts.deliveryItems} pending items → ${memd.url} (empty store)`);
    const p0 = processJiffies(memd.pid);
    remote = driver(opts.lifecycleDriver, ['delivery', '--dir', path.join(opts.work, 'delivery-remote'),
      '--items', String(opts.deliveryItems), '--remote', memd.url, '--key-file', keyFile,
      '--ca', path.join(opts.certs, 'ca.pem'), '--verify-store', path.join(dataDir, 'memory.db')], 3_600_000);
    remote.memd_cpu_seconds = (processJiffies(memd.pid) - p0) / HZ;
  } finally {
    await memd.stop();
  }
  log(`delivery, embedded (reference): ${opts.deliveryItems} pending items`);
  const embedded = driver(opts.lifecycleDriver, ['delivery', '--dir', path.join(opts.work, 'delivery-embedded'),
    '--items', String(opts.deliveryItems)], 3_600_000);
  for (const d of ['delivery-remote', 'delivery-embedded', 'memd-delivery']) {
    fs.rmSync(path.join(opts.work, d), { recursive: true, force: true });
  }
  return { remote, embedded };
}

// ---- report --------------------------------------------------------------------------------

const KIND_LABEL = {
  raw_last: 'raw pipe, clock to the last byte (as the floor\'s; the verdict)',
  raw: 'raw pipe, clock to the parsed answer',
  sdk: 'SDK client',
};

function render(result) {
  const lines = [];
  const r = result.recall;
  const store = result.store_report;
  if (r) {
    lines.push(`Recall on the ${store?.messages ?? '?'}-message store, scope "bench", the same body and `
      + `questions (body check: ${result.body_check?.identical ? 'identical bytes' : 'n/a'}):`);
    lines.push('');
    lines.push('| figure | p50 ms | p99 ms | p50 − floor p50 | paired median (same question) | tmcra-mcp CPU ms/call | answer bytes |');
    lines.push('|---|---:|---:|---:|---:|---:|---:|');
    lines.push(`| floor: libcurl keep-alive POST …/recall (${r.floor.n}; ${r.floor.connections} connections) | `
      + `${f(r.floor.p50, 3)} | ${f(r.floor.p99, 3)} | 0 | 0 | (driver ${f(r.floor.cpu_ms_per_call)}) | ${r.floor.mean_answer_bytes} (${r.floor.mean_wire_bytes} on the wire) |`);
    for (const kind of ['raw_last', 'raw', 'sdk']) {
      const k = r[kind];
      if (!k?.n) continue;
      lines.push(`| \`tmcra_recall\`, ${KIND_LABEL[kind]} (${k.n}) | ${f(k.p50, 3)} | `
        + `${f(k.p99, 3)} | ${f(k.overhead_p50_ms, 3)} | ${f(k.paired_overhead.p50, 3)} | ${k.server_cpu_ms_per_call == null ? '' : f(k.server_cpu_ms_per_call)} | ${k.mean_answer_bytes ?? ''} |`);
    }
    if (r.paced) {
      const pc = r.paced;
      lines.push(`| *paced floor (diagnostic): the floor again, in blocks alternating with itself, pausing ${pc.pause_us} µs (the overhead above) before each request* | | | | | | |`);
      lines.push(`| floor, back to back (${pc.tight.n}) | ${f(pc.tight.p50, 3)} | ${f(pc.tight.p99, 3)} | | | | |`);
      lines.push(`| floor, paced (${pc.paced.n}) | ${f(pc.paced.p50, 3)} | ${f(pc.paced.p99, 3)} | ${f(pc.idle_cost_p50_ms, 3)} over back to back: the idle gap's cost | | | |`);
    }
    const ln = result.recall_lean;
    if (ln) {
      lines.push(`| *lean host (diagnostic): \`remote_bench alternate\`, ${ln.blocks} blocks of ${ln.block_calls} calls alternating with as many of the floor from one C++ process, tmcra-mcp on ${ln.stdio === 'pipe' ? 'pipes' : 'socketpairs'}, 1 MiB reads* | | | | | | |`);
      lines.push(`| floor, in those blocks (${ln.floor.n}; ${ln.connections} connection${ln.connections === 1 ? '' : 's'}) | ${f(ln.floor.p50, 3)} | ${f(ln.floor.p99, 3)} | 0 | 0 | | |`);
      lines.push(`| \`tmcra_recall\`, lean host, clock to the last byte (${ln.tool.n}) | ${f(ln.tool.p50, 3)} | ${f(ln.tool.p99, 3)} | `
        + `${f(ln.overhead_p50_ms, 3)} (blocks' median ${f(ln.block_median_ms, 3)}) | ${f(ln.paired_median_ms, 3)} | ${f(ln.mcp_cpu_ms_per_call)} | ${ln.mean_answer_bytes} |`);
    }
    if (store) {
      lines.push(`| engine recall alone (memory_bench, in-process) | ${f(store.recall_p50_ms, 3)} | ${f(store.recall_p99_ms, 3)} | | | | |`);
    }
    const sp = result.recall_split;
    if (sp) {
      lines.push(`| *split placement (diagnostic): tmcra-memd on CPU ${sp.memd_cpus}, clients on CPU ${sp.client_cpus}* | | | | | | |`);
      lines.push(`| floor, split (${sp.floor.n}) | ${f(sp.floor.p50, 3)} | ${f(sp.floor.p99, 3)} | 0 | 0 | (driver ${f(sp.floor.cpu_ms_per_call)}) | |`);
      for (const kind of ['raw_last', 'raw', 'sdk']) {
        const k = sp[kind];
        if (!k?.n) continue;
        lines.push(`| \`tmcra_recall\`, ${KIND_LABEL[kind]}, split (${k.n}) | ${f(k.p50, 3)} | `
          + `${f(k.p99, 3)} | ${f(k.overhead_p50_ms, 3)} | ${f(k.paired_overhead.p50, 3)} | ${k.server_cpu_ms_per_call == null ? "" : f(k.server_cpu_ms_per_call)} | |`);
      }
      if (sp.paced) {
        lines.push(`| floor, split, back to back / paced ${sp.paced.pause_us} µs (${sp.paced.tight.n} each) | ${f(sp.paced.tight.p50, 3)} / ${f(sp.paced.paced.p50, 3)} | | ${f(sp.paced.idle_cost_p50_ms, 3)}: the idle gap's cost | | | |`);
      }
    }
    lines.push('');
  }
  const t = result.throughput;
  if (t) {
    lines.push('| tmcra-memd recall throughput | recalls/s | p50 ms | p99 ms | tmcra-memd CPUs used | clients\' CPUs | machine busy | non-200 |');
    lines.push('|---|---:|---:|---:|---:|---:|---:|---|');
    for (const x of t.runs) {
      lines.push(`| ${x.clients} client${x.clients > 1 ? 's' : ''}${x.variant ? `, ${x.variant}` : ''}${x.round ? `, round ${x.round}` : ''}, ${f(x.seconds, 1)} s, ${x.recalls} recalls `
        + `(${x.connections} connections) | **${f(x.recalls_per_second, 0)}** | ${f(x.p50_ms)} | ${f(x.p99_ms)} | `
        + `${f(x.memd_cpus_used)} (${f(x.memd_cpu_ms_per_recall)} ms CPU/recall) | ${f(x.client_cpu_seconds / x.seconds)} | `
        + `${f(x.machine_busy_fraction * 100, 0)} % | `
        + `${Object.keys(x.failures).length ? JSON.stringify(x.failures) : 'none'} |`);
    }
    lines.push(`tmcra-memd: ${t.memd_args}`);
    lines.push('');
  }
  const c = result.commit;
  if (c) {
    lines.push('| `tmcra_turn_commit` over HTTPS | p50 ms | p99 ms | statuses | answer bytes |');
    lines.push('|---|---:|---:|---|---:|');
    for (const kind of ['raw', 'sdk']) {
      for (const [mode, m] of Object.entries(c[kind])) {
        lines.push(`| ${mode}, ${kind === 'sdk' ? 'SDK client' : 'raw pipe'} (${m.n}) | ${f(m.p50)} | ${f(m.p99)} | `
          + `${Object.entries(m.statuses).map(([k, v]) => `${k} ×${v}`).join(', ')} | ${m.mean_result_bytes} |`);
      }
    }
    lines.push('');
  }
  const d = result.delivery;
  if (d) {
    for (const [label, x] of [['over HTTPS to tmcra-memd', d.remote], ['embedded (reference)', d.embedded]]) {
      lines.push(`Delivery ${label}: ${x.items} items drained in ${f(x.delivered_seconds)} s = `
        + `**${f(x.delivered_items_per_second, 0)} items/s** (all accepted after ${f(x.accepted_seconds)} s = `
        + `${f(x.accepted_items_per_second, 0)} items/s; ${x.succeeded} succeeded, ${x.dead_letter} dead-lettered; `
        + `store records ${x.store?.records ?? 'n/a'}; delivering process CPU ${f(x.cpu_seconds)} s`
        + `${x.memd_cpu_seconds != null ? `, tmcra-memd CPU ${f(x.memd_cpu_seconds)} s` : ''})`);
      lines.push('');
    }
  }
  lines.push('| target | measured | verdict |');
  lines.push('|---|---:|---|');
  if (r) {
    const v = r.raw_last;
    lines.push(`| client overhead: \`tmcra_recall\` p50 (raw pipe, to the last byte, as the floor) − floor p50 ≤ ${TARGETS.recall_overhead_ms} ms | `
      + `${f(v.overhead_p50_ms, 3)} ms (paired ${f(v.paired_overhead.p50, 3)} ms) | ${verdict(v.overhead_p50_ms, TARGETS.recall_overhead_ms)} |`);
    lines.push(`| (diagnostic, not the verdict) the same with the driver's JSON.parse inside the clock (sessions 1–7's figure) | `
      + `${f(r.raw.overhead_p50_ms, 3)} ms (paired ${f(r.raw.paired_overhead.p50, 3)} ms) | ${verdict(r.raw.overhead_p50_ms, TARGETS.recall_overhead_ms)} |`);
    if (r.paced) {
      const rest = v.overhead_p50_ms - r.paced.idle_cost_p50_ms;
      lines.push(`| (diagnostic, not the verdict) to the last byte, less the idle gap's cost (paced − back-to-back floor, ${f(r.paced.idle_cost_p50_ms, 3)} ms) | `
        + `${f(rest, 3)} ms | ${verdict(rest, TARGETS.recall_overhead_ms)} |`);
    }
    if (result.recall_lean) {
      const ln = result.recall_lean;
      lines.push(`| (diagnostic, not the verdict) to the last byte, from a lean C++ host in blocks alternating with the floor's | `
        + `${f(ln.overhead_p50_ms, 3)} ms (paired ${f(ln.paired_median_ms, 3)} ms) | ${verdict(ln.overhead_p50_ms, TARGETS.recall_overhead_ms)} |`);
    }
    if (result.recall_split) {
      const sp = result.recall_split.raw_last;
      lines.push(`| (diagnostic, not the verdict) to the last byte, with tmcra-memd on a CPU of its own | `
        + `${f(sp.overhead_p50_ms, 3)} ms (paired ${f(sp.paired_overhead.p50, 3)} ms) | ${verdict(sp.overhead_p50_ms, TARGETS.recall_overhead_ms)} |`);
    }
  }
  if (d) {
    lines.push(`| delivery over HTTPS ≥ ${TARGETS.delivery_items_per_second} items/s | `
      + `${f(d.remote.delivered_items_per_second, 0)} items/s | `
      + `${verdict(d.remote.delivered_items_per_second, TARGETS.delivery_items_per_second, false)} |`);
  }
  if (t) {
    // The median of the rounds with the default options (the range beside it); the same for
    // the server that keeps no postings, as a diagnostic.
    const median = (variant) => {
      const rates = t.runs.filter((y) => y.clients === t.clients && y.variant === variant && y.round)
        .map((y) => y.recalls_per_second).sort((a, b) => a - b);
      const mid = rates.length ? (rates[(rates.length - 1) >> 1] + rates[rates.length >> 1]) / 2 : null;
      return `${f(mid, 0)} recalls/s (median of ${rates.length} round${rates.length === 1 ? '' : 's'}: `
        + `${rates.map((v) => f(v, 0)).join(', ')}) | ${verdict(mid, TARGETS.recalls_per_second, false)} |`;
    };
    lines.push(`| tmcra-memd ≥ ${TARGETS.recalls_per_second} recalls/s, ${t.clients} clients, ${store?.messages ?? '?'} messages | `
      + median(undefined));
    lines.push(`| the same without the postings cache (\`--postings-cache-mib 0\`: each recall walks its `
      + `words' doclists, as when recalls share no word; the benchmark's questions repeat) | ${median(NO_POSTINGS_CACHE)}`);
  }
  return lines.join('\n');
}

async function main() {
  const opts = parseArgs(process.argv.slice(2));
  for (const p of [opts.bin, opts.memd, opts.remoteDriver, opts.lifecycleDriver]) {
    if (!fs.existsSync(p)) throw new Error(`missing ${p}; build with: cmake --preset bench && cmake --build --preset bench`);
  }
  fs.mkdirSync(opts.work, { recursive: true, mode: 0o700 });
  const machine = describeMachine(opts);
  if (machine.load_avg_at_start[0] > 0.5) {
    log(`warning: 1-minute load average is ${machine.load_avg_at_start[0]} on ${machine.nproc} CPUs; `
      + 'other work on the machine shows in these figures (p99 and throughput first)');
  }
  const questions = fs.readFileSync(opts.questions, 'utf8').split('\n').filter(Boolean)
    .map((l) => JSON.parse(l)).filter((o) => o.question);
  if (questions.length === 0) throw new Error(`no questions in ${opts.questions}`);
  const started = new Date();
  const result = { params: { ...opts, skip: [...opts.skip] }, machine, started: started.toISOString(), phases: {} };
  result.store_report = opts.storeReport ? JSON.parse(fs.readFileSync(opts.storeReport, 'utf8').trim()) : null;
  const phase = (name) => {
    result.phases[name] = { load_avg: os.loadavg().map((v) => Number(v.toFixed(2))), busy: busyProcesses(),
      at: new Date().toISOString() };
  };

  const needMain = ['recall', 'throughput', 'commit'].some((s) => !opts.skip.has(s));
  if (needMain) {
    const keyFile = path.join(opts.work, 'store.key');
    const key = createKey(opts, opts.store, keyFile);
    const memd = await startMemd(opts, opts.store, 'store');
    try {
      if (!opts.skip.has('recall')) {
        phase('recall');
        result.body_check = await bodyCheck(opts, memd, key, questions[0].question);
        result.recall = await recallOverhead(opts, memd, key, keyFile, questions);
        if (!opts.skip.has('lean')) {
          phase('recall (lean host)');
          result.recall_lean = leanHost(opts, memd, key, keyFile);
        }
      }
      if (!opts.skip.has('recall') && !opts.skip.has('split')) {
        phase('recall (split placement)');
        result.recall_split = await splitPlacement(opts, memd, key, keyFile, questions);
      }
      if (!opts.skip.has('throughput')) {
        phase('throughput');
        const runs = [];
        log(`throughput: 1 client, ${Math.max(3, Math.round(opts.seconds / 2))} s (reference)`);
        runs.push(throughput(opts, memd, keyFile, 1, Math.max(3, Math.round(opts.seconds / 2))));
        runs.push(...await throughputRounds(opts, memd, keyFile, opts.clients, opts.seconds, opts.throughputRounds));
        result.throughput = { clients: opts.clients, memd_args: memd.args.slice(memd.args.indexOf('--threads')).join(' '), runs };
      }
      if (!opts.skip.has('commit')) {
        phase('commit');
        result.commit = await commitLatency(opts, memd, key);
      }
    } finally {
      const x = await memd.stop();
      if (x && x.code !== 0) log(`tmcra-memd exited ${JSON.stringify(x)}: ${memd.stderr().slice(-2000)}`);
    }
  }
  if (!opts.skip.has('delivery')) {
    phase('delivery');
    result.delivery = await delivery(opts);
  }
  phase('end');
  result.finished = new Date().toISOString();
  result.machine.load_avg_at_end = os.loadavg().map((v) => Number(v.toFixed(2)));
  fs.mkdirSync(opts.out, { recursive: true });
  const file = path.join(opts.out, `remote-${started.toISOString().replace(/[:.]/g, '-')}.json`);
  fs.writeFileSync(file, `${JSON.stringify(result, null, 1)}\n`);
  const m = machine;
  console.log(`Machine: ${m.nproc} CPUs (${m.cpu_model}${m.hypervisor ? `, ${m.hypervisor} guest` : ''}), `
    + `${m.mem_total_gib} GiB RAM, ${m.kernel}, ${m.distro}, ${m.compiler}, ${m.build_type}, ${m.libcurl}, ${m.openssl}; `
    + `tree ${m.git_head}`);
  console.log(`Load average: ${m.load_avg_at_start.join(' ')} at start → ${result.machine.load_avg_at_end.join(' ')} at end`);
  const busy = [...new Set(Object.values(result.phases).flatMap((p) => p.busy).map((b) => b.replace(/ \(pid.*/, '')))];
  console.log(`Other processes seen using CPU during the run: ${busy.length ? busy.join(', ') : 'none'}`);
  console.log('');
  console.log(render(result));
  log(`samples: ${path.relative(process.cwd(), file)}`);
}

main().catch((err) => {
  console.error(`[remote] FAILED: ${err.stack || err.message}`);
  process.exit(1);
});
