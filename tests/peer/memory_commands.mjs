#!/usr/bin/env node
// memory_commands.mjs — `tmcra-mcp memory ...` on the embedded memory, with turns written by real
// tmcra-mcp processes through the official TypeScript SDK client (docs/memory-commands.md).
//
//   node memory_commands.mjs <tmcra-mcp> <tmcra-mcp-testserver>
//
// forget really deletes: a planted unique string (a committed turn, an ingest, the prepared
// turn's receipt, the last-recall note) is found in no file under the data directory once
// `memory forget --match` has run and no process is open. export then import into a fresh data
// directory gives the same search results; a second import adds nothing. retention with a small
// --max-bytes keeps the directory under the cap while turns keep arriving (a server applying
// it every second), oldest first, and keeps an outbox item that is still pending. search
// --explain names the signal that found each item and the other word forms it searched. Bad input is
// refused with a clear message and changes nothing; a remote memory says it offers no forget.
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import {
  Runner, assert, parseBins, requireNodeModules, connectV1, serverEnv, callOk, run, sleep, tmpDir,
} from './lib.mjs';

const NAME = 'memory_commands.mjs';
requireNodeModules(NAME, ['@modelcontextprotocol/sdk']);
const bins = parseBins(NAME);
const r = new Runner(NAME, { budgetMs: 240_000 });
const sessions = [];
const track = (s) => { sessions.push(s); return s; };
r.onCleanup(async () => { for (const s of sessions) await s.closeQuietly(); });

/** serverEnv with a home and data directory of its own. */
function freshEnv(label, extra = {}) {
  const home = path.join(tmpDir(), label);
  fs.mkdirSync(home, { recursive: true, mode: 0o700 });
  return serverEnv({
    HOME: home,
    TMCRA_DATA_DIR: path.join(home, 'tmcra-data'),
    XDG_DATA_HOME: path.join(home, '.local', 'share'),
    XDG_CONFIG_HOME: path.join(home, '.config'),
    XDG_STATE_HOME: path.join(home, '.local', 'state'),
    XDG_CACHE_HOME: path.join(home, '.cache'),
    ...extra,
  });
}

const mark = () => `mk${crypto.randomBytes(6).toString('hex')}`;

/** `tmcra-mcp memory ARGS...` in `env`; parsed JSON when --json is among the args. */
async function memory(env, args, { ok = true } = {}) {
  const res = await run(bins.server, ['memory', ...args], { env, timeoutMs: 60_000 });
  if (ok) assert.equal(res.code, 0, `memory ${args.join(' ')}: exit ${res.code}\n${res.stderr}`);
  if (ok && args.includes('--json')) return JSON.parse(res.stdout);
  return res;
}

/** Every file under `dir` that holds `needle`. */
function filesHolding(dir, needle) {
  const found = [];
  for (const entry of fs.readdirSync(dir, { withFileTypes: true, recursive: true })) {
    const full = path.join(entry.parentPath ?? entry.path, entry.name);
    if (entry.isFile() && fs.readFileSync(full).includes(needle)) found.push(full);
  }
  return found;
}

/** A committed turn and an ingest that both quote `m`, delivered. */
async function plantTurn(client, m, session, extra = '') {
  const prep = await callOk(client, 'tmcra_turn_prepare', {
    turn_id: `t-${m}`, session_id: session, user_message_id: `u-${m}`,
    user_content: `Where did we keep the ${m} notes? ${extra}`,
  });
  assert.equal(prep.status, 'prepared', JSON.stringify(prep).slice(0, 300));
  const commit = await callOk(client, 'tmcra_turn_commit', {
    turn_id: `t-${m}`, assistant_message_id: `a-${m}`,
    assistant_content: `The ${m} notes are in the blue binder. ${extra}`,
  });
  assert.ok(['succeeded', 'submitted', 'pending'].includes(commit.status), JSON.stringify(commit).slice(0, 300));
}

async function drain(client) {
  for (let i = 0; i < 100; ++i) {
    const rec = await callOk(client, 'tmcra_reconcile', {});
    if (rec.queue_counts.pending + rec.queue_counts.submitted === 0) return;
    await sleep(100);
  }
  throw new Error('the outbox did not drain');
}

// --- forget really deletes ------------------------------------------------------------------
const envA = freshEnv('forget');
const secret = mark();
await r.test('forget --match: the planted string is in no file under the data directory', async () => {
  const s = track(await connectV1({ bin: bins.server, label: 'forget', env: envA }));
  await plantTurn(s.client, secret, 'sess-forget');
  await callOk(s.client, 'tmcra_ingest', {
    session_id: 'sess-forget-2', consistency: 'read_your_writes',
    messages: [{ message_id: `i-${secret}`, role: 'user', content: `ingested copy of ${secret}` }],
  });
  await plantTurn(s.client, mark(), 'sess-forget', `unrelated turn that asks about ${secret} again`);
  await plantTurn(s.client, mark(), 'sess-keep', 'a turn that stays');
  await drain(s.client);
  await s.closeAndCheckExit();
  const data = envA.TMCRA_DATA_DIR;
  assert.ok(filesHolding(data, secret).length > 0, 'the planted string was stored');

  const preview = await memory(envA, ['forget', '--match', secret, '--dry-run', '--json']);
  assert.ok(preview.records >= 4, `dry run counts the records: ${JSON.stringify(preview)}`);
  assert.equal(preview.erase, 'none');
  assert.ok(filesHolding(data, secret).length > 0, 'a dry run changes nothing');

  const done = await memory(envA, ['forget', '--match', secret, '--json']);
  assert.equal(done.records, preview.records);
  assert.ok(done.outbox_items >= 2 && done.turns >= 2, JSON.stringify(done));
  assert.equal(done.erase, 'done');
  assert.deepEqual(filesHolding(data, secret), [], 'no file holds the string after the forget');

  const search = await memory(envA, ['search', `${secret} notes`, '--json']);
  assert.ok(!JSON.stringify(search.results).includes(secret), 'search no longer finds it');
  const stats = await memory(envA, ['stats', '--json']);
  const personal = stats.scopes.find((x) => x.scope_name === 'personal');
  assert.equal(personal.messages, 2, `the kept turn stays: ${JSON.stringify(stats)}`);
  assert.equal(stats.erase_pending, false);
});

await r.test('forget --turn and --session remove exactly their records', async () => {
  const s = track(await connectV1({ bin: bins.server, label: 'forget-turn', env: envA }));
  const a = mark();
  const b = mark();
  await plantTurn(s.client, a, 'sess-turns');
  await plantTurn(s.client, b, 'sess-turns');
  await drain(s.client);
  await s.closeAndCheckExit();
  const turn = await memory(envA, ['forget', '--turn', `t-${a}`, '--json']);
  assert.equal(turn.records, 2, JSON.stringify(turn));
  const left = await memory(envA, ['search', `${b} notes`, '--json']);
  assert.ok(JSON.stringify(left.results).includes(b), 'the other turn of the session stays');
  const session = await memory(envA, ['forget', '--session', 'sess-turns', '--json']);
  assert.equal(session.records, 2, JSON.stringify(session));
  assert.deepEqual(filesHolding(envA.TMCRA_DATA_DIR, a), []);
  assert.deepEqual(filesHolding(envA.TMCRA_DATA_DIR, b), []);
});

await r.test('bad input: a clear error and no change', async () => {
  const before = await memory(envA, ['stats', '--json']);
  const cases = [
    [['forget', '--scope', 'no-such-scope'], /unknown scope 'no-such-scope'/],
    [['forget', '--scope', '../etc'], /unknown scope/],
    [['forget', '--before', '31/12/2025'], /--before: '31\/12\/2025' is not a date/],
    [['forget', '--match', 'x'.repeat(5000)], /--match: 1 to 4096 bytes/],
    [['forget'], /name --turn, --session, --scope, --before or --match/],
    [['forget', '--turn', 'never-prepared'], /not in this machine's outbox/],
    [['search', 'q'.repeat(5000)], /QUERY: 1 to 4096 bytes/],
    [['export', '--format', 'pdf'], /--format: jsonl or markdown/],
    [['retention', '--max-bytes', '10'], /at least 64K/],
    [['retention', '--max-age', 'forever'], /not a duration/],
    [['stats', '--frobnicate'], /unknown option --frobnicate/],
  ];
  for (const [args, expected] of cases) {
    const res = await memory(envA, args, { ok: false });
    assert.equal(res.code, 2, `${args.join(' ')}: exit ${res.code}: ${res.stderr}`);
    assert.match(res.stderr, expected, args.join(' '));
  }
  const bogus = path.join(envA.HOME, 'bogus.jsonl');
  fs.writeFileSync(bogus, '{"type":"record","scope_name":"personal","memory_id":"rec_1"}\n');
  const imp = await memory(envA, ['import', bogus], { ok: false });
  assert.notEqual(imp.code, 0);
  assert.match(imp.stderr, /lines\.0\.session_id/);
  assert.deepEqual(await memory(envA, ['stats', '--json']), before, 'nothing changed');
});

// --- export and import ----------------------------------------------------------------------
await r.test('search --explain: another form of a word finds a turn, and says which signal did', async () => {
  const found = await memory(envA, ['search', 'binders', '--json']);
  const hit = found.results.find((x) => x.hit);
  assert.ok(hit, `"binders" finds the turns about the blue binder: ${JSON.stringify(found).slice(0, 400)}`);
  assert.deepEqual(hit.why.signals, ['stem'], JSON.stringify(hit.why));
  assert.ok(found.expansions.some((e) => e.form === 'binder' && e.signal === 'stem'));
  const text = (await memory(envA, ['search', 'binders', '--explain'])).stdout;
  assert.match(text, /found by \["stem"\]/);
  assert.match(text, /for binders: binder \(stem\)/);
});

await r.test('export then import into a fresh data directory: the same search; twice stores once', async () => {
  const envB = freshEnv('export');
  const s = track(await connectV1({ bin: bins.server, label: 'export', env: envB }));
  const topics = ['kubernetes ingress timeout', 'postgres vacuum schedule', '東京のデータセンター移行'];
  for (const t of topics) await plantTurn(s.client, mark(), 'sess-export', t);
  await drain(s.client);
  await s.closeAndCheckExit();
  const file = path.join(envB.HOME, 'export.jsonl');
  await memory(envB, ['export', '--output', file]);
  assert.equal(fs.statSync(file).mode & 0o777, 0o600, 'the export file is 0600');
  const envC = freshEnv('import');
  const first = await memory(envC, ['import', file, '--json']);
  assert.equal(first.records_added, 6, JSON.stringify(first));
  const second = await memory(envC, ['import', file, '--json']);
  assert.equal(second.records_added, 0);
  assert.equal(second.records_present, 6);
  for (const q of ['ingress timeout', 'vacuum schedule', 'データセンター', 'blue binder']) {
    const a = await memory(envB, ['search', q, '--json']);
    const b = await memory(envC, ['search', q, '--json']);
    assert.deepEqual(b.results, a.results, `same results for "${q}"`);
    assert.ok(a.results.length > 0, `"${q}" finds something`);
  }
  const md = await memory(envB, ['export', '--format', 'markdown']);
  assert.match(md.stdout, /## personal \/ session sess-export/);
});

// --- retention ------------------------------------------------------------------------------
/** `count` ingested user/assistant pairs of about 11 kB each, the first one quoting `first`. */
async function fill(client, count, first) {
  const filler = 'lorem ipsum dolor sit amet '.repeat(400);
  let last = first;
  for (let i = 0; i < count; ++i) {
    const m = i === 0 && first ? first : mark();
    last = m;
    await callOk(client, 'tmcra_ingest', {
      session_id: `sess-fill-${i % 7}`, consistency: 'eventual',
      messages: [
        { message_id: `u-${m}`, role: 'user', content: `question ${m} ${filler}` },
        { message_id: `a-${m}`, role: 'assistant', content: `answer ${m} ${filler}` },
      ],
    });
  }
  return last;
}

await r.test('retention --max-bytes: under the cap while turns arrive, oldest first, pending kept', async () => {
  const envD = freshEnv('retention', { TMCRA_RETENTION_INTERVAL_SECONDS: '1' });
  const cap = 1024 * 1024;
  const first = mark();
  let s = track(await connectV1({ bin: bins.server, label: 'retention-1', env: envD }));
  await fill(s.client, 120, first);
  await drain(s.client);
  await s.closeAndCheckExit();

  // A turn whose write is still pending: its server dies before delivering it.
  const pending = mark();
  const dying = track(await connectV1({
    bin: bins.server, label: 'retention-dying',
    env: { ...envD, TMCRA_FAILPOINTS: 'deliver.before_send', TMCRA_RETENTION_INTERVAL_SECONDS: '86400' },
  }));
  await callOk(dying.client, 'tmcra_turn_prepare', {
    turn_id: `t-${pending}`, session_id: 'sess-pending', user_message_id: `u-${pending}`,
    user_content: `Zanzibar ${pending}?`,
  });
  await dying.client.callTool({
    name: 'tmcra_turn_commit',
    arguments: { turn_id: `t-${pending}`, assistant_message_id: `a-${pending}`, assistant_content: `Yes, ${pending}.` },
  }).catch(() => {});
  await dying.closeQuietly();
  const storeCheck = async () => JSON.parse((await run(process.env.TMCRA_STORE_CHECK, [envD.TMCRA_DATA_DIR], { env: envD })).stdout);
  assert.equal((await storeCheck()).outbox_not_succeeded, 1, 'one write is pending');

  const set = await memory(envD, ['retention', '--max-bytes', '1M', '--json']);
  assert.ok(set.applied.size_records > 0, JSON.stringify(set));
  assert.ok(set.applied.bytes_after <= cap, `under the cap: ${JSON.stringify(set.applied)}`);
  assert.equal((await storeCheck()).outbox_not_succeeded, 1, 'the pending write stays');
  assert.deepEqual(filesHolding(envD.TMCRA_DATA_DIR, first), [], 'the oldest went first');

  // Writes keep arriving at a server that applies the policy every second; it delivers the
  // pending write too, which is newer than what is left of the first writes, so they go first.
  s = track(await connectV1({ bin: bins.server, label: 'retention-2', env: envD }));
  await drain(s.client);
  const delivered = await memory(envD, ['search', `Zanzibar ${pending}`, '--json']);
  assert.ok(JSON.stringify(delivered.results).includes(pending), 'the pending turn was delivered, not dropped');
  const last = await fill(s.client, 20, '');
  await drain(s.client);
  await sleep(3000);
  await s.closeAndCheckExit();
  const stats = await memory(envD, ['stats', '--json']);
  assert.ok(stats.data_dir_bytes <= cap, `under the cap after the server's passes: ${stats.data_dir_bytes}`);
  const newest = await memory(envD, ['search', `answer ${last}`, '--json']);
  assert.ok(JSON.stringify(newest.results).includes(last), 'the newest write stays');
}, { timeoutMs: 150_000 });

await r.finish();
