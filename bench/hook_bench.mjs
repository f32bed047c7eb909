// Hook start-up benchmark: a host hook is a new process on every event, so its whole life
// (fork, exec, dynamic linking, opening the store, the event's work, exit) is its cost.
//
//   node bench/hook_bench.mjs --build-dir build/bench --stores 10000:DIR,100000:DIR [--runs N]
//                             [--claude-mem DIR] [--mode auto|hook|standin] [--out DIR]
//                             [--also NAME=PATH]...   (another tmcra-mcp build beside it)
//
// bench/run_hooks.sh builds everything and calls this. For each store size and each of
// Claude Code's events SessionStart, UserPromptSubmit, Stop and SessionEnd (Claude Code's payload
// shapes: session_id, transcript_path, cwd, hook_event_name, and prompt / stop_hook_active,
// last_assistant_message / source / reason), it runs, side by side and interleaved round by
// round:
//   * floor      — bench/hook_floor.c, a static C binary that reads stdin and exits;
//   * tmcra-mcp  — `tmcra-mcp hook <Event> --host claude-code` (mode "hook"), or, while that
//                  command does not exist in the binary (mode "standin"), tmcra-mcp serving one
//                  MCP session on stdin: initialize, then tmcra_turn_prepare (UserPromptSubmit,
//                  the prompt as user_content) or tmcra_turn_commit (Stop), then EOF;
//                  SessionStart and SessionEnd initialize only;
//   * claude-mem — its hook commands (plugin/hooks/hooks.json) run as
//                  `node plugin/scripts/bun-runner.js plugin/scripts/worker-service.cjs hook
//                  claude-code <context|session-init|summarize|session-end>`, with the same
//                  payloads, when --claude-mem is given, under Bun (--bun-dir, default the
//                  pinned @oven/bun-linux-x64 beside it) against its worker service, started
//                  before the timed runs (startClaudeMem says why its store is empty).
// Two phases per store size: the floor and tmcra-mcp (with any --also build) interleaved round
// by round; then claude-mem, its worker started for that phase only, interleaved with the floor
// again ("floor (claude-mem phase)"): the worker's background work would otherwise be on the
// other processes' clocks.
// Each run is one process started by bench/hook_spawn.c (fork, payload on a pipe, wait4): wall
// time from fork to wait4 without Node.js on the clock, and the process's peak RSS
// (ru_maxrss, what /usr/bin/time -f %M prints). Reported: p50/p95 wall time, median peak RSS,
// exit statuses, and for UserPromptSubmit the injected bytes per prompt (additionalContext, or
// the prepare answer's injectable_context.content in the stand-in). It never fails on a figure.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

import { describeMachine, f, summarize } from './bench_lib.mjs';

const HERE = path.dirname(fileURLToPath(import.meta.url));
const EVENTS = ['SessionStart', 'UserPromptSubmit', 'Stop', 'SessionEnd'];
const CLAUDE_MEM_EVENT = {
  SessionStart: 'context', UserPromptSubmit: 'session-init', Stop: 'summarize', SessionEnd: 'session-end',
};

function parseArgs(argv) {
  const o = { runs: 30, mode: 'auto', out: path.join(HERE, 'results'), stores: [], claudeMem: null,
    buildDir: path.join(HERE, '..', 'build', 'bench'), timeoutMs: 20_000 };
  for (let i = 2; i < argv.length; i += 1) {
    const a = argv[i];
    const next = () => argv[++i];
    if (a === '--runs') o.runs = Number(next());
    else if (a === '--mode') o.mode = next();
    else if (a === '--out') o.out = next();
    else if (a === '--build-dir') o.buildDir = next();
    else if (a === '--bin') o.bin = next();
    else if (a === '--claude-mem') o.claudeMem = next();
    else if (a === '--bun-dir') o.bunDir = next();
    else if (a === '--also') {  // NAME=PATH: another tmcra-mcp build, same env and stores (before/after)
      const [name, bin] = next().split('=');
      (o.also ??= []).push({ name, bin });
    }
    else if (a === '--timeout-ms') o.timeoutMs = Number(next());
    else if (a === '--stores') {
      o.stores = next().split(',').map((s) => {
        const [n, dir] = s.split(':');
        return { messages: Number(n), dir };
      });
    } else throw new Error(`unknown option ${a}`);
  }
  o.bin ??= path.join(o.buildDir, 'src', 'app', 'tmcra-mcp');
  o.spawn = path.join(o.buildDir, 'bench', 'hook_spawn');
  o.floor = path.join(o.buildDir, 'bench', 'hook_floor');
  return o;
}

const log = (...a) => process.stderr.write(`[hooks] ${a.join(' ')}\n`);

// ---- payloads ----------------------------------------------------------------------------------

function transcriptLines(sessionId, cwd, prompt, answer) {
  const base = { sessionId, cwd, version: '2.1.0', gitBranch: 'main', isSidechain: false, userType: 'external' };
  return [
    { ...base, type: 'user', uuid: `${sessionId}-u`, timestamp: new Date().toISOString(),
      message: { role: 'user', content: prompt } },
    { ...base, type: 'assistant', uuid: `${sessionId}-a`, parentUuid: `${sessionId}-u`, timestamp: new Date().toISOString(),
      message: { id: `msg_${sessionId}`, type: 'message', role: 'assistant', model: 'claude-sonnet-4-5',
        content: [{ type: 'text', text: answer }], stop_reason: 'end_turn' } },
  ].map((l) => JSON.stringify(l)).join('\n') + '\n';
}

function hookPayload(event, s) {
  const common = { session_id: s.sessionId, transcript_path: s.transcript, cwd: s.cwd, hook_event_name: event };
  if (event === 'SessionStart') return { ...common, source: 'startup' };
  if (event === 'UserPromptSubmit') return { ...common, permission_mode: 'default', prompt: s.prompt };
  if (event === 'Stop') return { ...common, permission_mode: 'default', stop_hook_active: false, last_assistant_message: s.answer };
  return { ...common, reason: 'other' };
}

// The stand-in's stdin: one MCP session of the work the hook does for the event.
function standinSession(event, s) {
  const lines = [
    { jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'hook-bench', version: '1' } } },
    { jsonrpc: '2.0', method: 'notifications/initialized' },
  ];
  if (event === 'UserPromptSubmit') {
    lines.push({ jsonrpc: '2.0', id: 2, method: 'tools/call', params: { name: 'tmcra_turn_prepare', arguments: {
      turn_id: s.turnId, session_id: s.sessionId, user_message_id: `${s.turnId}-u`, user_content: s.prompt } } });
  } else if (event === 'Stop') {
    lines.push({ jsonrpc: '2.0', id: 2, method: 'tools/call', params: { name: 'tmcra_turn_commit', arguments: {
      turn_id: s.turnId, assistant_message_id: `${s.turnId}-a`, assistant_content: s.answer } } });
  }
  return lines.map((l) => JSON.stringify(l)).join('\n') + '\n';
}

// Bytes injected into the model's context by one UserPromptSubmit run, from its stdout.
function injectedBytes(stdout, mode) {
  if (!stdout.trim()) return 0;
  try {
    if (mode === 'hook') {
      const out = JSON.parse(stdout);
      return Buffer.byteLength(out?.hookSpecificOutput?.additionalContext ?? '');
    }
    for (const line of stdout.split('\n')) {
      if (!line) continue;
      const m = JSON.parse(line);
      if (m.id === 2) return Buffer.byteLength(m.result?.structuredContent?.injectable_context?.content ?? '');
    }
  } catch { /* not JSON: counted as nothing injected */ }
  return 0;
}

// ---- running one process ---------------------------------------------------------------------

function runOnce(o, work, cmd, args, env, stdinText) {
  const inFile = path.join(work, 'stdin');
  const outFile = path.join(work, 'stdout');
  const errFile = path.join(work, 'stderr');
  fs.writeFileSync(inFile, stdinText);
  const r = spawnSync(o.spawn, [inFile, outFile, errFile, cmd, ...args], { env, encoding: 'utf8', timeout: o.timeoutMs });
  if (r.error || r.status !== 0) throw new Error(`hook_spawn failed: ${r.error?.message ?? r.stderr}`);
  const [wallUs, rssKib, status, userUs, sysUs] = r.stdout.trim().split(/\s+/).map(Number);
  return { ms: wallUs / 1000, rssKib, status, cpuMs: (userUs + sysUs) / 1000,
    stdout: fs.readFileSync(outFile, 'utf8'), stderr: fs.readFileSync(errFile, 'utf8') };
}

// claude-mem's hooks are thin clients of its worker service (a Bun HTTP daemon with its own
// SQLite store; Chroma is off here: it would need uvx and PyPI). The host starts the worker at
// SessionStart (the first command of that event in its hooks.json); here it is started once,
// outside the clock, for each store size, with a fresh HOME, and stopped after. Its store is
// empty: claude-mem's memories are observations an LLM compresses (the Claude Agent SDK,
// which needs the network and an account), so the stored messages of our stores cannot be
// given to it.
function startClaudeMem(o, work) {
  const plugin = path.join(o.claudeMem, 'plugin');
  const bunDir = o.bunDir ?? path.join(o.claudeMem, '..', '@oven', 'bun-linux-x64', 'bin');
  if (!fs.existsSync(path.join(bunDir, 'bun'))) {
    return { reason: `bun not found in ${bunDir} (claude-mem's hooks run under Bun)` };
  }
  const home = path.join(work, 'cm-home');
  fs.mkdirSync(home, { recursive: true });
  const env = { PATH: `${bunDir}:${process.env.PATH}`, HOME: home, CLAUDE_PLUGIN_ROOT: plugin,
    CLAUDE_MEM_CHROMA_ENABLED: 'false' };
  const runner = [path.join(plugin, 'scripts', 'bun-runner.js'), path.join(plugin, 'scripts', 'worker-service.cjs')];
  const t0 = performance.now();
  const r = spawnSync(process.execPath, [...runner, 'start'], { env, encoding: 'utf8', timeout: 60_000, input: '' });
  const startMs = performance.now() - t0;
  if (r.status !== 0 || !r.stdout.includes('"ready"')) {
    return { reason: `its worker did not start: ${(r.stdout + r.stderr).trim().slice(0, 300)}` };
  }
  log(`claude-mem worker started in ${f(startMs, 0)} ms`);
  return { env, runner, home, startMs,
    system: { name: 'claude-mem', cmd: process.execPath, env,
      args: (e) => [...runner, 'hook', 'claude-code', CLAUDE_MEM_EVENT[e]],
      stdin: (e, s) => JSON.stringify(hookPayload(e, s)) } };
}

function stopClaudeMem(cm) {
  spawnSync(process.execPath, [...cm.runner, 'stop'], { env: cm.env, encoding: 'utf8', timeout: 30_000, input: '' });
  // Whatever is left of the worker this run started (its pid file names it).
  try {
    const pid = JSON.parse(fs.readFileSync(path.join(cm.home, '.claude-mem', 'worker.pid'), 'utf8')).pid;
    if (pid) process.kill(pid, 'SIGTERM');
  } catch { /* gone already */ }
}

function detectMode(o, env, work) {
  if (o.mode !== 'auto') return o.mode;
  const r = runOnce(o, work, o.bin, ['hook', 'SessionEnd', '--host', 'claude-code'], env, '{}');
  return r.status === 0 ? 'hook' : 'standin';
}

// ---- main ---------------------------------------------------------------------------------------

function main() {
  const o = parseArgs(process.argv);
  if (!o.stores.length) throw new Error('--stores N:DIR[,N:DIR] is required');
  const root = fs.mkdtempSync(path.join(os.tmpdir(), 'tmcra-hooks-'));
  const machine = describeMachine(o.bin);
  const results = { params: { runs: o.runs, stores: o.stores.map((s) => s.messages) }, machine, sizes: [] };
  try {
    for (const store of o.stores) {
      const work = path.join(root, `w${store.messages}`);
      const home = path.join(work, 'home');
      const cwd = path.join(work, 'project');
      fs.mkdirSync(home, { recursive: true });
      fs.mkdirSync(cwd, { recursive: true });
      const questions = fs.readFileSync(path.join(store.dir, '..', 'questions.jsonl'), 'utf8')
        .split('\n').filter(Boolean).map((l) => JSON.parse(l));
      const tmcraEnv = { PATH: process.env.PATH, HOME: home, TMCRA_DATA_DIR: store.dir, TMCRA_DEFAULT_SCOPE: 'bench',
        TMCRA_LOG_LEVEL: 'warn' };
      const mode = detectMode(o, tmcraEnv, work);
      log(`${store.messages} messages: tmcra-mcp as ${mode === 'hook' ? '`tmcra-mcp hook EVENT`' : 'the MCP stand-in'}`);
      const systems = [
        { name: 'floor', cmd: o.floor, args: () => [], env: { PATH: process.env.PATH }, stdin: (e, s) => JSON.stringify(hookPayload(e, s)) },
        { name: 'tmcra-mcp', tmcra: true, cmd: o.bin, env: tmcraEnv,
          args: (e) => (mode === 'hook' ? ['hook', e, '--host', 'claude-code'] : []),
          stdin: (e, s) => (mode === 'hook' ? JSON.stringify(hookPayload(e, s)) : standinSession(e, s)) },
      ];
      for (const other of o.also ?? []) {
        systems.push({ name: other.name, tmcra: true, cmd: other.bin, env: tmcraEnv,
          args: (e) => ['hook', e, '--host', 'claude-code'], stdin: (e, s) => JSON.stringify(hookPayload(e, s)) });
      }
      const samples = {};
      const newSamples = (name) => {
        samples[name] = {};
        for (const e of EVENTS) samples[name][e] = { ms: [], rss: [], cpu: [], statuses: {}, injected: [], stderr: '' };
      };
      for (const sys of systems) newSamples(sys.name);
      // One untimed round of everything (page cache, the store's first open), then `runs` rounds,
      // the systems' order rotated each round.
      const rounds = (phase, list) => {
        for (let round = -1; round < o.runs; round += 1) {
          const q = questions[(round + 1) % questions.length];
          const sid = `bench-${store.messages}-${phase}-${round + 1}-${process.pid}`;
          const s = { sessionId: sid, cwd, prompt: q.question, turnId: `turn-${sid}`,
            answer: `Noted. ${q.question} I checked the runbook: the answer is in the notes of that session.`,
            transcript: path.join(work, `${sid}.jsonl`) };
          fs.writeFileSync(s.transcript, transcriptLines(sid, cwd, s.prompt, s.answer));
          const order = list.map((_, i) => list[(i + Math.max(0, round)) % list.length]);
          for (const e of EVENTS) {
            for (const sys of order) {
              const r = runOnce(o, work, sys.cmd, sys.args(e), sys.env, sys.stdin(e, s));
              if (round < 0) continue;
              const x = samples[sys.label ?? sys.name][e];
              x.ms.push(r.ms);
              x.rss.push(r.rssKib / 1024);
              x.cpu.push(r.cpuMs);
              x.statuses[r.status] = (x.statuses[r.status] ?? 0) + 1;
              if (!x.stderr && r.stderr.trim()) x.stderr = r.stderr.trim().split('\n').slice(0, 3).join(' | ').slice(0, 300);
              if (e === 'UserPromptSubmit' && sys.tmcra) {
                x.injected.push(injectedBytes(r.stdout, sys.name === 'tmcra-mcp' ? mode : 'hook'));
              }
            }
          }
          if (round >= 0 && (round + 1) % 10 === 0) log(`${store.messages} ${phase}: ${round + 1}/${o.runs} rounds`);
        }
      };
      // Phase 1: the floor and tmcra-mcp (and --also builds), interleaved.
      rounds('tmcra', systems);
      // Phase 2: claude-mem, interleaved with the floor again. Its worker (a Bun daemon) runs only
      // in this phase: what it does in the background between hooks would otherwise be on the
      // other processes' clocks (2 vCPUs).
      let claudeMem = null;
      if (o.claudeMem) {
        claudeMem = startClaudeMem(o, work);
        if (claudeMem.system) {
          newSamples('claude-mem');
          newSamples('floor (claude-mem phase)');
          const floor = { ...systems[0], label: 'floor (claude-mem phase)' };
          rounds('claude-mem', [floor, claudeMem.system]);
        } else {
          results.claude_mem_unavailable = claudeMem.reason;
        }
      }
      const summary = {};
      for (const [name, byEvent] of Object.entries(samples)) {
        summary[name] = {};
        for (const [e, x] of Object.entries(byEvent)) {
          const t = summarize(x.ms);
          const p95 = [...x.ms].sort((a, b) => a - b)[Math.min(x.ms.length - 1, Math.ceil(0.95 * x.ms.length) - 1)];
          summary[name][e] = { p50: t.p50, p95, rss_mib: summarize(x.rss).p50, rss_max_mib: Math.max(...x.rss),
            cpu_ms_p50: summarize(x.cpu).p50, statuses: x.statuses, stderr: x.stderr,
            injected: x.injected.length ? summarize(x.injected) : null, samples: x.ms };
        }
      }
      if (claudeMem) stopClaudeMem(claudeMem);
      results.sizes.push({ messages: store.messages, mode, summary,
        claude_mem_worker_start_ms: claudeMem?.startMs ?? null });
    }
  } finally {
    fs.rmSync(root, { recursive: true, force: true });
  }
  results.machine.load_avg_at_end = os.loadavg().map((v) => Number(v.toFixed(2)));
  fs.mkdirSync(o.out, { recursive: true });
  const file = path.join(o.out, `hooks-${new Date().toISOString().replace(/[:.]/g, '-')}.json`);
  fs.writeFileSync(file, JSON.stringify(results, null, 1));
  report(results, file);
}

function report(results, file) {
  const out = [];
  const m = results.machine;
  out.push(`machine: ${m.nproc} CPUs (${m.cpu_model}), ${m.distro}, node ${m.node}, ${m.build_type}, ${m.git_head}; load ${m.load_avg_at_start.join(' ')} → ${m.load_avg_at_end.join(' ')}`);
  for (const size of results.sizes) {
    out.push('', `### ${size.messages} stored messages (tmcra-mcp ${size.mode === 'hook' ? '`hook EVENT`' : 'MCP stand-in'}; ${results.params.runs} processes per cell)`, '');
    const names = Object.keys(size.summary);
    out.push(`| event | ${names.map((n) => `${n} p50 / p95, ms`).join(' | ')} | ${names.map((n) => `${n} peak RSS, MiB`).join(' | ')} | tmcra-mcp ÷ floor, p50 / p95 |${names.includes('claude-mem') ? ' claude-mem ÷ tmcra-mcp, p50 / p95 |' : ''}`);
    out.push(`|---|${names.map(() => '---:').join('|')}|${names.map(() => '---:').join('|')}|---:|${names.includes('claude-mem') ? '---:|' : ''}`);
    for (const e of EVENTS) {
      const cell = (n) => size.summary[n][e];
      const ratio = `${f(cell('tmcra-mcp').p50 / cell('floor').p50, 1)}× / ${f(cell('tmcra-mcp').p95 / cell('floor').p95, 1)}×`;
      const cm = names.includes('claude-mem')
        ? ` ${f(cell('claude-mem').p50 / cell('tmcra-mcp').p50, 1)}× / ${f(cell('claude-mem').p95 / cell('tmcra-mcp').p95, 1)}× |` : '';
      out.push(`| ${e} | ${names.map((n) => `${f(cell(n).p50)} / ${f(cell(n).p95)}`).join(' | ')} | ${names.map((n) => f(cell(n).rss_mib, 1)).join(' | ')} | ${ratio} |${cm}`);
    }
    const inj = size.summary['tmcra-mcp'].UserPromptSubmit.injected;
    if (inj) out.push('', `UserPromptSubmit injected bytes per prompt: median ${inj.p50}, min ${inj.min}, max ${inj.max}.`);
    for (const n of names) {
      for (const e of EVENTS) {
        const c = size.summary[n][e];
        const bad = Object.entries(c.statuses).filter(([k]) => k !== '0');
        if (bad.length) out.push(`- ${n} ${e}: exit statuses ${JSON.stringify(c.statuses)}; stderr: ${c.stderr || '(empty)'}`);
      }
    }
  }
  out.push('', `samples: ${file}`);
  process.stdout.write(out.join('\n') + '\n');
}

main();
