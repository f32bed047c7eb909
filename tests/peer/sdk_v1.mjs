#!/usr/bin/env node
// sdk_v1.mjs — tmcra-mcp against the official TypeScript SDK v1 client
// (@modelcontextprotocol/sdk 1.32.2: Client + StdioClientTransport), every server
// process behind tap.mjs so that stdout purity and exit-on-EOF are checked too.
//
//   node sdk_v1.mjs <tmcra-mcp> <tmcra-mcp-testserver>
import {
  Runner, assert, parseBins, requireNodeModules, connectV1, assertRpcError, assertAllStdoutPure,
  assertStructuredAndText, textOf, run, serverEnv, SUPPORTED_VERSIONS, NEWEST_VERSION,
} from './lib.mjs';

const NAME = 'sdk_v1.mjs';
requireNodeModules(NAME, ['@modelcontextprotocol/sdk']);
const bins = parseBins(NAME);
const r = new Runner(NAME);
const logs = [];
const sessions = [];
const track = (s) => { logs.push(s.logPath); sessions.push(s); return s; };
r.onCleanup(async () => { for (const s of sessions) await s.closeQuietly(); });

const TOOL_NAME_RE = /^[A-Za-z0-9_.-]{1,128}$/;

async function listAllTools(client) {
  const tools = [];
  let cursor;
  let pages = 0;
  do {
    const res = await client.listTools(cursor ? { cursor } : undefined);
    tools.push(...res.tools);
    cursor = res.nextCursor;
    pages += 1;
    assert.ok(pages <= 50, 'tools/list pagination does not terminate');
  } while (cursor);
  // The SDK caches output-schema validators from the *last* page only; re-cache all.
  client.cacheToolMetadata(tools);
  return tools;
}

// --- plain CLI flags --------------------------------------------------------
let cliVersionText = '';
await r.test('--version exits 0 and prints a version', async () => {
  const res = await run(bins.server, ['--version'], { env: serverEnv(), timeoutMs: 10_000 });
  assert.equal(res.code, 0, `--version exit code ${res.code}; stderr: ${res.stderr}`);
  assert.ok(res.stdout.trim().length > 0, '--version printed nothing on stdout');
  cliVersionText = res.stdout.trim();
});
await r.test('--help exits 0 and prints usage', async () => {
  const res = await run(bins.server, ['--help'], { env: serverEnv(), timeoutMs: 10_000 });
  assert.equal(res.code, 0, `--help exit code ${res.code}; stderr: ${res.stderr}`);
  assert.ok((res.stdout + res.stderr).trim().length > 0, '--help printed nothing');
});

// --- per-version handshake, tools/list, tmcra_status, ping, close ------------
const REQUESTS = [
  ...SUPPORTED_VERSIONS.map((v) => ({ ask: v, expect: v })),
  // A version the SDK knows but the server does not support, and a made-up one:
  // the server must answer with its newest version (not an error).
  { ask: '2024-10-07', expect: NEWEST_VERSION },
  { ask: '1999-01-01', expect: NEWEST_VERSION },
];

for (const { ask, expect } of REQUESTS) {
  const tag = `[asked ${ask}]`;
  let s;
  let tools = [];
  await r.test(`${tag} initialize negotiates ${expect}`, async () => {
    s = track(await connectV1({ bin: bins.server, label: `v1-${ask}`, protocolVersion: ask }));
    assert.equal(s.client.negotiatedVersion, expect, 'negotiated protocolVersion');
    const info = s.client.getServerVersion();
    assert.ok(info && typeof info.name === 'string' && info.name.length > 0, 'serverInfo.name missing');
    assert.ok(typeof info.version === 'string' && info.version.length > 0, 'serverInfo.version missing');
    const caps = s.client.getServerCapabilities();
    assert.ok(caps && typeof caps.tools === 'object', `server capabilities lack "tools": ${JSON.stringify(caps)}`);
  });
  if (!s) continue;

  await r.test(`${tag} tools/list: shape and version-gated fields`, async () => {
    tools = await listAllTools(s.client);
    const names = tools.map((t) => t.name);
    assert.ok(names.includes('tmcra_status'), `tmcra_status not listed: ${names.join(', ')}`);
    assert.equal(new Set(names).size, names.length, `duplicate tool names: ${names.join(', ')}`);
    for (const t of tools) {
      assert.match(t.name, TOOL_NAME_RE, `tool name ${JSON.stringify(t.name)}`);
      assert.equal(t.inputSchema?.type, 'object', `${t.name}: inputSchema.type must be "object"`);
      if (expect >= '2025-06-18') {
        assert.equal(typeof t.title, 'string', `${t.name}: title missing at ${expect}`);
      } else {
        assert.equal(t.title, undefined, `${t.name}: "title" sent at ${expect} (defined only from 2025-06-18)`);
        assert.equal(t.outputSchema, undefined, `${t.name}: "outputSchema" sent at ${expect} (defined only from 2025-06-18)`);
      }
    }
    const status = tools.find((t) => t.name === 'tmcra_status');
    if (expect >= '2025-06-18') {
      assert.equal(status.outputSchema?.type, 'object', `tmcra_status: outputSchema missing at ${expect}`);
    }
    assert.ok(!names.some((n) => n.startsWith('test_')), `production server lists test-only tools: ${names.join(', ')}`);
  });

  await r.test(`${tag} tools/call tmcra_status`, async () => {
    // listTools() above made the SDK compile the outputSchema, so callTool() also
    // validates structuredContent against it (AJV) at >= 2025-06-18.
    const res = await s.client.callTool({ name: 'tmcra_status', arguments: {} });
    const st = assertStructuredAndText(res, { requireStructured: expect >= '2025-06-18' });
    for (const k of ['version', 'protocol_version', 'memory_mode']) {
      assert.ok(k in st, `tmcra_status result lacks "${k}": ${JSON.stringify(st)}`);
    }
    assert.equal(st.protocol_version, expect, 'tmcra_status.protocol_version != negotiated version');
    assert.equal(st.version, s.client.getServerVersion().version, 'tmcra_status.version != serverInfo.version');
    if (cliVersionText) {
      assert.ok(cliVersionText.includes(st.version), `--version output ${JSON.stringify(cliVersionText)} does not contain ${st.version}`);
    }
  });

  await r.test(`${tag} unknown tool -> JSON-RPC -32602`, async () => {
    await assertRpcError(s.client.callTool({ name: 'no_such_tool_xyz', arguments: {} }), -32602, 'unknown tool');
  });

  await r.test(`${tag} ping, then close: server exits 0 on stdin EOF`, async () => {
    const pong = await s.client.ping();
    assert.deepEqual(Object.keys(pong ?? {}).filter((k) => k !== '_meta'), [], `ping result not empty: ${JSON.stringify(pong)}`);
    s.assertNoClientErrors();
    await s.closeAndCheckExit();
  });
}

// --- testserver: argument validation --------------------------------------------
{
  let s;
  await r.test('[testserver] connect and list test tools', async () => {
    s = track(await connectV1({ bin: bins.testserver, label: 'v1-testserver' }));
    assert.equal(s.client.negotiatedVersion, NEWEST_VERSION);
    const tools = await listAllTools(s.client);
    const names = tools.map((t) => t.name);
    for (const n of ['tmcra_status', 'test_elicit', 'test_sleep']) assert.ok(names.includes(n), `${n} not listed: ${names}`);
  });
  if (s) {
    await r.test('[testserver] test_sleep {"ms":5} returns slept_ms', async () => {
      const res = await s.client.callTool({ name: 'test_sleep', arguments: { ms: 5 } });
      const st = assertStructuredAndText(res);
      assert.equal(st.slept_ms, 5);
      assert.equal(st.cancelled, false);
    });
    await r.test('[testserver] invalid args {"ms":"x"} -> isError naming "ms"', async () => {
      const res = await s.client.callTool({ name: 'test_sleep', arguments: { ms: 'x' } });
      assert.equal(res.isError, true, `expected isError:true, got ${JSON.stringify(res)}`);
      assert.match(textOf(res), /\bms\b/, `error text does not name the field "ms": ${textOf(res)}`);
    });
    await r.test('[testserver] missing required arg {} -> isError naming "ms"', async () => {
      const res = await s.client.callTool({ name: 'test_sleep', arguments: {} });
      assert.equal(res.isError, true, `expected isError:true, got ${JSON.stringify(res)}`);
      assert.match(textOf(res), /\bms\b/, `error text does not name the field "ms": ${textOf(res)}`);
    });
    await r.test('[testserver] unknown tool -> -32602; server still answers afterwards', async () => {
      await assertRpcError(s.client.callTool({ name: 'test_nope', arguments: {} }), -32602, 'unknown tool');
      const res = await s.client.callTool({ name: 'tmcra_status', arguments: {} });
      assertStructuredAndText(res);
    });
    await r.test('[testserver] close: exits 0 on stdin EOF, no client-side errors', async () => {
      s.assertNoClientErrors();
      await s.closeAndCheckExit();
    });
  }
}

await r.test('stdout purity: every byte on every server stdout is a JSON-RPC line', async () => {
  for (const s of sessions) await s.closeQuietly();
  const n = assertAllStdoutPure(logs);
  assert.ok(n > 0, 'no messages recorded');
});

await r.finish();
