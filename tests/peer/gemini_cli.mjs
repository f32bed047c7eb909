#!/usr/bin/env node
// gemini_cli.mjs — tmcra-mcp-setup with the real Gemini CLI 0.61.0 (@google/gemini-cli, pinned
// in package.json), on a throw-away home whose settings.json holds other settings and another
// server: after `install --host gemini-cli`, `gemini mcp list` starts the registered tmcra-mcp
// and reports it connected (offline, no Google account: listing needs neither), with tmcra-mcp's
// hooks beside it in settings.json (gemini_hooks_e2e.mjs runs them); `remove` gives
// settings.json back byte for byte. The same for a project's .gemini/settings.json and for a
// $GEMINI_CLI_HOME; a dry run and a file with comments change nothing. Last, what Gemini CLI
// passes to a server's environment (docs/setup.md): TMCRA_API_KEY only through the entry's env,
// which `install` writes as a "$TMCRA_API_KEY" reference when the key is set, never the value.
//
// Gemini CLI starts stdio servers only in a folder the user trusted (its trust dialog writes
// ~/.gemini/trustedFolders.json); the test writes that file as the dialog does.
//
//   node gemini_cli.mjs <tmcra-mcp> <tmcra-mcp-testserver>
import fs from 'node:fs';
import path from 'node:path';
import { Runner, assert, parseBins, requireNodeModules, run, tmpDir, BIN_DIR, hostCliEnv, geminiEntryEnv } from './lib.mjs';

const NAME = 'gemini_cli.mjs';
requireNodeModules(NAME, ['@google/gemini-cli']);
const bins = parseBins(NAME);
const SETUP = process.env.TMCRA_SETUP || path.join(path.dirname(bins.server), 'tmcra-mcp-setup');
const r = new Runner(NAME, { budgetMs: 240_000 });

const root = fs.realpathSync(tmpDir());
const home = path.join(root, 'home');
const project = path.join(root, 'project');
fs.mkdirSync(project, { recursive: true });
// Under GitHub Actions Gemini CLI passes servers only an allowlist of variables (docs/hooks.md).
const geminiEnv = (dir) => {
  const e = hostCliEnv(dir);
  delete e.GITHUB_SHA;
  delete e.SURFACE;
  return e;
};
const env = geminiEnv(home);
const settings = path.join(home, '.gemini', 'settings.json');

// A person's settings: other settings (updates and usage statistics off) and another server,
// the test server with its own store.
const ORIGINAL = `${JSON.stringify({
  general: { vimMode: true, enableAutoUpdate: false },
  privacy: { usageStatisticsEnabled: false },
  mcpServers: {
    other: { command: bins.testserver, args: [], env: { TMCRA_DATA_DIR: path.join(home, 'other-data') } },
  },
}, null, 2)}\n`;
fs.mkdirSync(path.dirname(settings), { recursive: true });
fs.writeFileSync(settings, ORIGINAL, { mode: 0o644 });

const setup = (args, { env: e = env, cwd = home } = {}) => run(SETUP, args, { env: e, cwd, timeoutMs: 20_000 });
const show = (res) => `exit ${res.code}${res.signal ? ` (${res.signal})` : ''}\nstdout: ${res.stdout.slice(0, 3000)}\nstderr: ${res.stderr.slice(0, 2000)}`;
const backupsOf = (file) => (fs.existsSync(path.dirname(file)) ? fs.readdirSync(path.dirname(file)) : [])
  .filter((n) => n.startsWith(`${path.basename(file)}.tmcra-backup-`)).sort().map((n) => path.join(path.dirname(file), n));
const statusRow = async (args, options) => {
  const res = await setup(['status', '--host', 'gemini-cli', '--json', ...args], options);
  assert.equal(res.code, 0, show(res));
  const rows = JSON.parse(res.stdout);
  assert.equal(rows.length, 1, res.stdout);
  return rows[0];
};

// Trusts `dir` in the Gemini CLI home `geminiHome`, as the trust dialog does.
const trust = (geminiHome, dir) => {
  const file = path.join(geminiHome, '.gemini', 'trustedFolders.json');
  const trusted = fs.existsSync(file) ? JSON.parse(fs.readFileSync(file, 'utf8')) : {};
  fs.mkdirSync(path.dirname(file), { recursive: true });
  fs.writeFileSync(file, `${JSON.stringify({ ...trusted, [dir]: 'TRUST_FOLDER' }, null, 2)}\n`);
};

// `gemini mcp list` in `cwd`: its report (it writes it to stderr) and each server's line, by
// name ("✓ tmcra: /abs/tmcra-mcp  (stdio) - Connected").
async function geminiList({ env: e = env, cwd = project } = {}) {
  const res = await run(path.join(BIN_DIR, 'gemini'), ['mcp', 'list'], { env: e, cwd, timeoutMs: 60_000 });
  assert.equal(res.code, 0, show(res));
  const text = res.stdout + res.stderr;
  const servers = {};
  for (const line of text.split('\n')) {
    const m = /^\S+ ([\w-]+): .* - (\w+)$/.exec(line);
    if (m) servers[m[1]] = { line, status: m[2] };
  }
  return { text, servers };
}
const connectedLine = (command) => `✓ tmcra: ${command}  (stdio) - Connected`;

await r.test('status: Gemini CLI found through ~/.gemini or `gemini` on PATH, not registered yet', async () => {
  const row = await statusRow([]);
  assert.deepEqual(
    [row.host, row.label, row.path, row.host_present, row.state],
    ['gemini-cli', 'Gemini CLI (user)', settings, true, 'not registered'],
    JSON.stringify(row),
  );
  assert.equal(row.hooks.path, settings, JSON.stringify(row.hooks));
  assert.ok(row.hooks.events.every((e) => !e.installed), JSON.stringify(row.hooks));
  const fresh = path.join(root, 'fresh-home');
  fs.mkdirSync(fresh);
  const bare = { ...hostCliEnv(fresh), PATH: '/usr/bin:/bin' };
  assert.equal((await statusRow([], { env: bare })).host_present, false);
  const onPath = { ...bare, PATH: `${BIN_DIR}:/usr/bin:/bin` };
  assert.equal((await statusRow([], { env: onPath })).host_present, true);
  // Without --host, install acts on it: found through its program.
  const dry = await setup(['install', '--dry-run'], { env: onPath });
  assert.equal(dry.code, 0, show(dry));
  assert.ok(dry.stdout.includes(`Gemini CLI (user): tmcra would be registered in ${path.join(fresh, '.gemini', 'settings.json')} (a new file)\n`), show(dry));
  assert.deepEqual(fs.readdirSync(fresh), [], 'nothing written');
});

await r.test('install --dry-run says what it would do and changes no byte', async () => {
  const res = await setup(['install', '--host', 'gemini-cli', '--dry-run']);
  assert.equal(res.code, 0, show(res));
  assert.ok(res.stdout.includes(`Gemini CLI (user): tmcra would be registered in ${settings}\n`), show(res));
  assert.equal(fs.readFileSync(settings, 'utf8'), ORIGINAL);
  assert.deepEqual(backupsOf(settings), [], 'a dry run made a backup');
});

await r.test('install: settings.json backed up first, the entry and the hooks added, every other setting kept', async () => {
  const res = await setup(['install', '--host', 'gemini-cli']);
  assert.equal(res.code, 0, show(res));
  // Two edits of the one file (the entry, then the hooks), each backed up.
  const backups = backupsOf(settings);
  assert.equal(backups.length, 2, `backups ${backups}`);
  assert.equal(fs.readFileSync(backups[0], 'utf8'), ORIGINAL, 'the backup is the original');
  assert.equal(fs.statSync(backups[0]).mode & 0o777, 0o600, 'backup mode');
  assert.equal(fs.statSync(settings).mode & 0o777, 0o644, "the file's own mode kept");
  assert.ok(res.stdout.includes(`Gemini CLI (user): tmcra registered in ${settings}\n    backup: ${backups[0]}\n`), show(res));
  assert.ok(res.stdout.includes(`Gemini CLI (user) hooks: 4 tmcra-mcp hooks added to ${settings}\n    backup: ${backups[1]}\n`), show(res));
  assert.doesNotMatch(res.stdout, /variables Codex/, show(res));
  const text = fs.readFileSync(settings, 'utf8');
  const doc = JSON.parse(text);
  assert.deepEqual(doc.mcpServers.tmcra, { command: bins.server, args: [], env: geminiEntryEnv(env) });
  assert.deepEqual(Object.keys(doc.hooks), ['SessionStart', 'BeforeAgent', 'AfterAgent', 'SessionEnd']);
  delete doc.mcpServers.tmcra;
  delete doc.hooks;
  assert.deepEqual(doc, JSON.parse(ORIGINAL), 'other content changed');
  assert.ok(text.startsWith('{\n  "general": {\n    "vimMode": true,'), `indent or order changed:\n${text}`);
  assert.ok(text.endsWith('}\n'), 'final newline kept');
});

await r.test('gemini mcp list: nothing starts in an untrusted folder; trusted, tmcra is connected', async () => {
  const untrusted = await geminiList();
  assert.match(untrusted.text, /disabled because this folder is untrusted/, untrusted.text);
  assert.equal(untrusted.servers.tmcra?.status, 'Disabled', untrusted.text);
  trust(home, project);
  const { text, servers } = await geminiList();
  assert.equal(servers.tmcra?.line, connectedLine(bins.server), text);
  assert.equal(servers.other?.status, 'Connected', `the other server still starts\n${text}`);
});

await r.test('install again: nothing changed, no second backup', async () => {
  const before = fs.readFileSync(settings, 'utf8');
  const res = await setup(['install', '--host', 'gemini-cli']);
  assert.equal(res.code, 0, show(res));
  assert.match(res.stdout, /tmcra is already registered in .*; nothing changed/, show(res));
  assert.match(res.stdout, /4 tmcra-mcp hooks already in .*; nothing changed/, show(res));
  assert.equal(fs.readFileSync(settings, 'utf8'), before);
  assert.equal(backupsOf(settings).length, 2);
});

await r.test('status: registered with this tmcra-mcp', async () => {
  const row = await statusRow([]);
  assert.equal(row.state, 'registered', JSON.stringify(row));
  assert.equal(row.command, bins.server);
  assert.equal(row.command_is_this_install, true);
  assert.equal(row.command_runs, true);
  assert.deepEqual(row.hooks.events.map((e) => [e.event, e.installed, e.current, e.host_runs_it]), [
    ['SessionStart', true, true, 'yes'], ['BeforeAgent', true, true, 'yes'],
    ['AfterAgent', true, true, 'yes'], ['SessionEnd', true, true, 'yes'],
  ]);
  const text = await setup(['status', '--host', 'gemini-cli']);
  assert.ok(text.stdout.includes(`Gemini CLI (user): registered as tmcra → ${bins.server}\n    ${settings}\n`), show(text));
});

await r.test('remove --dry-run changes nothing', async () => {
  const before = fs.readFileSync(settings, 'utf8');
  const res = await setup(['remove', '--host', 'gemini-cli', '--dry-run']);
  assert.equal(res.code, 0, show(res));
  assert.ok(res.stdout.includes(`Gemini CLI (user): tmcra would be removed from ${settings}\n`), show(res));
  assert.ok(res.stdout.includes(`Gemini CLI (user) hooks: tmcra-mcp hooks would be removed from ${settings}\n`), show(res));
  assert.equal(fs.readFileSync(settings, 'utf8'), before);
  assert.equal(backupsOf(settings).length, 2);
});

await r.test('remove: settings.json is the original again, byte for byte; Gemini CLI agrees', async () => {
  const installed = fs.readFileSync(settings, 'utf8');
  const res = await setup(['remove', '--host', 'gemini-cli']);
  assert.equal(res.code, 0, show(res));
  assert.match(res.stdout, /Gemini CLI \(user\): tmcra removed from /, show(res));
  assert.match(res.stdout, /Gemini CLI \(user\) hooks: tmcra-mcp hooks removed from /, show(res));
  const after = fs.readFileSync(settings);
  assert.ok(after.equals(Buffer.from(ORIGINAL)), `not the original bytes:\n${after}`);
  const backups = backupsOf(settings);
  assert.equal(backups.length, 4, `backups ${backups}`);
  assert.ok(after.equals(fs.readFileSync(backups[0])), 'not the bytes of the backup taken by install');
  assert.equal(fs.readFileSync(backups[2], 'utf8'), installed, 'the backup taken by remove');
  const { text, servers } = await geminiList();
  assert.equal(servers.tmcra, undefined, text);
  assert.equal(servers.other?.status, 'Connected', text);
  const again = await setup(['remove', '--host', 'gemini-cli']);
  assert.equal(again.code, 0, show(again));
  assert.match(again.stdout, /tmcra is not registered in .*; nothing changed/, show(again));
  assert.match(again.stdout, /no tmcra-mcp hooks in .*; nothing changed/, show(again));
  assert.equal(backupsOf(settings).length, 4);
});

await r.test('project scope: DIR/.gemini/settings.json, connected in the trusted project, removed byte for byte', async () => {
  const file = path.join(project, '.gemini', 'settings.json');
  const original = `${JSON.stringify({ general: { vimMode: false }, mcpServers: { lint: { command: '/bin/true' } } }, null, '\t')}\n`;
  fs.mkdirSync(path.dirname(file));
  fs.writeFileSync(file, original, { mode: 0o644 });
  const res = await setup(['install', '--project', project, '--host', 'gemini-cli']);
  assert.equal(res.code, 0, show(res));
  assert.ok(res.stdout.includes(`Gemini CLI (project ${project}): tmcra registered in ${file}\n`), show(res));
  assert.deepEqual(JSON.parse(fs.readFileSync(file, 'utf8')).mcpServers, { lint: { command: '/bin/true' }, tmcra: { command: bins.server, args: [], env: geminiEntryEnv(env) } });
  assert.ok(res.stdout.includes(`Gemini CLI (project ${project}) hooks: 4 tmcra-mcp hooks added to ${file}\n`), show(res));
  assert.match(fs.readFileSync(file, 'utf8'), /\n\t\t"tmcra": \{\n\t\t\t"command"/, 'tab indent kept');
  assert.equal(fs.readFileSync(settings, 'utf8'), ORIGINAL, 'the user file untouched');
  const { text, servers } = await geminiList();
  assert.equal(servers.tmcra?.line, connectedLine(bins.server), text);
  const row = await statusRow(['--project', project]);
  assert.deepEqual([row.label, row.path, row.state], [`Gemini CLI (project ${project})`, file, 'registered']);

  const removed = await setup(['remove', '--project', project, '--host', 'gemini-cli']);
  assert.equal(removed.code, 0, show(removed));
  assert.ok(fs.readFileSync(file).equals(Buffer.from(original)), 'not the original bytes');
  assert.equal(fs.readFileSync(backupsOf(file)[0], 'utf8'), original, 'the backup taken by install');

  // A project without one: created 0600 in a 0700 directory.
  const other = path.join(root, 'other-project');
  fs.mkdirSync(other);
  const created = await setup(['install', '--project', other, '--host', 'gemini-cli']);
  assert.equal(created.code, 0, show(created));
  assert.match(created.stdout, /\(created\)/, show(created));
  const newFile = path.join(other, '.gemini', 'settings.json');
  assert.equal(fs.statSync(newFile).mode & 0o777, 0o600);
  assert.equal(fs.statSync(path.dirname(newFile)).mode & 0o777, 0o700);
});

await r.test('a settings.json with comments is left untouched, the entry printed to add by hand', async () => {
  const other = path.join(root, 'comments-home');
  const file = path.join(other, '.gemini', 'settings.json');
  const jsonc = '{\n  // my settings\n  "general": { "vimMode": true }\n}\n';
  fs.mkdirSync(path.dirname(file), { recursive: true });
  fs.writeFileSync(file, jsonc);
  const otherEnv = geminiEnv(other);
  const res = await run(SETUP, ['install', '--host', 'gemini-cli'], { env: otherEnv, timeoutMs: 20_000 });
  assert.equal(res.code, 1, show(res));
  assert.match(res.stdout, /has comments/, show(res));
  const entry = { mcpServers: { tmcra: { command: bins.server, args: [], env: geminiEntryEnv(otherEnv) } } };
  assert.ok(res.stdout.includes(`add this by hand:\n${JSON.stringify(entry, null, 2)}\n`), show(res));
  assert.equal(fs.readFileSync(file, 'utf8'), jsonc);
  assert.deepEqual(fs.readdirSync(path.dirname(file)), ['settings.json'], 'no backup, no temp file');
});

await r.test('GEMINI_CLI_HOME: setup writes the settings.json Gemini CLI reads there', async () => {
  const personal = path.join(root, 'personal-home');
  const geminiHome = path.join(root, 'gemini-cli-home');
  fs.mkdirSync(personal);
  const e = { ...geminiEnv(personal), GEMINI_CLI_HOME: geminiHome };
  trust(geminiHome, project);
  const res = await setup(['install', '--host', 'gemini-cli'], { env: e });
  assert.equal(res.code, 0, show(res));
  const file = path.join(geminiHome, '.gemini', 'settings.json');
  assert.ok(res.stdout.includes(`Gemini CLI (user): tmcra registered in ${file} (created)\n`), show(res));
  assert.deepEqual(fs.readdirSync(personal), [], 'nothing in HOME');
  const { text, servers } = await geminiList({ env: e });
  assert.equal(servers.tmcra?.line, connectedLine(bins.server), text);
  const removed = await setup(['remove', '--host', 'gemini-cli'], { env: e });
  assert.equal(removed.code, 0, show(removed));
  assert.deepEqual(JSON.parse(fs.readFileSync(file, 'utf8')), { mcpServers: {} });
});

await r.test('environment: Gemini CLI withholds TMCRA_API_KEY, an entry\'s "$TMCRA_API_KEY" passes it', async () => {
  // What docs/setup.md says of Gemini's filtering, seen by a stand-in server that writes its
  // environment down and exits.
  const probeHome = path.join(root, 'probe-home');
  const probe = path.join(root, 'probe.sh');
  fs.writeFileSync(probe, '#!/bin/sh\nenv | grep -E "^(TMCRA_|SSL_CERT_)" | sort > "$1"\n', { mode: 0o755 });
  const out = (name) => path.join(root, `${name}.env`);
  fs.mkdirSync(path.join(probeHome, '.gemini'), { recursive: true });
  fs.writeFileSync(path.join(probeHome, '.gemini', 'settings.json'), JSON.stringify({
    mcpServers: {
      plain: { command: probe, args: [out('plain')] },
      passed: { command: probe, args: [out('passed')], env: { TMCRA_API_KEY: '$TMCRA_API_KEY' } },
    },
  }));
  trust(probeHome, project);
  const e = { ...geminiEnv(probeHome), TMCRA_API_KEY: 'test-key', TMCRA_BASE_URL: 'https://memory.invalid', SSL_CERT_FILE: '/nonexistent.pem' };
  await geminiList({ env: e });
  const plain = fs.readFileSync(out('plain'), 'utf8');
  assert.doesNotMatch(plain, /TMCRA_API_KEY|SSL_CERT_FILE/, plain);
  assert.match(plain, /^TMCRA_BASE_URL=https:\/\/memory\.invalid$/m, plain);
  assert.match(plain, /^TMCRA_DATA_DIR=/m, plain);
  assert.match(fs.readFileSync(out('passed'), 'utf8'), /^TMCRA_API_KEY=test-key$/m);
});

await r.test('install with TMCRA_API_KEY, TMCRA_BASE_URL and SSL_CERT_FILE set: the entry passes them as $NAME references, the values reach the server (empty when unset) and are never written', async () => {
  // The registered command is a stand-in that writes its environment to <itself>.env.
  const keyHome = path.join(root, 'key-home');
  const probe = path.join(root, 'probe-setup.sh');
  fs.writeFileSync(probe, '#!/bin/sh\nenv | grep -E "^(TMCRA_|SSL_CERT_)" | sort > "$0.env"\n', { mode: 0o755 });
  fs.mkdirSync(keyHome);
  trust(keyHome, project);
  const canary = `canary-key-${process.pid}`;
  const e = { ...geminiEnv(keyHome), TMCRA_API_KEY: canary, TMCRA_BASE_URL: 'https://memory.invalid', SSL_CERT_FILE: '/nonexistent.pem' };
  const res = await setup(['install', '--host', 'gemini-cli', '--no-hooks', '--command', probe], { env: e });
  assert.equal(res.code, 0, show(res));
  const names = Object.keys(geminiEntryEnv(e, false)).join(', ');
  assert.ok(res.stdout.includes(`as $NAME references it fills from its environment\n    (it withholds those named like secrets otherwise): ${names}\n`), show(res));
  assert.ok(!res.stdout.includes(canary) && !res.stderr.includes(canary), show(res));
  const file = path.join(keyHome, '.gemini', 'settings.json');
  const text = fs.readFileSync(file, 'utf8');
  assert.ok(!text.includes(canary), text);
  assert.deepEqual(JSON.parse(text).mcpServers.tmcra, {
    command: probe, args: [], env: geminiEntryEnv(e, false),
  });
  assert.equal(JSON.parse(text).mcpServers.tmcra.env.TMCRA_API_KEY, '$TMCRA_API_KEY');
  assert.equal(JSON.parse(text).mcpServers.tmcra.env.SSL_CERT_FILE, '$SSL_CERT_FILE');
  await geminiList({ env: e });
  const seen = fs.readFileSync(`${probe}.env`, 'utf8');
  assert.match(seen, new RegExp(`^TMCRA_API_KEY=${canary}$`, 'm'), seen);
  assert.match(seen, /^SSL_CERT_FILE=\/nonexistent\.pem$/m, seen);
  assert.match(seen, /^TMCRA_BASE_URL=https:\/\/memory\.invalid$/m, seen);
  // Unset when Gemini starts: an empty value, which tmcra-mcp reads as unset.
  const { TMCRA_API_KEY: _key, ...unset } = e;
  fs.rmSync(`${probe}.env`);
  await geminiList({ env: unset });
  const bare = fs.readFileSync(`${probe}.env`, 'utf8');
  assert.match(bare, /^TMCRA_API_KEY=$/m, bare);
  assert.match(bare, /^TMCRA_BASE_URL=https:\/\/memory\.invalid$/m, bare);
});

await r.finish();
