#!/usr/bin/env node
// mcpb_bundle.mjs — the MCPB bundle (packaging/mcpb/pack.sh) built from the tmcra-mcp under
// test, checked with the pinned mcpb CLI (2.1.2: validate, info, unpack) and then started the
// way an MCPB host starts it: ${__dirname}, ${HOME} and ${user_config.*} expanded in
// mcp_config, the user's values (or the defaults) in the environment, the SDK client on stdio.
// The manifest's platforms and requirements are compared with what readelf and objdump say of
// the packed binary; the MCP Registry server.json written beside the bundle with the registry's
// rules (packaging/mcpb/check_server_json.mjs), its hash with the bundle's bytes, and the
// checker itself with broken copies of it.
//
//   node mcpb_bundle.mjs <tmcra-mcp> <tmcra-mcp-testserver>
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import {
  Runner, assert, parseBins, run, tmpDir, HERE, connectV1, callOk, serverEnv, textOf,
} from './lib.mjs';

const NAME = 'mcpb_bundle.mjs';
const bins = parseBins(NAME);
// The bundle packs what ships: the package tree's release tmcra-mcp when the test command names
// it (TMCRA_RELEASE_BIN), else the tmcra-mcp under test.
const SERVER = process.env.TMCRA_RELEASE_BIN || bins.server;
const r = new Runner(NAME);
const PACKAGING = path.join(HERE, '..', '..', 'packaging', 'mcpb');
const MCPB = path.join(PACKAGING, 'node_modules', '.bin', 'mcpb');
const { checkServerJson, SCHEMA_URL } = await import(path.join(PACKAGING, 'check_server_json.mjs'));
// The registry settings pack.sh is given: the name as an option, the release URL from the
// environment (no trailing slash: pack.sh adds it).
const REGISTRY_NAME = 'io.github.tmcra-test/tmcra-mcp';
const RELEASE_URL = 'https://github.com/tmcra-test/tmcra-mcp/releases/download/v9.9.9';
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
let serverJson;

await r.test('pack.sh builds a bundle that mcpb validates, and mcpb info reads it', async () => {
  const env = { ...process.env, TMCRA_RELEASE_URL: RELEASE_URL, TMCRA_REGISTRY_NAME: 'io.github.not/this-one' };
  const res = await run('bash', [path.join(PACKAGING, 'pack.sh'), '--bin', SERVER, '--out', out,
    '--registry-name', REGISTRY_NAME], { env, timeoutMs: 120_000 });
  assert.equal(res.code, 0, show(res));
  assert.match(res.stderr, /Manifest schema validation passes!/, show(res));
  assert.doesNotMatch(res.stderr, /placeholder/, show(res));
  bundle = res.stdout.trim().split('\n').pop();
  assert.match(path.basename(bundle), /^tmcra-mcp-\d+\.\d+\.\d+-linux-[a-z0-9]+\.mcpb$/, bundle);
  // The CPU in the name is the binary's (ELF e_machine), whatever machine packs it.
  const machine = fs.readFileSync(SERVER).readUInt16LE(18);
  assert.equal(path.basename(bundle).split('-').pop(), `${{ 62: 'x64', 183: 'arm64' }[machine]}.mcpb`, bundle);
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
  assert.equal(manifest.user_config.api_key.sensitive, true, 'the key field is masked');
  assert.ok(!JSON.stringify(manifest.server.mcp_config.args).includes('user_config'), 'no user value in args');
});

await r.test('the manifest carries the binary\'s own version and exactly its tools', async () => {
  const version = await run(SERVER, ['--version']);
  assert.equal(`tmcra-mcp ${manifest.version}`, version.stdout.trim());
  const s = await connectV1({ bin: SERVER, label: 'mcpb-tools' });
  try {
    const { tools } = await s.client.listTools();
    assert.deepEqual(manifest.tools, tools.map((t) => ({ name: t.name, description: t.description })));
    assert.equal(tools.length, 10);
  } finally {
    await s.closeQuietly();
  }
});

// What readelf and objdump (binutils, which pack.sh's strip comes with) say of the packed binary.
async function tool(cmd, args) {
  const res = await run(cmd, args, { timeoutMs: 60_000 });
  assert.equal(res.code, 0, show(res));
  return res.stdout;
}

await r.test('the manifest declares the binary\'s platform and says which CPU, glibc and libraries it needs', async () => {
  const entry = path.join(unpacked, manifest.server.entry_point);
  const header = await tool('readelf', ['-h', entry]);
  assert.match(header, /Class:\s+ELF64/, header);
  const cpu = /Machine:\s+Advanced Micro Devices X86-64/.test(header) ? ['x86_64', 'amd64']
    : /Machine:\s+AArch64/.test(header) ? ['aarch64', 'arm64'] : assert.fail(header);
  assert.deepEqual(manifest.compatibility, { platforms: ['linux'] }, 'exactly the platform the binary runs on');
  assert.match(header, /OS\/ABI:\s+UNIX - (System V|GNU)/, header);
  assert.match(await tool('readelf', ['-n', entry]), /OS: Linux/, 'the ABI tag says Linux');
  assert.ok(manifest.description.includes(`For ${cpu[0]} (${cpu[1]}) Linux only`), manifest.description);
  for (const words of [new RegExp(`\\b${cpu[0]}\\b`), new RegExp(`\\b${cpu[1]}\\b`), /\bLinux\b/, /Debian 12/]) {
    assert.match(manifest.description, words);
    assert.match(manifest.long_description, words);
  }
  const glibc = [...(await tool('objdump', ['-T', entry])).matchAll(/\bGLIBC_(\d+(?:\.\d+)+)\b/g)]
    .map((m) => m[1])
    .sort((a, b) => a.localeCompare(b, 'en', { numeric: true }))
    .pop();
  assert.ok(glibc, 'objdump found GLIBC_ symbol versions');
  assert.ok(manifest.description.includes(`glibc ${glibc} or newer`), `${manifest.description} (objdump: GLIBC_${glibc})`);
  assert.ok(manifest.long_description.includes(`glibc ${glibc} or newer`), manifest.long_description);
  const needed = [...(await tool('readelf', ['-d', entry])).matchAll(/\(NEEDED\)\s+Shared library: \[([^\]]+)\]/g)].map((m) => m[1]);
  assert.ok(needed.includes('libc.so.6') && needed.includes('libsqlite3.so.0'), needed.join(' '));
  for (const soname of needed) assert.ok(manifest.long_description.includes(soname), `${soname} is named`);
  // The Debian 12 package of each library, as dpkg says, where this runs on Debian 12.
  const osRelease = fs.existsSync('/etc/os-release') ? fs.readFileSync('/etc/os-release', 'utf8') : '';
  if (/^ID=debian$/m.test(osRelease) && /^VERSION_ID="12"$/m.test(osRelease)) {
    for (const soname of needed) {
      // A pattern: Debian 12 lists some libraries under /lib, others under /usr/lib.
      const owner = await tool('dpkg', ['-S', `*/${cpu[0]}-linux-gnu/${soname}`]);
      const pkg = owner.split(':')[0];
      assert.ok(manifest.long_description.includes(`${pkg} (`), `${soname} is in ${pkg}, which is named`);
    }
  }
});

await r.test('server.json beside the bundle: the registry\'s rules, the bundle\'s URL and SHA-256, the binary\'s version', async () => {
  const file = path.join(path.dirname(bundle), 'server.json');
  serverJson = JSON.parse(fs.readFileSync(file, 'utf8'));
  assert.deepEqual(checkServerJson(serverJson, { bundle }), []);
  assert.equal(serverJson.$schema, 'https://static.modelcontextprotocol.io/schemas/2025-12-11/server.schema.json');
  assert.equal(serverJson.name, REGISTRY_NAME, 'the option wins over the environment');
  const version = (await run(SERVER, ['--version'])).stdout.trim();
  assert.equal(`tmcra-mcp ${serverJson.version}`, version);
  assert.ok(serverJson.description.length <= 100, serverJson.description);
  assert.deepEqual(serverJson.repository, { url: 'https://github.com/tmcra-test/tmcra-mcp', source: 'github' });
  assert.equal(serverJson.packages.length, 1);
  const [pkg] = serverJson.packages;
  assert.equal(pkg.registryType, 'mcpb');
  assert.equal(pkg.identifier, `${RELEASE_URL}/${path.basename(bundle)}`);
  assert.equal(pkg.version, serverJson.version);
  assert.equal(pkg.fileSha256, crypto.createHash('sha256').update(fs.readFileSync(bundle)).digest('hex'));
  assert.deepEqual(pkg.transport, { type: 'stdio' });
  const vars = Object.fromEntries(pkg.environmentVariables.map((v) => [v.name, v]));
  assert.deepEqual(Object.keys(vars).sort(), Object.keys(manifest.server.mcp_config.env).sort());
  assert.equal(vars.TMCRA_API_KEY.isSecret, true, 'the key is a secret');
  assert.equal(vars.TMCRA_BASE_URL.isSecret, false);
  assert.ok(vars.TMCRA_BASE_URL.description.includes('https://api.tmcra.com'), vars.TMCRA_BASE_URL.description);
  assert.equal(vars.TMCRA_DATA_DIR.format, 'filepath');
  for (const v of Object.values(vars)) assert.equal(v.isRequired, false, `${v.name} is optional`);
  const check = await run('node', [path.join(PACKAGING, 'check_server_json.mjs'), file, bundle]);
  assert.equal(check.code, 0, show(check));
});

await r.test('without registry settings, server.json holds the documented placeholders and says so', async () => {
  const file = path.join(root, 'placeholder-server.json');
  const res = await run('node', [path.join(PACKAGING, 'make_server_json.mjs'), '--manifest', path.join(unpacked, 'manifest.json'),
    '--bundle', bundle, '--out', file]);
  assert.equal(res.code, 0, show(res));
  assert.match(res.stderr, /registry name is a placeholder \(io\.github\.OWNER\/tmcra-mcp\): set --registry-name/, show(res));
  assert.match(res.stderr, /release URL is a placeholder .*: set --release-url/, show(res));
  const doc = JSON.parse(fs.readFileSync(file, 'utf8'));
  assert.equal(doc.name, 'io.github.OWNER/tmcra-mcp');
  assert.equal(doc.packages[0].identifier,
    `https://github.com/OWNER/tmcra-mcp/releases/download/v${doc.version}/${path.basename(bundle)}`);
  assert.deepEqual(checkServerJson(doc, { bundle }), []);
});

await r.test('the server.json checker refuses a broken hash, a bad name, a missing field and the rest', async () => {
  const broken = (edit) => {
    const doc = structuredClone(serverJson);
    edit(doc, doc.packages[0]);
    return doc;
  };
  const sha = serverJson.packages[0].fileSha256;
  const flipped = (sha[0] === '0' ? '1' : '0') + sha.slice(1);
  const cases = [
    ['a hash of another file', (d, p) => { p.fileSha256 = flipped; }, /fileSha256: not the SHA-256/],
    ['an upper-case hash', (d, p) => { p.fileSha256 = sha.toUpperCase(); }, /fileSha256: not 64 lowercase hex/],
    ['a short hash', (d, p) => { p.fileSha256 = sha.slice(1); }, /fileSha256: not 64 lowercase hex/],
    ['no hash', (d, p) => { delete p.fileSha256; }, /fileSha256: missing/],
    ['two slashes in the name', (d) => { d.name = 'io.github.x/tmcra/mcp'; }, /name: .* exactly one "\/"/],
    ['no slash in the name', (d) => { d.name = 'io.github.x.tmcra-mcp'; }, /name: .* exactly one "\/"/],
    ['a namespace that is not reverse-DNS', (d) => { d.name = 'tmcra/tmcra-mcp'; }, /not reverse-DNS/],
    ['a name part ending in a dot', (d) => { d.name = 'io.github.x/tmcra-mcp.'; }, /must be letters, digits/],
    ['a namespace starting with a hyphen', (d) => { d.name = '-io.github.x/tmcra-mcp'; }, /namespace .* must be letters/],
    ['no name', (d) => { delete d.name; }, /name: missing/],
    ['no description', (d) => { delete d.description; }, /description: missing/],
    ['a 101-character description', (d) => { d.description = 'x'.repeat(101); }, /description: 101 characters/],
    ['no version', (d) => { delete d.version; }, /^version: missing/],
    ['a version range', (d) => { d.version = '^0.1.0'; }, /version: .* is a range/],
    ['a wildcard version', (d, p) => { p.version = '0.1.x'; }, /packages\[0\]\.version: .* is a range/],
    ['"latest"', (d) => { d.version = 'latest'; }, /"latest" is reserved/],
    ['no $schema', (d) => { delete d.$schema; }, /\$schema: must be/],
    ['an older $schema', (d) => { d.$schema = SCHEMA_URL.replace('2025-12-11', '2025-09-29'); }, /\$schema: must be/],
    ['no packages', (d) => { delete d.packages; }, /packages: must hold exactly one/],
    ['an npm package', (d, p) => { p.registryType = 'npm'; }, /registryType: must be "mcpb"/],
    ['no transport', (d, p) => { delete p.transport; }, /transport: missing/],
    ['an sse transport', (d, p) => { p.transport = { type: 'sse', url: 'https://example.com/sse' }; }, /transport.type: must be "stdio"/],
    ['an http URL', (d, p) => { p.identifier = p.identifier.replace('https:', 'http:'); }, /identifier: must use https/],
    ['a host off GitHub and GitLab', (d, p) => { p.identifier = `https://example.com/mcp/${path.basename(bundle)}`; }, /neither github\.com nor gitlab\.com/],
    ['a GitHub URL that is no release asset', (d, p) => { p.identifier = `https://github.com/o/r/raw/main/${path.basename(bundle)}`; }, /not a GitHub release asset/],
    ['a registryBaseUrl', (d, p) => { p.registryBaseUrl = 'https://github.com'; }, /registryBaseUrl: not allowed/],
    ['a snake_case key', (d, p) => { p.file_sha256 = p.fileSha256; }, /unknown key "file_sha256"/],
    ['a repository on another forge', (d) => { d.repository = { url: 'https://example.org/x/y', source: 'forge' }; }, /neither github nor gitlab/],
    ['an http websiteUrl', (d) => { d.websiteUrl = 'http://tmcra.example'; }, /websiteUrl: must use https/],
    ['a _meta key the registry drops', (d) => { d._meta = { 'com.example/x': {} }; }, /_meta: unknown key/],
    ['a secret flag that is not a boolean', (d, p) => { p.environmentVariables[1].isSecret = 'yes'; }, /isSecret: not a boolean/],
  ];
  for (const [what, edit, expected] of cases) {
    const problems = checkServerJson(broken(edit), { bundle });
    assert.ok(problems.some((p) => expected.test(p)), `${what}: ${JSON.stringify(problems)}`);
  }
  // And the command line: exit 1, naming the field.
  const bad = path.join(root, 'bad-server.json');
  fs.writeFileSync(bad, JSON.stringify(broken((d, p) => { p.fileSha256 = flipped; })));
  const res = await run('node', [path.join(PACKAGING, 'check_server_json.mjs'), bad, bundle]);
  assert.equal(res.code, 1, show(res));
  assert.match(res.stderr, /fileSha256/, show(res));
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
