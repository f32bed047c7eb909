#!/usr/bin/env node
// mcpb_bundle.mjs — the MCPB bundle (packaging/mcpb/pack.sh) built from the tmcra-mcp under
// test, checked with the pinned mcpb CLI (2.1.2: validate, info, unpack) and then started the
// way an MCPB host starts it: ${__dirname}, ${HOME} and ${user_config.*} expanded in
// mcp_config, the user's values (or the defaults) in the environment, the SDK client on stdio.
//
//   node mcpb_bundle.mjs <tmcra-mcp> <tmcra-mcp-testserver>
import fs from 'node:fs';
import path from 'node:path';
import {
  Runner, assert, parseBins, run, tmpDir, HERE, connectV1, callOk, serverEnv, textOf,
} from './lib.mjs';

const NAME = 'mcpb_bundle.mjs';
const bins = parseBins(NAME);
const r = new Runner(NAME);
const PACKAGING = path.join(HERE, '..', '..', 'packaging', 'mcpb');
const MCPB = path.join(PACKAGING, 'node_modules', '.bin', 'mcpb');
if (!fs.existsSync(MCPB)) {
  console.error(`${NAME}: ${MCPB} is missing: run npm ci in packaging/mcpb`);
  console.log('0 passed, 1 failed');
  process.exit(1);
}
const root = tmpDir();
const out = path.join(root, 'dist');
const unpacked = path.join(root, 'unpacked');
const show = (res) => `exit ${res.code}\nstdout: ${res.stdout.slice(0, 3000)}\nstderr: ${res.stderr.slice(0, 3000)}`;

let bundle;
let manifest;

await r.test('pack.sh builds a bundle that mcpb validates, and mcpb info reads it', async () => {
  const res = await run('bash', [path.join(PACKAGING, 'pack.sh'), '--bin', bins.server, '--out', out], { timeoutMs: 120_000 });
  assert.equal(res.code, 0, show(res));
  assert.match(res.stderr, /Manifest schema validation passes!/, show(res));
  bundle = res.stdout.trim().split('\n').pop();
  assert.match(path.basename(bundle), /^tmcra-mcp-\d+\.\d+\.\d+-linux-[a-z0-9]+\.mcpb$/, bundle);
  assert.ok(fs.statSync(bundle).size > 100_000, 'a bundle of some size');
  const info = await run(MCPB, ['info', bundle], { timeoutMs: 60_000 });
  assert.equal(info.code, 0, show(info));
  assert.match(info.stdout + info.stderr, /tmcra-mcp/, show(info));
}, { timeoutMs: 180_000 });  // pack.sh strips and zips the binary: 40 s on a loaded host

await r.test('the bundle holds the manifest, an executable server/tmcra-mcp, LICENSE and NOTICE', async () => {
  const res = await run(MCPB, ['unpack', bundle, unpacked], { timeoutMs: 60_000 });
  assert.equal(res.code, 0, show(res));
  manifest = JSON.parse(fs.readFileSync(path.join(unpacked, 'manifest.json'), 'utf8'));
  const entry = path.join(unpacked, manifest.server.entry_point);
  assert.equal(manifest.server.type, 'binary');
  assert.equal(manifest.server.entry_point, 'server/tmcra-mcp');
  assert.ok(fs.statSync(entry).mode & 0o100, 'entry point executable');
  for (const f of ['LICENSE', 'NOTICE']) {
    assert.equal(fs.readFileSync(path.join(unpacked, f), 'utf8'), fs.readFileSync(path.join(HERE, '..', '..', f), 'utf8'), f);
  }
  assert.deepEqual(manifest.compatibility, { platforms: ['linux'] });
  assert.equal(manifest.user_config.api_key.sensitive, true, 'the key field is masked');
  assert.ok(!JSON.stringify(manifest.server.mcp_config.args).includes('user_config'), 'no user value in args');
});

await r.test('the manifest carries the binary\'s own version and exactly its tools', async () => {
  const version = await run(bins.server, ['--version']);
  assert.equal(`tmcra-mcp ${manifest.version}`, version.stdout.trim());
  const s = await connectV1({ bin: bins.server, label: 'mcpb-tools' });
  try {
    const { tools } = await s.client.listTools();
    assert.deepEqual(manifest.tools, tools.map((t) => ({ name: t.name, description: t.description })));
    assert.equal(tools.length, 10);
  } finally {
    await s.closeQuietly();
  }
});

// What an MCPB host does with mcp_config, by the mcpb package's own getMcpConfigForManifest
// (placeholders expanded, the fields' defaults, then the user's values).
async function startAsHost(label, userConfig) {
  const { getMcpConfigForManifest } = await import(path.join(PACKAGING, 'node_modules', '@anthropic-ai', 'mcpb', 'dist', 'index.js'));
  const home = path.join(root, `home-${label}`);
  fs.mkdirSync(home, { recursive: true });
  const cfg = await getMcpConfigForManifest({
    manifest, extensionPath: unpacked, userConfig, pathSeparator: '/',
    systemDirs: { HOME: home, DESKTOP: path.join(home, 'Desktop'), DOCUMENTS: path.join(home, 'Documents'), DOWNLOADS: path.join(home, 'Downloads') },
  });
  assert.ok(cfg, 'the host got an MCP config');
  assert.equal(cfg.command, path.join(unpacked, 'server', 'tmcra-mcp'));
  for (const [k, v] of Object.entries(cfg.env)) {
    assert.ok(!v.includes('${'), `${k} left a placeholder: ${v}`);
    if (k === 'TMCRA_DATA_DIR' && v !== '') assert.ok(path.isAbsolute(v), `${k} is relative: ${v}`);
  }
  const env = { ...serverEnv(), HOME: home, ...cfg.env };
  const s = await connectV1({ bin: cfg.command, args: cfg.args, label: `mcpb-${label}`, env });
  return { s, home, env };
}

await r.test('started as a host starts it, with the defaults: embedded memory in the default folder', async () => {
  const { s, home, env } = await startAsHost('defaults', undefined);
  try {
    assert.equal(env.TMCRA_API_KEY, '', 'an empty key, which tmcra-mcp reads as none');
    assert.equal(env.TMCRA_DATA_DIR, '', 'an empty folder: tmcra-mcp\'s own default');
    const status = await callOk(s.client, 'tmcra_status', {});
    assert.equal(status.memory_mode, 'embedded', JSON.stringify(status).slice(0, 300));
    assert.equal(status.memory.data_dir, path.join(home, '.local', 'share', 'tmcra'));
    const saved = await callOk(s.client, 'tmcra_ingest', { session_id: 'mcpb', messages: [{ message_id: 'm1', role: 'user', content: 'the bundle remembers teal kites' }] });
    assert.ok(saved, 'ingest answered');
    await s.closeAndCheckExit();
  } finally {
    await s.closeQuietly();
  }
});

await r.test('with a key and URL from the settings form: remote memory, the key never shown', async () => {
  const key = 'tmcra_MCPBTEST.0f1e2d3c4b5a69788796a5b4c3d2e1f00f1e2d3c4b5a69788796a5b4c3d2e1f0';
  const { s } = await startAsHost('remote', { api_key: key, base_url: 'https://127.0.0.1:9', log_level: 'debug' });
  try {
    const res = await s.client.callTool({ name: 'tmcra_status', arguments: {} });
    const status = res.structuredContent;
    assert.equal(status.memory_mode, 'remote', JSON.stringify(status).slice(0, 300));
    assert.equal(status.memory.mode, 'service');
    assert.equal(status.memory.endpoint, 'https://127.0.0.1:9');
    assert.equal(status.memory.credential, 'TMCRA_API_KEY');
    assert.ok(!JSON.stringify(res).includes(key.split('.')[1]) && !textOf(res).includes(key), 'the key is not in the answer');
    await s.closeAndCheckExit();
    assert.ok(!s.stderr().includes(key.split('.')[1]), 'the key is not in stderr');
  } finally {
    await s.closeQuietly();
  }
});

await r.finish();
