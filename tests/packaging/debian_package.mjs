#!/usr/bin/env node
// debian_package.mjs — the Debian package, made and installed as a user would: CPack makes the
// .deb and the .tar.gz from the package tree (the `package` preset, built by the test command),
// and the .deb is installed with apt into a clean Debian 12 root made for the test with
// debootstrap (never into this machine). There:
// - apt installs it with exactly the dependencies its Depends names;
// - the installed tmcra-mcp, tmcra-mcp-setup and tmcra-memd answer --version, tmcra-mcp an
//   MCP handshake and a tool call (also with a remote memory configured: libcurl, loaded with
//   dlopen, is there), `tmcra-mcp console` finds its helper in /usr/libexec;
// - `man tmcra-mcp` (and the two others) renders without warnings, with each page's sections
//   and every option and variable that starts an indented line of its --help;
// - tmcra-memd runs as the tmcra-memd user postinst made, with the command line and
//   credentials of tmcra-memd.service, and answers /healthz; the template's command line is
//   the same with the instance's own paths;
// - `systemd-analyze verify` passes on both units, and `systemd-analyze security` rates them
//   (the score is printed; goal 2.0 or less);
// - an upgrade restarts the memd services that run, and `dpkg -r` stops them (systemd's tools
//   logged, as PID 1 is not systemd);
// - `dpkg -r` removes the programs and leaves the users' memory, memd's data and the config;
// - lintian's tags are each explained in packaging/README.md;
// - the programs are hardened (PIE, full RELRO, BIND_NOW, fortified, stack protector);
// - the tarball holds the same files as the .deb.
//
//   node tests/packaging/debian_package.mjs <package build tree>
//
// Needs root (debootstrap, chroot), the package tree, and Debian's mirror (TMCRA_DEBIAN_MIRROR,
// default http://deb.debian.org/debian). About a minute, most of it debootstrap and apt.
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

import { Runner, assert, tmpDir, run } from '../peer/lib.mjs';
import { makeCertificate, startMemd, stopMemd, request } from '../integration/memd_lib.mjs';

const HERE = path.dirname(fileURLToPath(import.meta.url));
const SOURCE = path.resolve(HERE, '..', '..');
const TREE = path.resolve(process.argv[2] || path.join(SOURCE, 'build', 'package'));
const MIRROR = process.env.TMCRA_DEBIAN_MIRROR || 'http://deb.debian.org/debian';
const r = new Runner('debian_package', { budgetMs: 900_000 });

// Without what it needs, the test is skipped (77, CTest's SKIP_RETURN_CODE for it), unless
// TMCRA_REQUIRE_PACKAGE_TEST=1 (the test command sets it): then it fails.
function cannotRun(why) {
  const required = process.env.TMCRA_REQUIRE_PACKAGE_TEST === '1';
  console.error(`debian_package.mjs: ${why}${required ? '' : ' (skipped)'}`);
  console.log(`0 passed, ${required ? 1 : 0} failed`);
  process.exit(required ? 2 : 77);
}
if (!fs.existsSync(path.join(TREE, 'CPackConfig.cmake'))) {
  cannotRun(`no package tree at ${TREE}: cmake --preset package && cmake --build --preset package`);
}
if (process.getuid() !== 0) cannotRun('it needs root (debootstrap and chroot)');

const TMP = tmpDir('tmcra-deb-');
const ROOT = path.join(TMP, 'root');
const VERSION = /project\(tmcra_mcp VERSION ([0-9.]+)/.exec(
  fs.readFileSync(path.join(SOURCE, 'CMakeLists.txt'), 'utf8'))[1];
const DEB_NAME = `tmcra-mcp_${VERSION}_amd64.deb`;
const DEB = path.join(TREE, DEB_NAME);
const TGZ = path.join(TREE, `tmcra-mcp-${VERSION}-linux-amd64.tar.gz`);
const CHROOT_ENV = ['env', '-i', 'HOME=/root', 'PATH=/usr/sbin:/usr/bin:/sbin:/bin', 'LANG=C.UTF-8'];

/** A command in the test's root: {code, stdout, stderr}. */
function inRoot(args, { timeoutMs = 120_000, input, user, env = [] } = {}) {
  const spec = user ? [`--userspec=${user}:${user}`] : [];
  return run('chroot', [...spec, ROOT, ...CHROOT_ENV, ...env, ...args], { timeoutMs, input });
}

async function mustInRoot(args, options) {
  const res = await inRoot(args, options);
  assert.equal(res.code, 0, `${args.join(' ')}: exit ${res.code}\n${res.stdout}\n${res.stderr}`);
  return res;
}

r.onCleanup(async () => {
  for (const mount of ['proc']) await run('umount', ['-l', path.join(ROOT, mount)]).catch(() => {});
  fs.rmSync(TMP, { recursive: true, force: true });
});

await r.test('cpack makes the .deb and the .tar.gz', async () => {
  for (const f of [DEB, TGZ]) fs.rmSync(f, { force: true });
  const res = await run('cpack', ['--config', path.join(TREE, 'CPackConfig.cmake')],
    { cwd: TREE, timeoutMs: 300_000 });
  assert.equal(res.code, 0, `cpack: ${res.stdout}\n${res.stderr}`);
  assert.ok(fs.existsSync(DEB) && fs.existsSync(TGZ), res.stdout);
}, { timeoutMs: 300_000 });

await r.test('the control file: Depends from dpkg-shlibdeps, and libcurl4 by name', async () => {
  const depends = (await run('dpkg-deb', ['-f', DEB, 'Depends'])).stdout;
  for (const lib of ['libcurl4', 'libc6', 'libsqlite3-0', 'libssl3', 'libpq5', 'adduser']) {
    assert.match(depends, new RegExp(`(^|, )${lib}( |,|$)`), `Depends lacks ${lib}: ${depends}`);
  }
});

await r.test('debootstrap makes a clean Debian 12 root', async () => {
  const res = await run('debootstrap', ['--variant=minbase', 'bookworm', ROOT, MIRROR],
    { timeoutMs: 600_000 });
  assert.equal(res.code, 0, `debootstrap: ${res.stdout.slice(-2000)}\n${res.stderr.slice(-2000)}`);
  fs.copyFileSync('/etc/resolv.conf', path.join(ROOT, 'etc', 'resolv.conf'));
  const mounted = await run('mount', ['-t', 'proc', 'proc', path.join(ROOT, 'proc')]);
  assert.equal(mounted.code, 0, mounted.stderr);
  await mustInRoot(['apt-get', 'update', '-qq'], { timeoutMs: 300_000 });
}, { timeoutMs: 600_000 });

await r.test('apt installs the .deb with what its Depends names', async () => {
  fs.copyFileSync(DEB, path.join(ROOT, 'tmp', DEB_NAME));
  await mustInRoot(['apt-get', 'install', '-y', '-qq', '--no-install-recommends', `/tmp/${DEB_NAME}`],
    { timeoutMs: 300_000, env: ['DEBIAN_FRONTEND=noninteractive'] });
  const status = await mustInRoot(['dpkg-query', '-W', '-f=${Status} ${Version}', 'tmcra-mcp']);
  assert.equal(status.stdout, `install ok installed ${VERSION}`);
  // The settings (which may hold a key) and the certificates' directory are root's alone.
  const mode = (f) => (fs.statSync(path.join(ROOT, f)).mode & 0o777).toString(8);
  assert.equal(mode('etc/tmcra/memd.env'), '600');
  assert.equal(mode('etc/tmcra/tls'), '700');
}, { timeoutMs: 300_000 });

await r.test('the installed programs answer --version', async () => {
  for (const [bin, name] of [['tmcra-mcp', 'tmcra-mcp'], ['tmcra-mcp-setup', 'tmcra-mcp-setup'],
    ['tmcra-memd', 'tmcra-memd']]) {
    const res = await mustInRoot([`/usr/bin/${bin}`, '--version']);
    assert.equal(res.stdout.trim(), `${name} ${VERSION}`);
  }
});

await r.test('the programs are hardened: PIE, full RELRO, BIND_NOW, fortified, stack protector', async () => {
  for (const bin of ['usr/bin/tmcra-mcp', 'usr/bin/tmcra-mcp-setup', 'usr/bin/tmcra-memd',
    'usr/libexec/tmcra-mcp/tmcra-mcp-console']) {
    const file = path.join(ROOT, bin);
    const header = (await run('readelf', ['-hW', file])).stdout;
    const segments = (await run('readelf', ['-lW', file])).stdout;
    const dynamic = (await run('readelf', ['-dW', file])).stdout;
    const symbols = (await run('readelf', ['--dyn-syms', '-W', file])).stdout;
    assert.match(header, /Type:\s+DYN/, `${bin}: not PIE`);
    assert.match(segments, /GNU_RELRO/, `${bin}: no RELRO`);
    assert.match(dynamic, /\(FLAGS\)\s+BIND_NOW|\(FLAGS_1\).*\bNOW\b/, `${bin}: no BIND_NOW`);
    assert.match(symbols, /__\w+_chk@/, `${bin}: no fortified calls`);
    assert.match(symbols, /__stack_chk_fail@/, `${bin}: no stack protector`);
  }
});

/** initialize, initialized, tools/list and one tools/call on the installed tmcra-mcp. */
async function handshake(env = []) {
  const lines = [
    { jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'deb-test', version: '1' } } },
    { jsonrpc: '2.0', method: 'notifications/initialized' },
    { jsonrpc: '2.0', id: 2, method: 'tools/list' },
    { jsonrpc: '2.0', id: 3, method: 'tools/call', params: { name: 'tmcra_status', arguments: {} } },
  ].map((m) => JSON.stringify(m)).join('\n') + '\n';
  const res = await inRoot(['/usr/bin/tmcra-mcp'], { input: lines, env, timeoutMs: 30_000 });
  const answers = res.stdout.trim().split('\n').filter(Boolean).map((l) => JSON.parse(l));
  return { res, byId: Object.fromEntries(answers.map((a) => [a.id, a])) };
}

await r.test('the installed tmcra-mcp answers an MCP handshake on its embedded memory', async () => {
  const { res, byId } = await handshake();
  assert.equal(byId[1]?.result?.serverInfo?.version, VERSION, res.stdout + res.stderr);
  assert.equal(byId[2]?.result?.tools?.length, 10, JSON.stringify(byId[2]));
  assert.ok(byId[3]?.result?.content?.length > 0 && byId[3].result.isError !== true,
    JSON.stringify(byId[3]));
  assert.ok(fs.existsSync(path.join(ROOT, 'root', '.local', 'share', 'tmcra')), 'no data directory');
});

await r.test('with a remote memory configured it loads libcurl (dlopen) and starts', async () => {
  const { res, byId } = await handshake(['TMCRA_API_KEY=tmcra_0123456789abcdef.0123456789abcdef0123456789abcdef',
    'TMCRA_BASE_URL=https://127.0.0.1:9']);
  assert.ok(byId[1]?.result, `no initialize answer: ${res.stderr}`);
  assert.doesNotMatch(res.stderr, /libcurl/i, res.stderr);
});

await r.test('tmcra-mcp console finds its helper in /usr/libexec/tmcra-mcp', async () => {
  const res = await inRoot(['/usr/bin/tmcra-mcp', 'console', '--bad-option']);
  assert.equal(res.code, 2, `${res.code}: ${res.stderr}`);
  assert.match(res.stderr, /Usage: tmcra-mcp console/, res.stderr);
});

await r.test('man renders the three pages without warnings', async () => {
  await mustInRoot(['apt-get', 'install', '-y', '-qq', '--no-install-recommends', 'man-db'],
    { timeoutMs: 300_000, env: ['DEBIAN_FRONTEND=noninteractive'] });
  for (const page of ['tmcra-mcp', 'tmcra-mcp-setup', 'tmcra-memd']) {
    const res = await mustInRoot(['man', '--warnings', '-P', 'cat', page], { env: ['MANWIDTH=80'] });
    assert.equal(res.stderr, '', `${page}: ${res.stderr}`);
    assert.match(res.stdout, /SYNOPSIS/);
    assert.match(res.stdout, new RegExp(`${page} ${VERSION.replaceAll('.', '\\.')}`));
  }
  // One source: every option and variable --help lists is on the page.
  const sections = {
    'tmcra-mcp': ['NAME', 'SYNOPSIS', 'DESCRIPTION', 'COMMANDS', 'ENVIRONMENT', 'OPTIONS', 'DOCUMENTS', 'SEE ALSO'],
    'tmcra-mcp-setup': ['NAME', 'SYNOPSIS', 'DESCRIPTION', 'OPTIONS', 'SEE ALSO'],
    'tmcra-memd': ['NAME', 'SYNOPSIS', 'DESCRIPTION', 'SERVE OPTIONS', 'KEYS', 'MIGRATING', 'ENVIRONMENT', 'SEE ALSO'],
  };
  for (const page of ['tmcra-mcp', 'tmcra-mcp-setup', 'tmcra-memd']) {
    const source = (await mustInRoot(['sh', '-c', `zcat /usr/share/man/man1/${page}.1.gz`])).stdout;
    assert.deepEqual([...source.matchAll(/^\.SH (.*)$/gm)].map((m) => m[1].replaceAll('\\-', '-')),
      sections[page], `${page}'s sections`);
    const help = (await mustInRoot([`/usr/bin/${page}`, '--help'])).stdout;
    const shown = (await mustInRoot(['man', '-P', 'cat', page], { env: ['MANWIDTH=200'] })).stdout;
    const terms = [...help.matchAll(/^ {2}(--[a-z-]+|[A-Z][A-Z_]+)\b/gm)].map((m) => m[1]);
    assert.ok(terms.length >= 4, `${page}: ${terms}`);
    for (const term of terms) assert.ok(shown.includes(term), `man ${page} lacks ${term}`);
  }
}, { timeoutMs: 300_000 });

/**
 * A unit's ExecStart, with the specifiers and variables as systemd would fill them for the
 * instance `instance` (a template) and the settings in `envFile`, less TMCRA_MEMD_LISTEN.
 */
function unitCommand(unitFile, { instance = '', envFile = 'memd.env', listen } = {}) {
  const unit = fs.readFileSync(path.join(ROOT, 'lib', 'systemd', 'system', unitFile), 'utf8');
  const exec = /^ExecStart=(.*)$/m.exec(unit)[1];
  const env = Object.fromEntries(fs.readFileSync(path.join(ROOT, 'etc', 'tmcra', envFile), 'utf8')
    .split('\n').filter((l) => /^[A-Z_]+=/.test(l)).map((l) => [l.slice(0, l.indexOf('=')), l.slice(l.indexOf('=') + 1)]));
  env.TMCRA_MEMD_LISTEN = listen;
  const name = instance ? `tmcra-memd@${instance}.service` : 'tmcra-memd.service';
  return exec.replaceAll('%S', '/var/lib').replaceAll('%C', '/var/cache').replaceAll('%i', instance)
    .replaceAll('%d', `/run/credentials/${name}`)
    .replace('${TMCRA_MEMD_LISTEN}', env.TMCRA_MEMD_LISTEN)
    .replace('$TMCRA_MEMD_OPTIONS', env.TMCRA_MEMD_OPTIONS ?? '')
    .split(/\s+/).filter(Boolean);
}

await r.test('tmcra-memd runs as its user with the unit\'s command line and answers /healthz', async () => {
  const user = await mustInRoot(['getent', 'passwd', 'tmcra-memd']);
  assert.match(user.stdout, /^tmcra-memd:x:\d+:\d+:/);
  const { cert, key, ca } = await makeCertificate(TMP);
  const creds = path.join(ROOT, 'run', 'credentials', 'tmcra-memd.service');
  fs.mkdirSync(creds, { recursive: true });
  fs.copyFileSync(cert, path.join(creds, 'tls-cert'));
  fs.copyFileSync(key, path.join(creds, 'tls-key'));
  for (const dir of ['/var/lib/tmcra-memd', '/var/cache/tmcra-memd']) {
    await mustInRoot(['install', '-d', '-o', 'tmcra-memd', '-g', 'tmcra-memd', '-m', '0700', dir]);
  }
  await mustInRoot(['chown', '-R', 'tmcra-memd:tmcra-memd', '/run/credentials/tmcra-memd.service']);
  await mustInRoot(['chmod', '0400', '/run/credentials/tmcra-memd.service/tls-cert',
    '/run/credentials/tmcra-memd.service/tls-key']);
  const argv = unitCommand('tmcra-memd.service', { listen: '127.0.0.1:0' });
  assert.equal(argv[0], '/usr/bin/tmcra-memd');
  fs.writeFileSync(path.join(ROOT, 'etc', 'tmcra', 'memd-team.env'),
    'TMCRA_MEMD_LISTEN=127.0.0.1:7412\nTMCRA_MEMD_OPTIONS=--max-concurrency 4\n');
  const instance = unitCommand('tmcra-memd@.service', { instance: 'team', envFile: 'memd-team.env', listen: '127.0.0.1:0' });
  const expected = argv.map((a) => a.replace('/var/lib/tmcra-memd', '/var/lib/tmcra-memd-team')
    .replace('tmcra-memd.service', 'tmcra-memd@team.service'));
  assert.deepEqual(instance, [...expected, '--max-concurrency', '4']);
  const created = await inRoot(['/usr/bin/tmcra-memd', 'keys', 'create', '--data-dir', '/var/lib/tmcra-memd'],
    { user: 'tmcra-memd' });
  assert.equal(created.code, 0, created.stderr);
  const srv = await startMemd(argv[0], argv.slice(2), {
    prefix: ['chroot', '--userspec=tmcra-memd:tmcra-memd', ROOT, ...CHROOT_ENV, 'HOME=/var/lib/tmcra-memd'],
  });
  try {
    const health = await request(srv.port, ca, 'GET', '/healthz');
    assert.equal(health.status, 200, health.text);
  } finally {
    assert.equal((await stopMemd(srv)).code, 0, srv.stderr);
  }
  assert.ok(fs.existsSync(path.join(ROOT, 'var', 'lib', 'tmcra-memd', 'memory.db')));
}, { timeoutMs: 60_000 });

await r.test('systemd-analyze verifies both units and rates their exposure', async () => {
  await mustInRoot(['apt-get', 'install', '-y', '-qq', '--no-install-recommends', 'systemd'],
    { timeoutMs: 300_000, env: ['DEBIAN_FRONTEND=noninteractive'] });
  fs.writeFileSync(path.join(ROOT, 'etc', 'tmcra', 'memd-team.env'), 'TMCRA_MEMD_LISTEN=127.0.0.1:7412\n');
  for (const unit of ['tmcra-memd.service', 'tmcra-memd@team.service']) {
    const verify = await inRoot(['systemd-analyze', 'verify', unit]);
    assert.equal(verify.code, 0, `${unit}: ${verify.stdout}\n${verify.stderr}`);
    assert.equal(verify.stderr.trim(), '', `${unit}: ${verify.stderr}`);
    const security = await inRoot(['systemd-analyze', 'security', '--offline=true', unit]);
    const score = /Overall exposure level for \S+: ([0-9.]+) (\S+)/.exec(security.stdout);
    assert.ok(score, security.stdout + security.stderr);
    r.log(`     ${unit}: exposure ${score[1]} ${score[2]}`);
    assert.ok(Number(score[1]) <= 2.0, `${unit}: exposure ${score[1]} (goal 2.0 or less)`);
  }
}, { timeoutMs: 300_000 });

// systemd is not PID 1 in the root, so deb-systemd-invoke and systemctl are replaced there by
// scripts that write down how the maintainer scripts call them (as if /run/systemd/system
// said systemd runs).
async function withLoggedSystemd(fn) {
  const log = path.join(ROOT, 'tmp', 'systemd-calls');
  const saved = [];
  fs.mkdirSync(path.join(ROOT, 'run', 'systemd', 'system'), { recursive: true });
  for (const tool of ['usr/bin/deb-systemd-invoke', 'usr/bin/systemctl']) {
    const file = path.join(ROOT, tool);
    if (fs.existsSync(file)) { fs.renameSync(file, `${file}.real`); saved.push(file); }
    fs.writeFileSync(file, `#!/bin/sh\necho "${path.basename(tool)} $*" >> /tmp/systemd-calls\n`, { mode: 0o755 });
  }
  try {
    fs.writeFileSync(log, '');
    await fn();
    return fs.readFileSync(log, 'utf8');
  } finally {
    for (const file of saved) fs.renameSync(`${file}.real`, file);
    fs.rmSync(path.join(ROOT, 'run', 'systemd'), { recursive: true, force: true });
  }
}

await r.test('an upgrade restarts the memd services that run, each instance too', async () => {
  fs.writeFileSync(path.join(ROOT, 'etc', 'tmcra', 'memd-team.env'), 'TMCRA_MEMD_LISTEN=127.0.0.1:7412\n');
  const calls = await withLoggedSystemd(() => mustInRoot(['dpkg', '-i', `/tmp/${DEB_NAME}`]));
  assert.match(calls, /^systemctl --system daemon-reload$/m, calls);
  assert.match(calls, /^deb-systemd-invoke try-restart tmcra-memd\.service$/m, calls);
  assert.match(calls, /^deb-systemd-invoke try-restart tmcra-memd@team\.service$/m, calls);
  assert.doesNotMatch(calls, / (start|enable|restart) /, calls);
}, { timeoutMs: 120_000 });

await r.test('dpkg -r stops them, removes the programs and leaves memory, data and config alone', async () => {
  const calls = await withLoggedSystemd(() => mustInRoot(['dpkg', '-r', 'tmcra-mcp']));
  assert.match(calls, /^deb-systemd-invoke stop tmcra-memd\.service$/m, calls);
  assert.match(calls, /^deb-systemd-invoke stop tmcra-memd@team\.service$/m, calls);
  fs.rmSync(path.join(ROOT, 'etc', 'tmcra', 'memd-team.env'));
  for (const gone of ['usr/bin/tmcra-mcp', 'usr/bin/tmcra-memd', 'usr/bin/tmcra-mcp-setup',
    'usr/libexec/tmcra-mcp/tmcra-mcp-console', 'lib/systemd/system/tmcra-memd.service',
    'usr/share/man/man1/tmcra-mcp.1.gz']) {
    assert.ok(!fs.existsSync(path.join(ROOT, gone)), `${gone} is still there`);
  }
  for (const kept of ['root/.local/share/tmcra', 'var/lib/tmcra-memd/memory.db',
    'var/lib/tmcra-memd/keys.db', 'etc/tmcra/memd.env', 'etc/tmcra/tls']) {
    assert.ok(fs.existsSync(path.join(ROOT, kept)), `${kept} was removed`);
  }
  await mustInRoot(['getent', 'passwd', 'tmcra-memd']);
}, { timeoutMs: 120_000 });

/** The README's explained lintian tags: the rows of its table that start with a `tag`. */
function explainedTags() {
  const text = fs.readFileSync(path.join(SOURCE, 'packaging', 'README.md'), 'utf8');
  const section = text.slice(text.indexOf('## lintian'));
  return new Set([...section.matchAll(/^\| `([a-z0-9.+-]+)` \|/gm)].map((m) => m[1]));
}

await r.test('every lintian tag is explained in packaging/README.md', async () => {
  const res = await run('lintian', ['--display-info', '--pedantic', '--tag-display-limit', '0', DEB],
    { timeoutMs: 300_000 });
  const tags = [...res.stdout.matchAll(/^[EWIPX]: tmcra-mcp: (\S+)/gm)].map((m) => m[1]);
  const explained = explainedTags();
  const unexplained = [...new Set(tags)].filter((t) => !explained.has(t));
  assert.deepEqual(unexplained, [], `lintian:\n${res.stdout}`);
  assert.ok(!/^E: /m.test(res.stdout), `lintian errors:\n${res.stdout}`);
  r.log(`     lintian: ${tags.length} tags, all explained: ${[...new Set(tags)].join(', ')}`);
}, { timeoutMs: 300_000 });

await r.test('the tarball holds the same files as the .deb', async () => {
  const debFiles = (await run('sh', ['-c', `dpkg-deb --fsys-tarfile '${DEB}' | tar -t`])).stdout
    .split('\n').map((f) => f.replace(/^\.\//, '')).filter((f) => f && !f.endsWith('/')).sort();
  const tgzFiles = (await run('tar', ['-tzf', TGZ])).stdout.split('\n')
    .map((f) => f.replace(/^[^/]+\//, '')).filter((f) => f && !f.endsWith('/')).sort();
  assert.deepEqual(tgzFiles, debFiles);
});

await r.finish();
