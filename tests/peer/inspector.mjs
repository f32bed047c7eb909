#!/usr/bin/env node
// inspector.mjs — tmcra-mcp driven by the MCP Inspector CLI
// (@modelcontextprotocol/inspector 2.12.0, `mcp-inspector --cli`), legacy and auto era.
// The server runs behind tap.mjs so stdout purity and exit-on-EOF are checked too.
//
//   node inspector.mjs <tmcra-mcp> <tmcra-mcp-testserver>
import fs from 'node:fs';
import path from 'node:path';
import {
  Runner, assert, parseBins, requireNodeModules, run, tmpDir, newLogPath, TAP, HERE,
  assertAllStdoutPure, assertCleanExit, logsForTemplate, readClientMessages, checkStdoutLog,
  waitForExitInfo, serverEnv,
} from './lib.mjs';

const NAME = 'inspector.mjs';
requireNodeModules(NAME, ['@modelcontextprotocol/inspector']);
const bins = parseBins(NAME);
const r = new Runner(NAME);
const logs = [];
const notes = [];

// The inspector keeps a catalog in ~/.mcp-inspector: give it a private HOME.
const home = path.join(tmpDir(), 'inspector-home');
fs.mkdirSync(home, { recursive: true });
const env = {
  ...serverEnv(),
  HOME: home,
  MCP_CATALOG_PATH: path.join(home, 'catalog.json'),
  npm_config_update_notifier: 'false',
  NO_UPDATE_NOTIFIER: '1',
};

/** Run `npx --no-install mcp-inspector --cli ...` against bin (through the tap). */
async function inspector(bin, label, cliArgs, { era, template = false } = {}) {
  const logPath = newLogPath(label + (template ? '-%p' : ''));
  const args = ['--no-install', 'mcp-inspector', '--cli', '-q', '--format', 'json'];
  if (era) args.push('--protocol-era', era);
  args.push(process.execPath, TAP, logPath, bin, ...cliArgs);
  const res = await run('npx', args, { env, cwd: HERE, timeoutMs: 45_000 });
  const produced = template ? logsForTemplate(logPath) : [logPath];
  logs.push(...produced.filter((p) => fs.existsSync(p)));
  let json;
  try { json = JSON.parse(res.stdout); } catch { /* leave undefined */ }
  const show = `exit ${res.code}${res.signal ? ` (${res.signal})` : ''}\nstdout: ${res.stdout.slice(0, 1500)}\nstderr: ${res.stderr.slice(0, 1500)}`;
  return { ...res, json, logPath, produced, show };
}

await r.test('tools/list (legacy era): exit 0, JSON lists tmcra_status, server exits 0 on EOF', async () => {
  const res = await inspector(bins.server, 'insp-list', ['--method', 'tools/list']);
  assert.equal(res.code, 0, res.show);
  assert.ok(res.json, `stdout is not one JSON document\n${res.show}`);
  const tools = res.json.result?.tools;
  assert.ok(Array.isArray(tools), `no result.tools\n${res.show}`);
  assert.ok(tools.some((t) => t.name === 'tmcra_status'), `tmcra_status missing\n${res.show}`);
  const init = readClientMessages(res.logPath).find((m) => m.method === 'initialize');
  notes.push(`inspector legacy initialize: protocolVersion=${init?.params?.protocolVersion} capabilities=${JSON.stringify(init?.params?.capabilities)}`);
  await assertCleanExit(res.logPath);
});

await r.test('tools/list --strict: no error-severity schema portability problems (exit 0, not 6)', async () => {
  const res = await inspector(bins.server, 'insp-strict', ['--method', 'tools/list', '--strict']);
  assert.equal(res.code, 0, res.show);
});

await r.test('tools/list --strict on the testserver (exit 0)', async () => {
  const res = await inspector(bins.testserver, 'insp-strict-test', ['--method', 'tools/list', '--strict']);
  assert.equal(res.code, 0, res.show);
});

await r.test('tools/call tmcra_status: exit 0, structuredContent + text', async () => {
  const res = await inspector(bins.server, 'insp-call', ['--method', 'tools/call', '--tool-name', 'tmcra_status']);
  assert.equal(res.code, 0, res.show);
  const result = res.json?.result;
  assert.ok(result, `no result\n${res.show}`);
  assert.notEqual(result.isError, true, res.show);
  const sc = result.structuredContent;
  assert.ok(sc && typeof sc.version === 'string' && 'memory_mode' in sc && 'protocol_version' in sc, `structuredContent: ${JSON.stringify(sc)}`);
  const text = (result.content ?? []).find((c) => c.type === 'text')?.text;
  assert.deepEqual(JSON.parse(text), sc, 'text block JSON != structuredContent');
  await assertCleanExit(res.logPath);
});

await r.test('--protocol-era auto tools/list: probe falls back, exit 0', async () => {
  const res = await inspector(bins.server, 'insp-auto-list', ['--method', 'tools/list'], { era: 'auto', template: true });
  assert.equal(res.code, 0, res.show);
  assert.ok(res.json?.result?.tools?.some((t) => t.name === 'tmcra_status'), res.show);
  // Find the server process that got server/discover and check what it answered.
  let answered = false;
  for (const p of res.produced) {
    const probe = readClientMessages(p).find((m) => m.method === 'server/discover');
    if (!probe) continue;
    const reply = checkStdoutLog(p).messages.find((m) => m.method === undefined && m.id === probe.id);
    assert.ok(reply, `server did not answer server/discover (${path.basename(p)})`);
    assert.equal(reply.error?.code, -32601, `server/discover reply: ${JSON.stringify(reply)}`);
    answered = true;
  }
  assert.ok(answered, `no server process received server/discover (${res.produced.length} processes)`);
  for (const p of res.produced) {
    const info = await waitForExitInfo(p, 5000);
    assert.ok(info && info.exitedAtMs !== null, `server process ${path.basename(p)} did not exit`);
    assert.notEqual(info.signal, 'SIGKILL', `server process ${path.basename(p)} needed SIGKILL`);
  }
  notes.push(`inspector --protocol-era auto spawned ${res.produced.length} server process(es)`);
});

await r.test('--protocol-era auto tools/call tmcra_status: exit 0', async () => {
  const res = await inspector(bins.server, 'insp-auto-call', ['--method', 'tools/call', '--tool-name', 'tmcra_status'], { era: 'auto', template: true });
  assert.equal(res.code, 0, res.show);
  assert.equal(typeof res.json?.result?.structuredContent?.version, 'string', res.show);
});

await r.test('[testserver] invalid args {"ms":"x"} -> isError (inspector exit 5)', async () => {
  const res = await inspector(bins.testserver, 'insp-badargs',
    ['--method', 'tools/call', '--tool-name', 'test_sleep', '--tool-args-json', '{"ms":"x"}']);
  assert.equal(res.code, 5, res.show);
  await assertCleanExit(res.logPath);
});

await r.test('[testserver] test_sleep {"ms":10} -> exit 0, slept_ms 10', async () => {
  const res = await inspector(bins.testserver, 'insp-sleep',
    ['--method', 'tools/call', '--tool-name', 'test_sleep', '--tool-args-json', '{"ms":10}']);
  assert.equal(res.code, 0, res.show);
  assert.equal(res.json?.result?.structuredContent?.slept_ms, 10, res.show);
});

await r.test('[testserver] test_elicit without elicitation capability -> outcome unsupported', async () => {
  // The 2.12 inspector CLI does not declare elicitation.
  const res = await inspector(bins.testserver, 'insp-elicit',
    ['--method', 'tools/call', '--tool-name', 'test_elicit', '--tool-args-json', '{"message":"x"}']);
  assert.equal(res.code, 0, res.show);
  assert.equal(res.json?.result?.structuredContent?.outcome, 'unsupported', res.show);
});

await r.test('stdout purity over all inspector sessions', async () => {
  assertAllStdoutPure(logs);
});

for (const n of notes) console.log(`note: ${n}`);
await r.finish();
