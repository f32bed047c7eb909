#!/usr/bin/env node
// elicitation.mjs — server -> client `elicitation/create` round trips through the
// official SDK clients (v1 @modelcontextprotocol/sdk 1.32.2, v2 @modelcontextprotocol/client
// 2.4.0), using the testserver's `test_elicit` tool.
//
//   node elicitation.mjs <tmcra-mcp> <tmcra-mcp-testserver>
import {
  Runner, assert, parseBins, requireNodeModules, connectV1, connectV2, assertAllStdoutPure,
  assertStructuredAndText, checkStdoutLog,
} from './lib.mjs';

const NAME = 'elicitation.mjs';
requireNodeModules(NAME, ['@modelcontextprotocol/sdk', '@modelcontextprotocol/client']);
const bins = parseBins(NAME);
const { ElicitRequestSchema } = await import('@modelcontextprotocol/sdk/types.js');
const r = new Runner(NAME);
const logs = [];
const sessions = [];
const track = (s) => { logs.push(s.logPath); sessions.push(s); return s; };
r.onCleanup(async () => { for (const s of sessions) await s.closeQuietly(); });

// The client's answer is chosen by the message the test passes to test_elicit.
function answerFor(message) {
  if (message.includes('please-accept')) return { action: 'accept', content: { confirm: true } };
  if (message.includes('please-refuse')) return { action: 'accept', content: { confirm: false } };
  if (message.includes('please-decline')) return { action: 'decline' };
  if (message.includes('please-cancel')) return { action: 'cancel' };
  if (message.includes('please-fail')) throw new Error('peer test: handler refuses (JSON-RPC error expected)');
  throw new Error(`unexpected elicitation message ${JSON.stringify(message)}`);
}

function makeHandler(seen) {
  return async (req) => {
    seen.push(req.params);
    // Answer a bit later than immediately, like a human would (and so that the
    // server really has to wait for the response on stdin).
    await new Promise((res) => setTimeout(res, 20));
    return answerFor(req.params.message);
  };
}

async function elicit(client, message) {
  const res = await client.callTool({ name: 'test_elicit', arguments: { message } });
  return assertStructuredAndText(res);
}

function checkRequestShape(params, { message, version }) {
  assert.equal(params.message, message, 'elicitation message not passed through');
  const schema = params.requestedSchema;
  assert.equal(schema?.type, 'object', `requestedSchema.type: ${JSON.stringify(schema)}`);
  assert.equal(schema.properties?.confirm?.type, 'boolean', `requestedSchema lacks boolean "confirm": ${JSON.stringify(schema)}`);
  if (version < '2025-11-25') {
    assert.equal(params.mode, undefined, `"mode" sent at ${version} (exists only from 2025-11-25)`);
  } else if (params.mode !== undefined) {
    assert.equal(params.mode, 'form');
  }
}

/** elicitation/create requests the server wrote to stdout in one session. */
function elicitRequestsOnWire(logPath) {
  return checkStdoutLog(logPath).messages.filter((m) => m.method === 'elicitation/create');
}

// --- v1 client, 2025-11-25, elicitation: {} ----------------------------------------
{
  const seen = [];
  let s;
  await r.test('[v1 2025-11-25 elicitation:{}] connect', async () => {
    s = track(await connectV1({
      bin: bins.testserver, label: 'v1-elicit', capabilities: { elicitation: {} },
      setup: (c) => c.setRequestHandler(ElicitRequestSchema, makeHandler(seen)),
    }));
    assert.equal(s.client.negotiatedVersion, '2025-11-25');
    await s.client.listTools();
  });
  if (s) {
    await r.test('[v1] accept -> outcome accept, content.confirm true', async () => {
      const msg = 'tmcra peer test: please-accept';
      const st = await elicit(s.client, msg);
      assert.equal(st.outcome, 'accept', JSON.stringify(st));
      assert.equal(st.content?.confirm, true, JSON.stringify(st));
      assert.equal(seen.length, 1, 'client handler should have been called once');
      checkRequestShape(seen[0], { message: msg, version: '2025-11-25' });
    });
    await r.test('[v1] accept with confirm:false -> outcome accept, content.confirm false', async () => {
      const st = await elicit(s.client, 'please-refuse');
      assert.equal(st.outcome, 'accept', JSON.stringify(st));
      assert.equal(st.content?.confirm, false, JSON.stringify(st));
    });
    await r.test('[v1] decline -> outcome decline, no content', async () => {
      const st = await elicit(s.client, 'please-decline');
      assert.equal(st.outcome, 'decline', JSON.stringify(st));
      assert.equal(st.content, undefined, JSON.stringify(st));
    });
    await r.test('[v1] cancel -> outcome cancel, no content', async () => {
      const st = await elicit(s.client, 'please-cancel');
      assert.equal(st.outcome, 'cancel', JSON.stringify(st));
      assert.equal(st.content, undefined, JSON.stringify(st));
    });
    await r.test('[v1] client answers with a JSON-RPC error -> outcome error', async () => {
      const st = await elicit(s.client, 'please-fail');
      assert.equal(st.outcome, 'error', JSON.stringify(st));
    });
    await r.test('[v1] two concurrent elicitations are routed by id', async () => {
      const [a, d] = await Promise.all([elicit(s.client, 'one: please-accept'), elicit(s.client, 'two: please-decline')]);
      assert.equal(a.outcome, 'accept', JSON.stringify(a));
      assert.equal(d.outcome, 'decline', JSON.stringify(d));
    });
    await r.test('[v1] server-side ids of elicitation requests are unique', async () => {
      const reqs = elicitRequestsOnWire(s.logPath);
      assert.equal(reqs.length, seen.length, `wire shows ${reqs.length} elicitation requests, handler saw ${seen.length}`);
      const ids = reqs.map((m) => JSON.stringify(m.id));
      assert.equal(new Set(ids).size, ids.length, `duplicate elicitation ids: ${ids}`);
    });
    await r.test('[v1] close -> exit 0, no client-side errors', async () => {
      s.assertNoClientErrors();
      await s.closeAndCheckExit();
    });
  }
}

// --- v1 client, 2025-06-18: no "mode" field ------------------------------------
{
  const seen = [];
  await r.test('[v1 2025-06-18 elicitation:{}] accept; request carries no "mode"', async () => {
    const s = track(await connectV1({
      bin: bins.testserver, label: 'v1-elicit-0618', protocolVersion: '2025-06-18', capabilities: { elicitation: {} },
      setup: (c) => c.setRequestHandler(ElicitRequestSchema, makeHandler(seen)),
    }));
    assert.equal(s.client.negotiatedVersion, '2025-06-18');
    await s.client.listTools();
    const st = await elicit(s.client, 'v0618 please-accept');
    assert.equal(st.outcome, 'accept', JSON.stringify(st));
    assert.equal(st.content?.confirm, true);
    const wire = elicitRequestsOnWire(s.logPath);
    assert.equal(wire.length, 1);
    checkRequestShape(wire[0].params, { message: 'v0618 please-accept', version: '2025-06-18' });
    s.assertNoClientErrors();
    await s.closeAndCheckExit();
  });
}

// --- clients that must NOT receive elicitation/create ---------------------------
await r.test('[v1 no elicitation capability] outcome unsupported, nothing sent', async () => {
  const s = track(await connectV1({ bin: bins.testserver, label: 'v1-noelicit', capabilities: {} }));
  await s.client.listTools();
  const st = await elicit(s.client, 'please-accept');
  assert.equal(st.outcome, 'unsupported', JSON.stringify(st));
  assert.equal(elicitRequestsOnWire(s.logPath).length, 0, 'server sent elicitation/create to a client without the capability');
  s.assertNoClientErrors();
  await s.closeAndCheckExit();
});

await r.test('[v1 2025-11-25 elicitation:{url:{}} only] form mode not declared -> unsupported, nothing sent', async () => {
  // 2025-11-25: {"url":{}} alone means the client supports URL mode only; the server
  // MUST NOT use a mode the client did not declare (form).
  const s = track(await connectV1({ bin: bins.testserver, label: 'v1-urlonly', capabilities: { elicitation: { url: {} } } }));
  await s.client.listTools();
  const st = await elicit(s.client, 'please-accept');
  assert.equal(elicitRequestsOnWire(s.logPath).length, 0, 'server sent a form elicitation to a URL-only client');
  assert.equal(st.outcome, 'unsupported', JSON.stringify(st));
  await s.closeAndCheckExit();
});

// --- v2 client, elicitation: {form: {}} ------------------------------------------
{
  const seen = [];
  let s;
  await r.test('[v2 elicitation:{form:{}}] connect (legacy mode)', async () => {
    s = track(await connectV2({
      bin: bins.testserver, label: 'v2-elicit', capabilities: { elicitation: { form: {} } },
      setup: (c) => c.setRequestHandler('elicitation/create', makeHandler(seen)),
    }));
    assert.equal(s.client.negotiatedVersion, '2025-11-25');
    await s.client.listTools();
  });
  if (s) {
    await r.test('[v2] accept -> outcome accept, content.confirm true', async () => {
      const st = await elicit(s.client, 'v2 please-accept');
      assert.equal(st.outcome, 'accept', JSON.stringify(st));
      assert.equal(st.content?.confirm, true, JSON.stringify(st));
      checkRequestShape(seen[0], { message: 'v2 please-accept', version: '2025-11-25' });
    });
    await r.test('[v2] decline -> outcome decline', async () => {
      const st = await elicit(s.client, 'v2 please-decline');
      assert.equal(st.outcome, 'decline', JSON.stringify(st));
    });
    await r.test('[v2] cancel -> outcome cancel', async () => {
      const st = await elicit(s.client, 'v2 please-cancel');
      assert.equal(st.outcome, 'cancel', JSON.stringify(st));
    });
    await r.test('[v2] close -> exit 0, no client-side errors', async () => {
      s.assertNoClientErrors();
      await s.closeAndCheckExit();
    });
  }
}

await r.test('stdout purity over all sessions', async () => {
  for (const s of sessions) await s.closeQuietly();
  assertAllStdoutPure(logs);
});

await r.finish();
