#!/usr/bin/env node
// sdk_v2_auto.mjs — tmcra-mcp against the v2 TypeScript client
// (@modelcontextprotocol/client 2.4.0), in 'auto' version negotiation (server/discover
// probe, must fall back to initialize) and in 'legacy' mode.
//
//   node sdk_v2_auto.mjs <tmcra-mcp> <tmcra-mcp-testserver>
import {
  Runner, assert, parseBins, requireNodeModules, connectV2, assertRpcError, assertAllStdoutPure,
  assertStructuredAndText, textOf, checkStdoutLog, readClientMessages, logsForTemplate,
  waitForExitInfo, SUPPORTED_VERSIONS, NEWEST_VERSION,
} from './lib.mjs';

const NAME = 'sdk_v2_auto.mjs';
requireNodeModules(NAME, ['@modelcontextprotocol/client']);
const bins = parseBins(NAME);
const r = new Runner(NAME);
const logs = [];
const sessions = [];
const notes = [];
const track = (s) => { sessions.push(s); return s; };
r.onCleanup(async () => { for (const s of sessions) await s.closeQuietly(); });

const isDiscover = (m) => m.method === 'server/discover';

/** The server's reply to the client's server/discover request in one tap log. */
function discoverReply(logPath) {
  const probe = readClientMessages(logPath).find(isDiscover);
  if (!probe) return { probe: undefined, reply: undefined };
  const reply = checkStdoutLog(logPath).messages.find((m) => m.method === undefined && m.id === probe.id);
  return { probe, reply };
}

async function statusOk(s, expectVersion) {
  await s.client.listTools();
  const res = await s.client.callTool({ name: 'tmcra_status', arguments: {} });
  const st = assertStructuredAndText(res, { requireStructured: expectVersion >= '2025-06-18' });
  assert.equal(st.protocol_version, expectVersion, JSON.stringify(st));
  return st;
}

// --- auto mode, SDK default: probe on a throw-away sibling process ----------------
await r.test("[auto, sibling probe] server/discover -> -32601, fallback to initialize, tmcra_status", async () => {
  const t0 = Date.now();
  const s = track(await connectV2({ bin: bins.server, label: 'v2-auto', mode: 'auto', probeTimeoutMs: 20_000 }));
  const connectMs = Date.now() - t0;
  assert.equal(s.client.negotiatedVersion, NEWEST_VERSION, 'negotiated version after fallback');
  await statusOk(s, NEWEST_VERSION);
  await s.client.ping();
  s.assertNoClientErrors();
  await s.closeAndCheckExit();

  const all = logsForTemplate(s.logTemplate);
  logs.push(...all);
  assert.equal(all.length, 2, `expected 2 server processes (probe sibling + session), saw ${all.length}`);
  const sibling = all.find((p) => p !== s.logPath);
  const { probe, reply } = discoverReply(sibling);
  assert.ok(probe, 'the sibling process never received server/discover');
  assert.ok(reply, `the server wrote no reply to server/discover (exited or stayed silent; connect took ${connectMs} ms, probe timeout 20000 ms)`);
  assert.equal(reply.error?.code, -32601, `server/discover answered with ${JSON.stringify(reply)}`);
  assert.equal(typeof reply.error.message, 'string');
  // The session process must have seen a plain legacy handshake and no probe.
  const sessionIn = readClientMessages(s.logPath);
  assert.ok(!sessionIn.some(isDiscover), 'session process also got server/discover');
  assert.equal(sessionIn[0]?.method, 'initialize', `first message to the session process: ${JSON.stringify(sessionIn[0])}`);
  // The SDK disposes of the sibling with stdin EOF + SIGTERM, then SIGKILL after 1 s.
  const info = await waitForExitInfo(sibling, 5000);
  assert.ok(info && info.exitedAtMs !== null, 'probe sibling never exited');
  assert.notEqual(info.signal, 'SIGKILL', 'probe sibling had to be SIGKILLed (ignored stdin EOF and SIGTERM for 1 s)');
  notes.push(`probe sibling ended with code=${info.code} signal=${info.signal} (signals seen: ${JSON.stringify(info.forwardedSignals.map((f) => f.signal))}); connect took ${connectMs} ms`);
});

// --- auto mode, in place: probe and initialize on the same process ------------------
await r.test('[auto, in-place probe] same process answers server/discover -32601, then initialize', async () => {
  const s = track(await connectV2({ bin: bins.server, label: 'v2-auto-inplace', mode: 'auto', inPlace: true, probeTimeoutMs: 20_000 }));
  logs.push(s.logPath);
  assert.equal(s.client.negotiatedVersion, NEWEST_VERSION);
  const { probe, reply } = discoverReply(s.logPath);
  assert.ok(probe, 'client did not probe in place (SDK behaviour changed?)');
  assert.ok(reply, 'server did not answer server/discover (client fell back after its probe timeout)');
  assert.equal(reply.error?.code, -32601, `server/discover answered with ${JSON.stringify(reply)}`);
  await statusOk(s, NEWEST_VERSION);
  s.assertNoClientErrors();
  await s.closeAndCheckExit();
  const sent = readClientMessages(s.logPath).map((m) => m.method);
  assert.deepEqual(sent.slice(0, 3), ['server/discover', 'initialize', 'notifications/initialized'], `client message order: ${sent}`);
});

await r.test('[auto, in-place probe, testserver] elicitation still works after the probe', async () => {
  const s = track(await connectV2({
    bin: bins.testserver, label: 'v2-auto-inplace-elicit', mode: 'auto', inPlace: true,
    capabilities: { elicitation: { form: {} } },
    setup: (c) => c.setRequestHandler('elicitation/create', async () => ({ action: 'accept', content: { confirm: true } })),
  }));
  logs.push(s.logPath);
  await s.client.listTools();
  const st = assertStructuredAndText(await s.client.callTool({ name: 'test_elicit', arguments: { message: 'after probe' } }));
  assert.equal(st.outcome, 'accept', JSON.stringify(st));
  assert.equal(st.content?.confirm, true);
  s.assertNoClientErrors();
  await s.closeAndCheckExit();
});

// --- legacy mode ----------------------------------------------------------------
await r.test('[legacy] no probe; initialize; tools/list; tmcra_status; ping; unknown tool -32602', async () => {
  const s = track(await connectV2({ bin: bins.server, label: 'v2-legacy', mode: 'legacy' }));
  logs.push(s.logPath);
  assert.equal(s.client.negotiatedVersion, NEWEST_VERSION);
  assert.ok(!readClientMessages(s.logPath).some(isDiscover), 'legacy mode sent server/discover');
  await statusOk(s, NEWEST_VERSION);
  await s.client.ping();
  await assertRpcError(s.client.callTool({ name: 'no_such_tool_xyz', arguments: {} }), -32602, 'unknown tool');
  s.assertNoClientErrors();
  await s.closeAndCheckExit();
});

for (const v of SUPPORTED_VERSIONS) {
  await r.test(`[legacy, offering only ${v}] negotiates ${v}; tmcra_status reports it`, async () => {
    const s = track(await connectV2({ bin: bins.server, label: `v2-legacy-${v}`, mode: 'legacy', protocolVersion: v }));
    logs.push(s.logPath);
    const init = readClientMessages(s.logPath).find((m) => m.method === 'initialize');
    assert.equal(init?.params?.protocolVersion, v, 'client did not offer the requested version');
    assert.equal(s.client.negotiatedVersion, v);
    await statusOk(s, v);
    s.assertNoClientErrors();
    await s.closeAndCheckExit();
  });
}

await r.test('[legacy, testserver] invalid args -> isError naming "ms"', async () => {
  const s = track(await connectV2({ bin: bins.testserver, label: 'v2-legacy-testserver', mode: 'legacy' }));
  logs.push(s.logPath);
  await s.client.listTools();
  const res = await s.client.callTool({ name: 'test_sleep', arguments: { ms: 'x' } });
  assert.equal(res.isError, true, JSON.stringify(res));
  assert.match(textOf(res), /\bms\b/, `error text does not name "ms": ${textOf(res)}`);
  s.assertNoClientErrors();
  await s.closeAndCheckExit();
});

await r.test('stdout purity over all server processes (incl. probe siblings)', async () => {
  for (const s of sessions) await s.closeQuietly();
  assertAllStdoutPure(logs);
});

for (const n of notes) console.log(`note: ${n}`);
await r.finish();
