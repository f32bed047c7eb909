#!/usr/bin/env node
// lifecycle_latency.mjs — the turn-lifecycle benchmark (bench/run_lifecycle.sh runs it).
//
// In one run, on one disk:
//   * the floor      — lifecycle_bench floor: BEGIN IMMEDIATE; INSERT; COMMIT on a SQLite file
//                      with synchronous=FULL (about one fdatasync), in the directory that holds
//                      the data dir; split into rounds interleaved with the commit blocks;
//   * commit latency — tmcra-mcp (Release) on a fresh temp data dir, driven by the official SDK
//                      client (@modelcontextprotocol/sdk Client + StdioClientTransport): turns of
//                      tmcra_turn_prepare then tmcra_turn_commit, only the commit call timed
//                      (host-visible: callTool() issued → result parsed), once with
//                      consistency "eventual" and once with the default "read_your_writes",
//                      in alternating blocks; p50/p99 and their ratio to the floor's;
//   * prepare        — tmcra_turn_prepare against a store built by memory_bench (--store DIR,
//                      scope "bench"), with the paraphrased questions memory_bench exported;
//   * delivery       — lifecycle_bench delivery: items/s draining N pending outbox items.
// Prints a Markdown summary on stdout, progress on stderr, and writes every sample and a
// description of the machine to bench/results/lifecycle-<timestamp>.json. Never fails on a figure;
// exits non-zero only when a server or driver fails or answers with an error.
//
// Usage: node lifecycle_latency.mjs --bin PATH --driver PATH --work DIR
//          [--turns N] [--warmup N] [--rounds R] [--gap-ms MS] [--floor-iterations N]
//          [--store DIR --questions FILE [--store-report FILE] [--prepares N]]
//          [--delivery-items N] [--clients sdk,raw] [--unique-text]
//          [--skip commit,prepare,delivery] [--out DIR]
//
// --clients: the SDK client is what a host sees (the figure the targets are about); the raw
// pipe (newline-delimited JSON-RPC, no SDK) separates the server's time from the client's
// parsing and output-schema validation of the answer, which carries the prepared recall.

import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';

import {
  assistantText, connectRaw, connectSdk, describeMachine as describeMachineBase, f, runOr,
  sleep, summarize, userText, verdict,
} from './bench_lib.mjs';

const HERE = path.dirname(fileURLToPath(import.meta.url));

const TARGETS = { commit_ratio: 1.5, delivery_items_per_second: 2000 };

function parseArgs(argv) {
  const o = {
    bin: null, driver: null, work: null, turns: 200, warmup: 20, rounds: 4, gapMs: 100,
    floorIterations: 300, store: null, questions: null, storeReport: null, prepares: 200,
    deliveryItems: 10000, skip: new Set(), out: path.join(HERE, 'results'), clients: ['sdk', 'raw'],
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
      case '--driver': o.driver = path.resolve(next()); break;
      case '--work': o.work = path.resolve(next()); break;
      case '--turns': o.turns = count(); break;
      case '--warmup': o.warmup = count(); break;
      case '--rounds': o.rounds = Math.max(1, count()); break;
      case '--gap-ms': o.gapMs = count(); break;
      case '--floor-iterations': o.floorIterations = Math.max(1, count()); break;
      case '--store': o.store = path.resolve(next()); break;
      case '--questions': o.questions = path.resolve(next()); break;
      case '--store-report': o.storeReport = path.resolve(next()); break;
      case '--prepares': o.prepares = count(); break;
      case '--delivery-items': o.deliveryItems = Math.max(1, count()); break;
      case '--clients': o.clients = next().split(',').map((c) => c.trim()); break;
      case '--unique-text': o.uniqueText = true; break;
      case '--skip': for (const s of next().split(',')) o.skip.add(s.trim()); break;
      case '--out': o.out = path.resolve(next()); break;
      default: throw new Error(`unknown argument '${a}'`);
    }
  }
  for (const k of ['bin', 'driver', 'work']) if (!o[k]) throw new Error(`--${k} is required`);
  if (o.clients.length === 0 || o.clients.some((c) => !['sdk', 'raw'].includes(c))) {
    throw new Error('--clients takes sdk, raw or sdk,raw');
  }
  if (!o.skip.has('prepare') && (!o.store || !o.questions)) {
    throw new Error('--store and --questions are required for the prepare figure (or --skip prepare)');
  }
  return o;
}

const log = (...a) => console.error('[lifecycle]', ...a);

/** Median (mean of the two middle values for even n) and nearest-rank percentiles. */

/** Runs the C++ driver; its stdout is one JSON object. */
function driver(opts, args, timeoutMs) {
  const r = spawnSync(opts.driver, args, { encoding: 'utf8', timeout: timeoutMs, maxBuffer: 64 << 20 });
  if (r.status !== 0) {
    throw new Error(`${path.basename(opts.driver)} ${args.join(' ')} failed (status ${r.status}, `
      + `signal ${r.signal}): ${r.stderr.slice(-2000)}`);
  }
  return JSON.parse(r.stdout.trim().split('\n').pop());
}

function describeMachine(opts) {
  const df = runOr('df', ['-hT', opts.work]) || '';
  return { ...describeMachineBase(opts.bin), filesystem: df.split('\n')[1] ?? null };
}

// ---- the floor and commit latency -----------------------------------------------------------

// A tmcra-mcp session through the SDK client or the raw pipe; call() answers structuredContent.
async function openSession(opts, kind, env, label) {
  const full = { PATH: process.env.PATH ?? '/usr/bin:/bin', TMCRA_LOG_LEVEL: 'warn', ...env };
  const session = kind === 'sdk'
    ? await connectSdk(opts.bin, full, `${label} (SDK)`, 'tmcra-lifecycle-bench')
    : await connectRaw(opts.bin, full, `${label} (raw pipe)`, 'tmcra-lifecycle-bench-raw');
  return { ...session, call: async (name, args) => (await session.call(name, args)).value };
}

// One server session per client kind, each on its own fresh data dir (same disk as the floor).
async function openCommitSession(opts, kind) {
  const home = path.join(opts.work, `home-${kind}`);
  fs.mkdirSync(home, { recursive: true });
  const env = { HOME: home, TMCRA_DATA_DIR: path.join(opts.work, `data-${kind}`) };
  const server = await openSession(opts, kind, env, 'commit session');
  let turn = 0;
  const samples = { eventual: [], read_your_writes: [] };
  const statuses = { eventual: {}, read_your_writes: {} };
  const bytes = { eventual: 0, read_your_writes: 0 };
  const oneTurn = async (consistency, timed) => {
    turn += 1;
    const id = `bench-turn-${turn}`;
    await server.call('tmcra_turn_prepare', {
      turn_id: id, session_id: `bench-session-${Math.floor(turn / 20)}`,
      user_message_id: `u${turn}`, user_content: userText(turn, opts.uniqueText),
    });
    const t0 = performance.now();
    const r = await server.call('tmcra_turn_commit', {
      turn_id: id, assistant_message_id: `a${turn}`, assistant_content: assistantText(turn, opts.uniqueText), consistency,
    });
    const ms = performance.now() - t0;
    if (timed) {
      samples[consistency].push(ms);
      statuses[consistency][r.status] = (statuses[consistency][r.status] ?? 0) + 1;
      bytes[consistency] += Buffer.byteLength(JSON.stringify(r));
    }
    // A host's turns are seconds apart; the gap lets the previous turn's background delivery
    // finish so it does not sit in the next commit's fsync.
    if (opts.gapMs > 0) await sleep(opts.gapMs);
  };
  return { kind, server, samples, statuses, bytes, oneTurn };
}

async function commitLatency(opts) {
  const floorFile = path.join(opts.work, 'floor.sqlite3');  // beside the data dirs: same disk
  const sessions = [];
  const floor = [];
  try {
    for (const kind of opts.clients) sessions.push(await openCommitSession(opts, kind));
    log(`commit: ${opts.warmup} warm-up turns per mode and client`);
    for (const s of sessions) {
      for (let i = 0; i < opts.warmup; i += 1) {
        await s.oneTurn('eventual', false);
        await s.oneTurn('read_your_writes', false);
      }
    }
    const perRound = Math.ceil(opts.turns / opts.rounds);
    const floorPerRound = Math.ceil(opts.floorIterations / opts.rounds);
    for (let round = 0; round < opts.rounds; round += 1) {
      log(`round ${round + 1}/${opts.rounds}: floor ×${floorPerRound}; per client `
        + `(${opts.clients.join(', ')}): eventual ×${perRound}, read_your_writes ×${perRound}`);
      const f = driver(opts, ['floor', '--file', floorFile, '--iterations', String(floorPerRound)], 120_000);
      floor.push(...f.samples_ms);
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
  const floorSummary = summarize(floor);
  const clients = {};
  for (const s of sessions) {
    clients[s.kind] = {};
    for (const [mode, values] of Object.entries(s.samples)) {
      const sum = summarize(values);
      clients[s.kind][mode] = {
        ...sum,
        ratio_p50: sum.p50 / floorSummary.p50,
        ratio_p99: sum.p99 / floorSummary.p99,
        statuses: s.statuses[mode],
        mean_result_bytes: Math.round(s.bytes[mode] / Math.max(1, values.length)),
        samples_ms: values,
      };
    }
  }
  return { floor: { ...floorSummary, file: floorFile, samples_ms: floor }, clients };
}

// ---- prepare on a large store ---------------------------------------------------------------

async function prepareOnce(opts, kind, questions) {
  const home = path.join(opts.work, `home-prepare-${kind}`);
  fs.mkdirSync(home, { recursive: true });
  const env = { HOME: home, TMCRA_DATA_DIR: opts.store, TMCRA_DEFAULT_SCOPE: 'bench' };
  const server = await openSession(opts, kind, env, 'prepare session');
  const samples = [];
  let first = null;
  let hits = 0;
  let bytes = 0;
  try {
    const n = opts.prepares;
    log(`prepare (${kind}): 1 untimed first call (opens the store), ${opts.warmup} warm-up, ${n} timed`);
    for (let i = -1 - opts.warmup; i < n; i += 1) {
      const q = questions[(i + questions.length * 4) % questions.length];
      const seq = i + opts.warmup + 1;
      const args = {
        turn_id: `prepare-${kind}-${seq}`, session_id: `bench-prepare-${kind}`,
        user_message_id: `p${kind}${seq}`, user_content: q.question,
      };
      const t0 = performance.now();
      const r = await server.call('tmcra_turn_prepare', args);
      const ms = performance.now() - t0;
      if (r.status !== 'prepared') throw new Error(`prepare answered status ${r.status}`);
      if (i === -1 - opts.warmup) first = ms;
      if (i >= 0) {
        samples.push(ms);
        const text = r.injectable_context?.content ?? '';
        if (q.answer && text.includes(q.answer)) hits += 1;
        bytes += Buffer.byteLength(JSON.stringify(r));
      }
    }
  } finally {
    await server.close();
  }
  return {
    ...summarize(samples),
    first_call_ms: first,
    answer_in_context: hits / samples.length,
    mean_result_bytes: Math.round(bytes / samples.length),
    samples_ms: samples,
  };
}

async function prepareLatency(opts) {
  const questions = fs.readFileSync(opts.questions, 'utf8').split('\n').filter(Boolean)
    .map((l) => JSON.parse(l)).filter((o) => o.question);
  if (questions.length === 0) throw new Error(`no questions in ${opts.questions}`);
  const storeReport = opts.storeReport ? JSON.parse(fs.readFileSync(opts.storeReport, 'utf8').trim()) : null;
  const clients = {};
  for (const kind of opts.clients) clients[kind] = await prepareOnce(opts, kind, questions);
  return { questions: questions.length, store: storeReport, clients };
}

// ---- report ---------------------------------------------------------------------------------

function render(result) {
  const lines = [];
  const c = result.commit;
  if (c) {
    lines.push(`| figure | p50 ms | p99 ms | p50 / floor p50 | p99 / floor p99 | answer bytes |`);
    lines.push('|---|---:|---:|---:|---:|---:|');
    lines.push(`| floor: BEGIN IMMEDIATE; INSERT; COMMIT, synchronous=FULL (${c.floor.n}) | `
      + `${f(c.floor.p50)} | ${f(c.floor.p99)} | 1 | 1 | |`);
    for (const [kind, modes] of Object.entries(c.clients)) {
      for (const [mode, m] of Object.entries(modes)) {
        lines.push(`| \`tmcra_turn_commit\` ${mode}, ${kind === 'sdk' ? 'SDK client' : 'raw pipe'} `
          + `(${m.n}; status ${Object.entries(m.statuses).map(([k, v]) => `${k} ×${v}`).join(', ')}) | `
          + `${f(m.p50)} | ${f(m.p99)} | ${f(m.ratio_p50)} | ${f(m.ratio_p99)} | ${m.mean_result_bytes} |`);
      }
    }
    lines.push('');
  }
  const p = result.prepare;
  if (p) {
    for (const [kind, q] of Object.entries(p.clients)) {
      lines.push(`\`tmcra_turn_prepare\` on the ${p.store?.messages ?? '?'}-message store, `
        + `${kind === 'sdk' ? 'SDK client' : 'raw pipe'}: p50 ${f(q.p50)} ms, p99 ${f(q.p99)} ms `
        + `(${q.n} calls; first call of the process ${f(q.first_call_ms)} ms; answer in the injected `
        + `context ${f(q.answer_in_context * 100, 0)} %; ${q.mean_result_bytes} bytes per answer)`);
      lines.push('');
    }
    if (p.store) {
      lines.push(`Engine recall alone (memory_bench, in-process, same store): p50 ${f(p.store.recall_p50_ms)} ms, `
        + `p99 ${f(p.store.recall_p99_ms)} ms`);
      lines.push('');
    }
  }
  const d = result.delivery;
  if (d) {
    lines.push(`Delivery: ${d.items} items drained in ${f(d.delivered_seconds)} s = `
      + `**${f(d.delivered_items_per_second, 0)} items/s** (all accepted by the memory after `
      + `${f(d.accepted_seconds)} s = ${f(d.accepted_items_per_second, 0)} items/s; `
      + `${d.succeeded} succeeded, ${d.dead_letter} dead-lettered)`);
    lines.push('');
  }
  lines.push('| target | measured | verdict |');
  lines.push('|---|---:|---|');
  if (c) {
    for (const [kind, modes] of Object.entries(c.clients)) {
      for (const [mode, m] of Object.entries(modes)) {
        lines.push(`| commit p50 ≤ ${TARGETS.commit_ratio} × floor p50 (${mode}, ${kind}) | `
          + `${f(m.ratio_p50)} × | ${verdict(m.ratio_p50, TARGETS.commit_ratio)} |`);
      }
    }
  }
  if (d) {
    lines.push(`| delivery ≥ ${TARGETS.delivery_items_per_second} items/s | `
      + `${f(d.delivered_items_per_second, 0)} items/s | `
      + `${verdict(d.delivered_items_per_second, TARGETS.delivery_items_per_second, false)} |`);
  }
  return lines.join('\n');
}

async function main() {
  const opts = parseArgs(process.argv.slice(2));
  for (const p of [opts.bin, opts.driver]) {
    if (!fs.existsSync(p)) throw new Error(`missing ${p}; build with: cmake --preset bench && cmake --build --preset bench`);
  }
  fs.mkdirSync(opts.work, { recursive: true });
  const machine = describeMachine(opts);
  if (machine.load_avg_at_start[0] > 0.5) {
    log(`warning: 1-minute load average is ${machine.load_avg_at_start[0]} on ${machine.nproc} CPUs; `
      + 'other work on the machine shows in these figures (fsync and p99 first)');
  }
  const started = new Date();
  const result = { params: { ...opts, skip: [...opts.skip] }, machine, started: started.toISOString() };
  if (!opts.skip.has('commit')) result.commit = await commitLatency(opts);
  if (!opts.skip.has('prepare')) result.prepare = await prepareLatency(opts);
  if (!opts.skip.has('delivery')) {
    log(`delivery: ${opts.deliveryItems} pending items`);
    result.delivery = driver(opts, ['delivery', '--dir', path.join(opts.work, 'delivery'),
      '--items', String(opts.deliveryItems)], 3_600_000);
    fs.rmSync(path.join(opts.work, 'delivery'), { recursive: true, force: true });
  }
  result.finished = new Date().toISOString();
  result.machine.load_avg_at_end = os.loadavg().map((v) => Number(v.toFixed(2)));
  fs.mkdirSync(opts.out, { recursive: true });
  const file = path.join(opts.out, `lifecycle-${started.toISOString().replace(/[:.]/g, '-')}.json`);
  fs.writeFileSync(file, `${JSON.stringify(result, null, 1)}\n`);
  const m = machine;
  console.log(`Machine: ${m.nproc} CPUs (${m.cpu_model}${m.hypervisor ? `, ${m.hypervisor} guest` : ''}), `
    + `${m.mem_total_gib} GiB RAM, ${m.kernel}, ${m.compiler}, ${m.build_type}; load ${m.load_avg_at_start.join(' ')} → `
    + `${result.machine.load_avg_at_end.join(' ')}; tree ${m.git_head}`);
  console.log('');
  console.log(render(result));
  log(`samples: ${path.relative(process.cwd(), file)}`);
}

main().catch((err) => {
  console.error(`[lifecycle] FAILED: ${err.stack || err.message}`);
  process.exit(1);
});
