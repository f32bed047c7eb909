#!/usr/bin/env node
// setup_hosts.mjs — tmcra-mcp-setup on a machine with every host, checked by the hosts' own
// config readers where we have them: Claude Code 2.1.328 (`claude mcp list` starts the
// registered server and runs the handshake), Codex 0.171.0 (`codex mcp list --json` parses
// config.toml, which refuses unknown keys; `codex app-server`'s hooks/list reports our hooks
// and their trust), and for Claude Desktop, Cursor, Gemini CLI and VS Code the SDK client
// starting the command the file names (gemini_cli.mjs runs the real Gemini CLI). Backups, the other servers and TOML comments are checked byte for
// byte; files that cannot be edited safely stay untouched.
//
//   node setup_hosts.mjs <tmcra-mcp> <tmcra-mcp-testserver>
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import {
  Runner, assert, parseBins, requireNodeModules, run, tmpDir, BIN_DIR, connectV1, callOk,
  hostCliEnv, geminiEntryEnv, claudeCommand,
} from './lib.mjs';

const NAME = 'setup_hosts.mjs';
requireNodeModules(NAME, ['@anthropic-ai/claude-code', '@openai/codex', '@google/gemini-cli', '@modelcontextprotocol/sdk']);
const bins = parseBins(NAME);
const SETUP = process.env.TMCRA_SETUP || path.join(path.dirname(bins.server), 'tmcra-mcp-setup');
const r = new Runner(NAME);

const root = tmpDir();
const home = path.join(root, 'setup-home');
const project = path.join(root, 'project');
fs.mkdirSync(project, { recursive: true });

// The environment of a person's shell, with nothing of the caller's host or TMCRA settings.
const env = hostCliEnv(home);

const files = {
  'claude-code': path.join(home, '.claude.json'),
  'claude-desktop': path.join(home, '.config', 'Claude', 'claude_desktop_config.json'),
  codex: path.join(home, '.codex', 'config.toml'),
  cursor: path.join(home, '.cursor', 'mcp.json'),
  'gemini-cli': path.join(home, '.gemini', 'settings.json'),
  vscode: path.join(home, '.config', 'Code', 'User', 'mcp.json'),
};
const CODEX_TOML = `# Codex settings (a comment that must survive)
model = "gpt-5"   # trailing comment

[mcp_servers.other]
command = "/bin/true"
args = ["--x"]

[profiles.fast]
model = "gpt-5-mini"
`;
const originals = {
  'claude-code': `${JSON.stringify({ numStartups: 3, mcpServers: { other: { type: 'stdio', command: '/bin/true', args: [] } }, projects: {} }, null, 2)}\n`,
  'claude-desktop': `${JSON.stringify({ globalShortcut: 'Ctrl+Space', mcpServers: { other: { command: '/bin/true' } } }, null, 2)}\n`,
  codex: CODEX_TOML,
  cursor: `${JSON.stringify({ mcpServers: { other: { command: '/bin/true', env: { A: 'b' } } } }, null, 4)}\n`,
  'gemini-cli': `${JSON.stringify({ general: { vimMode: true }, mcpServers: { other: { command: '/bin/true', trust: false } } }, null, 2)}\n`,
  vscode: `${JSON.stringify({ inputs: [], servers: { other: { type: 'stdio', command: '/bin/true' } } }, null, '\t')}\n`,
};
for (const [host, file] of Object.entries(files)) {
  fs.mkdirSync(path.dirname(file), { recursive: true });
  fs.writeFileSync(file, originals[host], { mode: 0o644 });
}

const setup = (args, cwd = home) => run(SETUP, args, { env, cwd, timeoutMs: 20_000 });
const show = (res) => `exit ${res.code}${res.signal ? ` (${res.signal})` : ''}\nstdout: ${res.stdout.slice(0, 3000)}\nstderr: ${res.stderr.slice(0, 2000)}`;
const backupsOf = (file) => fs.readdirSync(path.dirname(file))
  .filter((n) => n.startsWith(`${path.basename(file)}.tmcra-backup-`)).map((n) => path.join(path.dirname(file), n));
const withoutEntry = (doc, key) => {
  const copy = structuredClone(doc);
  delete copy[key].tmcra;
  return copy;
};
// Gemini CLI keeps its hooks in the file of its servers: two edits, two backups.
const installBackups = (host) => (host === 'gemini-cli' ? 2 : 1);
const containerKey = (host) => (host === 'vscode' ? 'servers' : 'mcpServers');

const hookFiles = {
  'claude-code': path.join(home, '.claude', 'settings.json'),
  codex: path.join(home, '.codex', 'hooks.json'),
};
const CLAUDE_EVENTS = ['SessionStart', 'UserPromptSubmit', 'Stop', 'StopFailure', 'SubagentStop', 'PreCompact', 'SessionEnd'];
const CODEX_EVENTS = ['SessionStart', 'UserPromptSubmit', 'Stop', 'SubagentStop', 'PreCompact', 'SessionEnd', 'Interrupt'];
const SHORT = new Set(['SessionEnd', 'Interrupt']);
// With the hosts' programs on PATH, as after installing them (setup asks `codex app-server`).
const pathEnv = { ...env, PATH: `${BIN_DIR}:${env.PATH}` };
const setupOnPath = (args) => run(SETUP, args, { env: pathEnv, cwd: project, timeoutMs: 40_000 });
const hookStatus = async (host) => {
  const res = await setupOnPath(['status', '--host', host, '--json']);
  assert.equal(res.code, 0, show(res));
  return Object.fromEntries(JSON.parse(res.stdout)[0].hooks.events.map((e) => [e.event, e]));
};

// `codex app-server` as setup uses it: initialize, initialized, hooks/list; our hooks by event.
async function codexHooks() {
  const child = spawn(path.join(BIN_DIR, 'codex'), ['app-server'], { env, cwd: project, stdio: ['pipe', 'pipe', 'ignore'] });
  const lines = [];
  let buffer = '';
  const answer = new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no hooks/list answer:\n${lines.join('\n')}`)), 20_000);
    child.stdout.on('data', (chunk) => {
      buffer += chunk;
      for (let nl = buffer.indexOf('\n'); nl >= 0; nl = buffer.indexOf('\n')) {
        const line = buffer.slice(0, nl);
        buffer = buffer.slice(nl + 1);
        lines.push(line);
        let msg;
        try { msg = JSON.parse(line); } catch { continue; }
        if (msg.id === 2) { clearTimeout(timer); resolve(msg); }
      }
    });
  });
  child.stdin.write(`${JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { clientInfo: { name: 'setup-test', version: '1' } } })}\n`);
  child.stdin.write(`${JSON.stringify({ jsonrpc: '2.0', method: 'initialized' })}\n`);
  child.stdin.write(`${JSON.stringify({ jsonrpc: '2.0', id: 2, method: 'hooks/list', params: { cwds: [project] } })}\n`);
  try {
    const msg = await answer;
    assert.ok(msg.result, JSON.stringify(msg));
    const hooks = msg.result.data.flatMap((d) => d.hooks).filter((h) => h.sourcePath === hookFiles.codex && /tmcra-mcp' hook /.test(h.command));
    return Object.fromEntries(hooks.map((h) => [h.eventName[0].toUpperCase() + h.eventName.slice(1), h]));
  } finally {
    child.stdin.end();
    child.kill();
  }
}

const PASSED = ['HTTPS_PROXY', 'NO_PROXY', 'SSL_CERT_DIR', 'SSL_CERT_FILE', 'TMCRA_DATA_DIR'].filter((n) => env[n] !== undefined);

const CLAUDE = claudeCommand();
const claude = (args) => run(CLAUDE.cmd, [...CLAUDE.pre, ...args], { env, cwd: project, timeoutMs: 45_000 });
const codex = (args) => run(path.join(BIN_DIR, 'codex'), args, { env, cwd: project, timeoutMs: 45_000 });
const codexServers = async () => {
  const res = await codex(['mcp', 'list', '--json']);
  assert.equal(res.code, 0, show(res));
  return JSON.parse(res.stdout.slice(res.stdout.indexOf('[')));
};

await r.test('status before: every host found, none registered', async () => {
  const res = await setup(['status', '--json']);
  assert.equal(res.code, 0, show(res));
  const rows = JSON.parse(res.stdout);
  assert.deepEqual(rows.map((x) => [x.host, x.host_present, x.state]), [
    ['claude-code', true, 'not registered'], ['claude-desktop', true, 'not registered'],
    ['codex', true, 'not registered'], ['cursor', true, 'not registered'],
    ['gemini-cli', true, 'not registered'], ['vscode', true, 'not registered'],
  ]);
});

await r.test('install --dry-run says what it would do and changes no byte', async () => {
  const res = await setup(['install', '--dry-run']);
  assert.equal(res.code, 0, show(res));
  assert.equal((res.stdout.match(/tmcra would be registered in /g) ?? []).length, 6, show(res));
  for (const [host, file] of Object.entries(files)) {
    assert.equal(fs.readFileSync(file, 'utf8'), originals[host], `${host} changed by a dry run`);
    assert.deepEqual(backupsOf(file), [], `${host}: a dry run made a backup`);
  }
});

await r.test('install registers with all six; each file backed up first, everything else kept', async () => {
  const res = await setup(['install']);
  assert.equal(res.code, 0, show(res));
  for (const [host, file] of Object.entries(files)) {
    const backups = backupsOf(file).sort();
    assert.equal(backups.length, installBackups(host), `${host}: backups ${backups}`);
    assert.equal(fs.readFileSync(backups[0], 'utf8'), originals[host], `${host}: backup differs`);
    assert.equal(fs.statSync(backups[0]).mode & 0o777, 0o600, `${host}: backup mode`);
    assert.equal(fs.statSync(file).mode & 0o777, 0o644, `${host}: the file's own mode kept`);
    assert.ok(res.stdout.includes(`backup: ${backups[0]}`), show(res));
    if (host === 'codex') continue;
    const doc = JSON.parse(fs.readFileSync(file, 'utf8'));
    const entry = doc[containerKey(host)].tmcra;
    assert.equal(entry.command, bins.server, `${host}: ${JSON.stringify(entry)}`);
    assert.deepEqual(entry.args, []);
    assert.equal(entry.type, ['claude-code', 'vscode'].includes(host) ? 'stdio' : undefined, host);
    if (host === 'gemini-cli') delete doc.hooks;
    assert.deepEqual(withoutEntry(doc, containerKey(host)), JSON.parse(originals[host]), `${host}: other content changed`);
  }
  // The JSON keeps its indent (4 spaces, a tab); the TOML keeps every original line.
  assert.match(fs.readFileSync(files.cursor, 'utf8'), /\n {4}"mcpServers"/);
  assert.match(fs.readFileSync(files.vscode, 'utf8'), /\n\t"inputs"/);
  const toml = fs.readFileSync(files.codex, 'utf8');
  assert.ok(toml.startsWith(CODEX_TOML), `config.toml no longer begins with the original:\n${toml}`);
  assert.match(toml, /\n\[mcp_servers\.tmcra\]\ncommand = "/);
});

await r.test('install again: nothing changed, no second backup', async () => {
  const before = Object.fromEntries(Object.entries(files).map(([h, f]) => [h, fs.readFileSync(f, 'utf8')]));
  const res = await setup(['install']);
  assert.equal(res.code, 0, show(res));
  assert.equal((res.stdout.match(/is already registered/g) ?? []).length, 6, show(res));
  for (const [host, file] of Object.entries(files)) {
    assert.equal(fs.readFileSync(file, 'utf8'), before[host], host);
    assert.equal(backupsOf(file).length, installBackups(host), host);
  }
});

await r.test('Claude Code: claude mcp list starts the registered server and reports it connected', async () => {
  const res = await claude(['mcp', 'list']);
  assert.equal(res.code, 0, show(res));
  const line = res.stdout.split('\n').find((l) => l.startsWith('tmcra: '));
  assert.ok(line, `no tmcra line\n${show(res)}`);
  assert.ok(line.startsWith(`tmcra: ${bins.server}`), line);
  assert.match(line, /✔ Connected\s*$/, line);
});

await r.test('Codex: codex mcp list --json reads the table (its parser refuses unknown keys)', async () => {
  const servers = await codexServers();
  const ours = servers.find((s) => s.name === 'tmcra');
  assert.ok(ours, JSON.stringify(servers));
  assert.equal(ours.enabled, true);
  assert.equal(ours.transport.type, 'stdio');
  assert.equal(ours.transport.command, bins.server);
  assert.deepEqual(ours.transport.args, []);
  // Only the TMCRA_* set when installing (here TMCRA_DATA_DIR) and the TLS/proxy variables
  // that are set, and the hooks marker.
  assert.deepEqual(ours.transport.env_vars, PASSED, JSON.stringify(ours));
  assert.deepEqual(ours.transport.env, { TMCRA_HOOKS: 'codex' }, JSON.stringify(ours));
  assert.equal(ours.tool_timeout_sec, 180);
  assert.ok(servers.some((s) => s.name === 'other'), 'the other server is still there');
});

for (const host of ['claude-desktop', 'cursor', 'gemini-cli', 'vscode']) {
  await r.test(`${host}: the SDK client starts the command the file names and calls tmcra_status`, async () => {
    const entry = JSON.parse(fs.readFileSync(files[host], 'utf8'))[containerKey(host)].tmcra;
    const s = await connectV1({ bin: entry.command, args: entry.args, label: `setup-${host}`, env });
    try {
      const status = await callOk(s.client, 'tmcra_status', {});
      assert.equal(status.memory_mode, 'embedded', JSON.stringify(status).slice(0, 400));
      assert.equal(status.memory.data_dir, env.TMCRA_DATA_DIR, JSON.stringify(status.memory));
      await s.closeAndCheckExit();
    } finally {
      await s.closeQuietly();
    }
  });
}

await r.test('status: registered with this tmcra-mcp everywhere', async () => {
  const res = await setup(['status', '--json']);
  assert.equal(res.code, 0, show(res));
  for (const row of JSON.parse(res.stdout)) {
    assert.equal(row.state, 'registered', JSON.stringify(row));
    assert.equal(row.command, bins.server);
    assert.equal(row.command_is_this_install, true);
    assert.equal(row.command_runs, true);
  }
  const text = await setup(['status']);
  assert.match(text.stdout, /Codex \(user\): registered as tmcra → /, show(text));
});

await r.test('hooks: the contract\'s events and timeouts beside the entries, the marker in both', async () => {
  const settings = JSON.parse(fs.readFileSync(hookFiles['claude-code'], 'utf8'));
  assert.deepEqual(Object.keys(settings.hooks), CLAUDE_EVENTS);
  for (const event of CLAUDE_EVENTS) {
    assert.deepEqual(settings.hooks[event], [{ hooks: [{ type: 'command', command: `'${bins.server}' hook ${event} --host claude-code`, timeout: SHORT.has(event) ? 2 : 10 }] }], event);
  }
  const codexHooksFile = JSON.parse(fs.readFileSync(hookFiles.codex, 'utf8'));
  assert.deepEqual(Object.keys(codexHooksFile.hooks), CODEX_EVENTS);
  assert.deepEqual(JSON.parse(fs.readFileSync(files['claude-code'], 'utf8')).mcpServers.tmcra.env, { TMCRA_HOOKS: 'claude-code' });
  assert.ok(fs.readFileSync(files.codex, 'utf8').includes('env = { TMCRA_HOOKS = "codex" }'));
  for (const host of ['claude-desktop', 'cursor', 'vscode']) {
    assert.equal(JSON.parse(fs.readFileSync(files[host], 'utf8'))[containerKey(host)].tmcra.env, undefined, host);
  }
  // Gemini CLI: its hooks in settings.json beside the servers (gemini_hooks_e2e.mjs runs them).
  const gemini = JSON.parse(fs.readFileSync(files['gemini-cli'], 'utf8'));
  assert.deepEqual(gemini.mcpServers.tmcra.env, geminiEntryEnv(env));
  assert.deepEqual(Object.keys(gemini.hooks), ['SessionStart', 'BeforeAgent', 'AfterAgent', 'SessionEnd']);
  assert.deepEqual(gemini.hooks.AfterAgent, [{ matcher: '*', hooks: [{ name: 'tmcra-AfterAgent', type: 'command',
    command: `'${bins.server}' hook AfterAgent --host gemini-cli 2>/dev/null || true`, timeout: 10000 }] }]);
  const geminiStatus = await hookStatus('gemini-cli');
  assert.equal(geminiStatus.SessionEnd.host_runs_it, 'yes');
  const claudeStatus = await hookStatus('claude-code');
  for (const event of CLAUDE_EVENTS) {
    assert.equal(claudeStatus[event].installed, true, event);
    assert.equal(claudeStatus[event].host_runs_it, 'yes', event);
  }
});

await r.test('Codex: hooks/list reports our hooks untrusted; install says how to trust them, status agrees', async () => {
  const hooks = await codexHooks();
  assert.deepEqual(Object.keys(hooks).sort(), [...CODEX_EVENTS].sort());
  for (const [event, h] of Object.entries(hooks)) {
    assert.equal(h.trustStatus, 'untrusted', event);
    assert.equal(h.timeoutSec, SHORT.has(event) ? 2 : 10, event);
  }
  const status = await hookStatus('codex');
  for (const event of CODEX_EVENTS) {
    assert.equal(status[event].codex_trust, 'untrusted', event);
    assert.equal(status[event].host_runs_it, 'no', event);
    assert.match(status[event].todo, /\/hooks in Codex/, event);
  }
  const again = await setupOnPath(['install', '--host', 'codex']);
  assert.equal(again.code, 0, show(again));
  assert.match(again.stdout, /memory is NOT automatic in\n {4}Codex until you trust them\. Start codex, type \/hooks/, show(again));
  assert.doesNotMatch(again.stdout, /memory is automatic in new Codex/, show(again));
});

await r.test('Codex: --trust-codex-hooks records the hashes; hooks/list says trusted; a changed timeout is noticed', async () => {
  const before = fs.readFileSync(files.codex, 'utf8');
  const res = await setupOnPath(['install', '--host', 'codex', '--trust-codex-hooks']);
  assert.equal(res.code, 0, show(res));
  assert.match(res.stdout, /Codex's trust in 7 tmcra-mcp hooks recorded in /, show(res));
  const toml = fs.readFileSync(files.codex, 'utf8');
  assert.ok(toml.startsWith(before), 'config.toml only gained lines at its end');
  const hooks = await codexHooks();
  for (const [event, h] of Object.entries(hooks)) {
    assert.equal(h.trustStatus, 'trusted', event);
    assert.ok(toml.includes(`[hooks.state."${h.key}"]\ntrusted_hash = "${h.currentHash}"`), event);
  }
  const status = await hookStatus('codex');
  for (const event of CODEX_EVENTS) assert.equal(status[event].host_runs_it, 'yes', event);
  // Trusting again changes nothing.
  const again = await setupOnPath(['install', '--host', 'codex', '--trust-codex-hooks']);
  assert.match(again.stdout, /already recorded in /, show(again));
  assert.equal(fs.readFileSync(files.codex, 'utf8'), toml);

  const original = fs.readFileSync(hookFiles.codex, 'utf8');
  const edited = JSON.parse(original);
  edited.hooks.Stop[0].hooks[0].timeout = 11;
  fs.writeFileSync(hookFiles.codex, `${JSON.stringify(edited, null, 2)}\n`);
  assert.equal((await codexHooks()).Stop.trustStatus, 'modified');
  const changed = await hookStatus('codex');
  assert.equal(changed.Stop.codex_trust, 'modified');
  assert.equal(changed.Stop.host_runs_it, 'no');
  assert.match(changed.Stop.todo, /\/hooks in Codex/);
  assert.equal(changed.SessionStart.codex_trust, 'trusted');
  const text = await setupOnPath(['status', '--host', 'codex']);
  assert.match(text.stdout, /Stop: installed, Codex: modified, runs: no/, show(text));
  fs.writeFileSync(hookFiles.codex, original);
});

await r.test('a file with comments or an inline TOML table is refused untouched, the entry printed', async () => {
  const jsonc = '{\n  // my servers\n  "servers": {}\n}\n';
  const inline = 'mcp_servers = { other = { command = "/bin/true" } }\n';
  const other = path.join(root, 'other-home');
  fs.mkdirSync(path.join(other, '.config', 'Code', 'User'), { recursive: true });
  fs.mkdirSync(path.join(other, '.codex'), { recursive: true });
  fs.writeFileSync(path.join(other, '.config', 'Code', 'User', 'mcp.json'), jsonc);
  fs.writeFileSync(path.join(other, '.codex', 'config.toml'), inline);
  const res = await run(SETUP, ['install', '--host', 'vscode', '--host', 'codex'], { env: hostCliEnv(other), timeoutMs: 20_000 });
  assert.equal(res.code, 1, show(res));
  assert.match(res.stdout, /has comments/, show(res));
  assert.match(res.stdout, /inline table or dotted keys/, show(res));
  assert.match(res.stdout, /add this by hand:\n\{\n {2}"servers": \{\n {4}"tmcra": \{/, show(res));
  assert.match(res.stdout, /add this by hand:\n\[mcp_servers\.tmcra\]\ncommand = /, show(res));
  assert.equal(fs.readFileSync(path.join(other, '.config', 'Code', 'User', 'mcp.json'), 'utf8'), jsonc);
  assert.equal(fs.readFileSync(path.join(other, '.codex', 'config.toml'), 'utf8'), inline);
  assert.deepEqual(fs.readdirSync(path.join(other, '.codex')), ['config.toml'], 'no backup, no temp file');
});

await r.test('remove: tmcra gone from all six, the rest as it was; the hosts agree', async () => {
  const backupsBefore = Object.fromEntries(Object.entries(files).map(([h, f]) => [h, backupsOf(f).length]));
  const res = await setup(['remove']);
  assert.equal(res.code, 0, show(res));
  assert.equal((res.stdout.match(/tmcra removed from /g) ?? []).length, 6, show(res));
  assert.equal((res.stdout.match(/tmcra-mcp hooks removed from .*\(the file is removed: nothing else was in it\)/g) ?? []).length, 2, show(res));
  for (const file of Object.values(hookFiles)) assert.ok(!fs.existsSync(file), `${file} is still there`);
  for (const [host, file] of Object.entries(files)) {
    assert.equal(backupsOf(file).length, backupsBefore[host] + installBackups(host), `${host}: a backup before each removal`);
    if (host === 'codex') {
      assert.equal(fs.readFileSync(file, 'utf8'), CODEX_TOML, 'config.toml (trust entries too) is back to the original');
      continue;
    }
    const doc = JSON.parse(fs.readFileSync(file, 'utf8'));
    if (host === 'claude-code') {
      // Claude Code has written its own keys (machine id, start time) meanwhile: they stay too.
      assert.deepEqual(doc.mcpServers, JSON.parse(originals[host]).mcpServers, host);
      assert.ok(doc.firstStartTime, 'the keys Claude Code added are kept');
      continue;
    }
    assert.deepEqual(doc, JSON.parse(originals[host]), host);
  }
  assert.ok(!(await codexServers()).some((s) => s.name === 'tmcra'), 'codex still lists tmcra');
  const list = await claude(['mcp', 'list']);
  assert.ok(!list.stdout.split('\n').some((l) => l.startsWith('tmcra: ')), show(list));
  const again = await setup(['remove']);
  assert.equal(again.code, 0, show(again));
  assert.equal((again.stdout.match(/is not registered/g) ?? []).length, 6, show(again));
});

await r.test('project scope: .mcp.json, .codex/, .cursor/, .vscode/ created 0600 in 0700 directories', async () => {
  const res = await setup(['install', '--project', project, '--host', 'claude-code', '--host', 'codex',
    '--host', 'cursor', '--host', 'vscode']);
  assert.equal(res.code, 0, show(res));
  for (const f of ['.mcp.json', '.codex/config.toml', '.cursor/mcp.json', '.vscode/mcp.json']) {
    const file = path.join(project, f);
    assert.equal(fs.statSync(file).mode & 0o777, 0o600, f);
    if (f.includes('/')) assert.equal(fs.statSync(path.dirname(file)).mode & 0o777, 0o700, f);
    assert.ok(fs.readFileSync(file, 'utf8').includes(bins.server), f);
  }
  assert.match(res.stdout, /\(created\)/);
  // Claude Code reads the project's .mcp.json (and asks before it starts a project's server).
  const list = await claude(['mcp', 'list']);
  const line = list.stdout.split('\n').find((l) => l.startsWith('tmcra: '));
  assert.ok(line?.startsWith(`tmcra: ${bins.server}`), show(list));
  assert.match(line, /Pending approval|✔ Connected/, line);
  const bad = await setup(['install', '--project', project]);
  assert.equal(bad.code, 2, show(bad));
  assert.match(bad.stderr, /--project needs --host/);
});

await r.test('usage: --help, --version, and bad arguments exit 2 naming the argument', async () => {
  const help = await setup(['--help']);
  assert.equal(help.code, 0, show(help));
  assert.match(help.stdout, /^Usage: tmcra-mcp-setup install/);
  const subHelp = await setup(['install', '--host', 'codex', '--help']);
  assert.equal(subHelp.code, 0, show(subHelp));
  assert.match(subHelp.stdout, /^Usage: tmcra-mcp-setup install/);
  const version = await setup(['--version']);
  assert.match(version.stdout, /^tmcra-mcp-setup \d+\.\d+\.\d+\n$/);
  for (const [args, message] of [
    [[], /needs a command/],
    [['frob'], /unknown command 'frob'/],
    [['install', '--host', 'zed'], /unknown host 'zed'/],
    [['install', '--host'], /--host needs a value/],
    [['install', '--command', path.join(root, 'nope')], /--command .*nope is not an executable file/],
    [['install', '--name', 'a.b'], /--name must be/],
    [['status', '--dry-run'], /unknown option '--dry-run' for status/],
    [['install', '--host', 'claude-desktop', '--project', project], /claude-desktop has no project/],
    [['install', '--host', 'cursor', '--project', files.cursor], /--project .* is not a directory/],
    [['install', '--command', path.dirname(bins.server)], /is not an executable file/],
  ]) {
    const res = await setup(args);
    assert.equal(res.code, 2, `${args.join(' ')}: ${show(res)}`);
    assert.match(res.stderr, message, `${args.join(' ')}: ${show(res)}`);
    assert.equal(res.stdout, '', 'usage errors go to stderr');
  }
  // No host on the machine: install says so and how to name one.
  const empty = path.join(root, 'empty-home');
  fs.mkdirSync(empty);
  const none = await run(SETUP, ['install'], { env: { ...hostCliEnv(empty), PATH: '/usr/bin:/bin' }, timeoutMs: 20_000 });
  assert.equal(none.code, 1, show(none));
  assert.match(none.stderr, /no MCP host found in .*; name one with --host/);
  assert.deepEqual(fs.readdirSync(empty), [], 'nothing written');
});

await r.test('a host installed but never run is found through its program on PATH', async () => {
  const fresh = path.join(root, 'fresh-home');
  fs.mkdirSync(fresh);
  const res = await run(SETUP, ['install', '--dry-run', '--no-hooks'], { env: { ...hostCliEnv(fresh), PATH: `${BIN_DIR}:/usr/bin:/bin` }, timeoutMs: 20_000 });
  assert.equal(res.code, 0, show(res));
  assert.match(res.stdout, /Claude Code \(user\): tmcra would be registered/, show(res));
  assert.match(res.stdout, /Codex \(user\): tmcra would be registered/, show(res));
  assert.match(res.stdout, /Gemini CLI \(user\): tmcra would be registered/, show(res));
  assert.ok(res.stdout.includes(`variables Codex passes on: ${PASSED.join(', ')}\n`), show(res));
  // The binary under test is in a build tree: the warning says so.
  assert.match(res.stderr, /warning: .*tmcra-mcp is in a build tree; the hosts will keep starting it from there/, show(res));
  assert.doesNotMatch(res.stdout, /hooks/, show(res));
  assert.deepEqual(fs.readdirSync(fresh), [], 'nothing written');
});

await r.test('Claude Code --statusline: set when none, the user\'s own kept, removed only when ours', async () => {
  const sl = path.join(root, 'statusline-home');
  const settings = path.join(sl, '.claude', 'settings.json');
  fs.mkdirSync(path.dirname(settings), { recursive: true });
  const slEnv = { ...hostCliEnv(sl), PATH: '/usr/bin:/bin' };
  const ours = await run(SETUP, ['install', '--host', 'claude-code', '--statusline'], { env: slEnv, timeoutMs: 20_000 });
  assert.equal(ours.code, 0, show(ours));
  assert.deepEqual(JSON.parse(fs.readFileSync(settings, 'utf8')).statusLine, { type: 'command', command: `'${bins.server}' statusline` });
  await run(SETUP, ['remove', '--host', 'claude-code'], { env: slEnv, timeoutMs: 20_000 });
  assert.ok(!fs.existsSync(settings), 'settings.json held only ours: removed');
  const users = `${JSON.stringify({ statusLine: { type: 'command', command: '~/bin/line.sh' } }, null, 2)}\n`;
  fs.writeFileSync(settings, users);
  const kept = await run(SETUP, ['install', '--host', 'claude-code', '--statusline'], { env: slEnv, timeoutMs: 20_000 });
  assert.match(kept.stdout, /statusLine of its own, which stays/, show(kept));
  assert.equal(JSON.parse(fs.readFileSync(settings, 'utf8')).statusLine.command, '~/bin/line.sh');
  await run(SETUP, ['remove', '--host', 'claude-code'], { env: slEnv, timeoutMs: 20_000 });
  assert.equal(fs.readFileSync(settings, 'utf8'), users, 'byte for byte');
});

await r.finish();
