#!/usr/bin/env node
// remote_memory_commands.mjs — `tmcra-mcp memory ...` against a real tmcra-memd over HTTPS
// (docs/memory-commands.md, docs/memd.md "Maintenance endpoints"), and against a memory that has
// no maintenance endpoints (TMCRA's hosted service answers 404, played by a proxy).
//
//   node remote_memory_commands.mjs <tmcra-mcp> <tmcra-mcp-testserver>
//
// A key with the default permissions may import (memory:write) and read the scopes' figures,
// but export and forget are refused (memory:export, memory:delete are never default) with a
// clear error, and nothing changes; a key holding them exports and forgets. Against the 404
// memory every maintenance command says the memory offers no such call and changes nothing.
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { Runner, assert, parseBins, run, tmpDir, connectV1, callOk } from './lib.mjs';
import { makeCerts, createKey, startMemd, remoteEnv, FaultProxy } from './remote_lib.mjs';

const NAME = 'remote_memory_commands.mjs';
const bins = parseBins(NAME);
const r = new Runner(NAME, { budgetMs: 120_000 });

const certs = makeCerts();
const dataDir = path.join(tmpDir(), 'memd-data');
fs.mkdirSync(dataDir, { recursive: true, mode: 0o700 });
const basicKey = createKey(dataDir);
const adminKey = createKey(dataDir, 'memory:read,memory:write,memory:delete,memory:export');
const memd = await startMemd({ dataDir, certs });
r.onCleanup(() => memd.stop());

const marker = `mk${crypto.randomBytes(6).toString('hex')}`;
const basic = remoteEnv({ url: memd.url, key: basicKey, ca: certs.ca });
const admin = remoteEnv({ url: memd.url, key: adminKey, ca: certs.ca });

async function memory(env, args) {
  const res = await run(bins.server, ['memory', ...args], { env, timeoutMs: 30_000 });
  return { ...res, json: res.code === 0 && args.includes('--json') ? JSON.parse(res.stdout) : null };
}

const exportFile = path.join(tmpDir(), 'seed.jsonl');
fs.writeFileSync(exportFile, [
  { type: 'tmcra-export', format: 1 },
  { type: 'record', scope_name: 'team', memory_id: `rec_${marker}`, session_id: 's1', message_id: 'm1',
    role: 'user', content: `the release checklist lives in ${marker}`, occurred_at: 1767225600,
    timestamp: '2026-01-01T00:00:00Z', metadata: {}, job_id: 'job_seed' },
].map((l) => JSON.stringify(l)).join('\n') + '\n');

await r.test('a default key imports and reads the figures', async () => {
  const imported = await memory(basic, ['import', exportFile, '--json']);
  assert.equal(imported.code, 0, imported.stderr);
  assert.equal(imported.json.records_added, 1);
  const stats = await memory(basic, ['stats', '--json']);
  assert.equal(stats.code, 0, stats.stderr);
  assert.equal(stats.json.scopes.find((s) => s.scope_name === 'team').messages, 1);
});

await r.test('a default key may not export or forget: a clear error, nothing changed', async () => {
  const forget = await memory(basic, ['forget', '--match', marker]);
  assert.equal(forget.code, 1, forget.stderr);
  assert.match(forget.stderr, /memory:delete is required/);
  const exported = await memory(basic, ['export']);
  assert.equal(exported.code, 1, exported.stderr);
  assert.match(exported.stderr, /memory:export is required/);
  const search = await memory(basic, ['search', `release checklist ${marker}`, '--json']);
  assert.ok(JSON.stringify(search.json.results).includes(marker), 'still stored');
});

await r.test('a key with memory:export and memory:delete exports and forgets', async () => {
  const exported = await memory(admin, ['export']);
  assert.equal(exported.code, 0, exported.stderr);
  assert.ok(exported.stdout.includes(marker));
  const forget = await memory(admin, ['forget', '--match', marker, '--json']);
  assert.equal(forget.code, 0, forget.stderr);
  assert.equal(forget.json.records, 1);
  const search = await memory(admin, ['search', `release checklist ${marker}`, '--json']);
  assert.ok(!JSON.stringify(search.json.results).includes(marker), 'gone');
});

await r.test('a memory without maintenance endpoints says so and changes nothing', async () => {
  const proxy = new FaultProxy({
    upstream: memd.url, certs,
    plan: (req) => (/\/(forget|export|import)$|\/v1\/scopes$/.test(req.path.split('?')[0])
      ? { status: 404, headers: { 'content-type': 'application/json' }, body: '{"detail":"Not Found"}' }
      : 'pass'),
  });
  await proxy.listen();
  try {
    const env = remoteEnv({ url: proxy.url, key: adminKey, ca: certs.ca });
    for (const args of [['stats'], ['export'], ['import', exportFile], ['forget', '--scope', 'team']]) {
      const res = await memory(env, args);
      assert.equal(res.code, 1, `${args[0]}: ${res.stderr}`);
      assert.match(res.stderr, /this memory offers no .*nothing was changed/, `${args[0]}: ${res.stderr}`);
    }
    assert.equal(proxy.ledger.filter((l) => l.action !== 'pass' && l.method === 'POST').length,
      proxy.ledger.filter((l) => l.method === 'POST').length, 'no write reached the memory');
  } finally {
    await proxy.close?.();
  }
});

await r.test('tmcra_wait_job sends notifications/progress to a request with a progress token', async () => {
  const idleDir = path.join(tmpDir(), 'memd-idle');
  fs.mkdirSync(idleDir, { recursive: true, mode: 0o700 });
  const key = createKey(idleDir);
  const idle = await startMemd({ dataDir: idleDir, certs, args: ['--no-job-worker'] });
  const s = await connectV1({ bin: bins.server, label: 'progress', env: remoteEnv({ url: idle.url, key, ca: certs.ca }) });
  try {
    // The background sender may hold the item when the call delivers it (a "pending" receipt);
    // the same ingest again is stored once and answers with the receipt and its job id.
    let ingest;
    for (let i = 0; i < 50 && !ingest?.job_id; ++i) {
      if (i > 0) await new Promise((done) => setTimeout(done, 100));
      ingest = await callOk(s.client, 'tmcra_ingest', {
        session_id: 'progress', consistency: 'eventual',
        messages: [{ message_id: 'p1', role: 'user', content: 'a job no worker runs' }],
      });
    }
    const jobId = ingest.job_id;
    assert.ok(jobId, JSON.stringify(ingest));
    const seen = [];
    const res = await s.client.callTool(
      { name: 'tmcra_wait_job', arguments: { job_id: jobId, timeout_seconds: 1.5, poll_interval_seconds: 0.2 } },
      undefined, { onprogress: (p) => seen.push(p) });
    assert.equal(res.isError, true, 'the job never finishes: the wait times out');
    assert.ok(seen.length >= 3, `progress notifications: ${JSON.stringify(seen)}`);
    for (let i = 1; i < seen.length; ++i) assert.ok(seen[i].progress > seen[i - 1].progress, 'progress grows');
    assert.match(seen[0].message, /is pending/);
  } finally {
    await s.closeQuietly();
    await idle.stop();
  }
});

await r.finish();
