#!/usr/bin/env node
// claude_code.mjs — register tmcra-mcp with Claude Code (@anthropic-ai/claude-code
// 2.1.328) in a throw-away HOME and check that `claude mcp list` / `claude mcp get`
// health-check it as connected. Needs no login and no network: the health check only
// spawns the server and runs the MCP handshake.
//
//   node claude_code.mjs <tmcra-mcp> <tmcra-mcp-testserver>
import fs from 'node:fs';
import path from 'node:path';
import {
  Runner, assert, parseBins, requireNodeModules, run, tmpDir, newLogPath, TAP, BIN_DIR,
  assertAllStdoutPure, readClientMessages, checkStdoutLog, waitForExitInfo, hostCliEnv,
  claudeCommand,
} from './lib.mjs';

const NAME = 'claude_code.mjs';
requireNodeModules(NAME, ['@anthropic-ai/claude-code']);
const bins = parseBins(NAME);
const r = new Runner(NAME);
const notes = [];

const CLAUDE = claudeCommand();

const home = path.join(tmpDir(), 'claude-home');
const project = path.join(home, 'project');
fs.mkdirSync(project, { recursive: true });

// A clean environment: nothing of the caller's Claude/Anthropic settings leaks in.
const env = hostCliEnv(home);

const claude = (args, timeoutMs = 45_000) => run(CLAUDE.cmd, [...CLAUDE.pre, ...args], { env, cwd: project, timeoutMs });
const show = (res) => `exit ${res.code}${res.signal ? ` (${res.signal})` : ''}\nstdout: ${res.stdout.slice(0, 2000)}\nstderr: ${res.stderr.slice(0, 2000)}`;
const tapLog = newLogPath('claude-tap');

await r.test('claude --version runs (native binary installed by the package)', async () => {
  const res = await claude(['--version'], 20_000);
  assert.equal(res.code, 0, show(res));
  assert.match(res.stdout, /^2\.1\.328\b/, show(res));
});

await r.test('claude mcp add tmcra -- <server-bin>', async () => {
  const res = await claude(['mcp', 'add', 'tmcra', '--', bins.server]);
  assert.equal(res.code, 0, show(res));
});

await r.test('claude mcp add tmcra-tap -- node tap.mjs <log> <server-bin>', async () => {
  const res = await claude(['mcp', 'add', 'tmcra-tap', '--', process.execPath, TAP, tapLog, bins.server]);
  assert.equal(res.code, 0, show(res));
});

let listOut = '';
await r.test('claude mcp list reports tmcra and tmcra-tap as connected', async () => {
  const res = await claude(['mcp', 'list']);
  listOut = res.stdout;
  assert.equal(res.code, 0, show(res));
  const lines = res.stdout.split('\n');
  for (const name of ['tmcra', 'tmcra-tap']) {
    const line = lines.find((l) => l.startsWith(`${name}: `));
    assert.ok(line, `no line for ${name}\n${show(res)}`);
    assert.match(line, /✔ Connected\s*$/, `${name} not connected: ${line}\n${show(res)}`);
  }
});

await r.test('claude mcp get tmcra: Status connected', async () => {
  const res = await claude(['mcp', 'get', 'tmcra']);
  assert.equal(res.code, 0, show(res));
  assert.match(res.stdout, /Status:\s*✔ Connected/, show(res));
});

await r.test("Claude Code's own MCP log: legacy era, negotiated 2025-11-25", async () => {
  const cacheDir = path.join(home, '.cache', 'claude-cli-nodejs');
  const files = [];
  const walk = (d) => {
    if (!fs.existsSync(d)) return;
    for (const e of fs.readdirSync(d, { withFileTypes: true })) {
      const p = path.join(d, e.name);
      if (e.isDirectory()) walk(p); else if (p.includes(`${path.sep}mcp-logs-tmcra${path.sep}`) && p.endsWith('.jsonl')) files.push(p);
    }
  };
  walk(cacheDir);
  assert.ok(files.length > 0, `no mcp-logs-tmcra/*.jsonl under ${cacheDir}`);
  const entries = files.flatMap((f) => fs.readFileSync(f, 'utf8').split('\n').filter(Boolean).map((l) => { try { return JSON.parse(l); } catch { return {}; } }));
  const caps = entries.map((e) => String(e.debug ?? '')).find((d) => d.startsWith('Connection established with capabilities:'));
  assert.ok(caps, `no "Connection established" entry:\n${entries.map((e) => e.debug ?? e.error).join('\n')}`);
  const info = JSON.parse(caps.slice(caps.indexOf('{')));
  assert.equal(info.hasTools, true, caps);
  assert.equal(info.negotiatedProtocolVersion, '2025-11-25', caps);
  notes.push(`Claude Code log: ${caps}`);
  // Claude Code files every stderr line of the server under "error" ("Server stderr: …");
  // stderr logging is allowed (spec 2025-11-25: not a sign of error), so those are
  // not failures. Anything else under "error" is.
  const errs = entries.filter((e) => e.error && !String(e.error).startsWith('Server stderr:'));
  assert.deepEqual(errs, [], 'Claude Code logged MCP errors for tmcra');
  const stderrLines = entries.filter((e) => String(e.error ?? '').startsWith('Server stderr:')).length;
  if (stderrLines) notes.push(`Claude Code recorded ${stderrLines} server stderr chunk(s) in its MCP log under "error" (harmless)`);
});

await r.test('wire (tmcra-tap): stdout pure, handshake answered, server exited after the health check', async () => {
  const info = await waitForExitInfo(tapLog, 5000);
  assert.ok(info, 'tap never ran (tmcra-tap was not spawned)');
  assert.ok(info.exitedAtMs !== null, 'server still running after claude exited');
  const sent = readClientMessages(tapLog);
  const init = sent.find((m) => m.method === 'initialize');
  assert.ok(init, `Claude Code sent no initialize: ${JSON.stringify(sent).slice(0, 500)}`);
  const { messages } = checkStdoutLog(tapLog);
  const initReply = messages.find((m) => m.id === init.id && m.method === undefined);
  assert.ok(initReply?.result, `no initialize result: ${JSON.stringify(initReply)}`);
  notes.push(`Claude Code initialize: protocolVersion=${init.params?.protocolVersion} capabilities=${JSON.stringify(init.params?.capabilities)}`);
  notes.push(`Claude Code sent: ${sent.map((m) => m.method ?? `response#${m.id}`).join(', ')}; server signals received: ${JSON.stringify(info.forwardedSignals.map((f) => f.signal))}; exit code=${info.code} signal=${info.signal}`);
  const probe = sent.find((m) => m.method === 'server/discover');
  if (probe) {
    const reply = messages.find((m) => m.id === probe.id && m.method === undefined);
    assert.equal(reply?.error?.code, -32601, `server/discover reply: ${JSON.stringify(reply)}`);
  }
  // Claude Code ends the health check with SIGINT (not stdin EOF); the server must not
  // need SIGKILL.
  assert.notEqual(info.signal, 'SIGKILL', 'server had to be SIGKILLed');
  assertAllStdoutPure([tapLog]);
});

notes.push(`claude launched via ${CLAUDE.how}`);
for (const n of notes) console.log(`note: ${n}`);
if (listOut && process.env.PEER_VERBOSE === '1') console.log(listOut);
await r.finish();
