#!/usr/bin/env node
// embeddings_e2e.mjs — semantic recall end to end (docs/recall.md, "Vectors"): tmcra-mcp on its
// embedded store with a loopback fake embeddings service (tests/support/fake_embeddings.mjs)
// started here, driven by the official MCP SDK client and `tmcra-mcp memory search`.
//
//   node embeddings_e2e.mjs <tmcra-mcp> <tmcra-mcp-testserver>
//
// Stems and synonyms are off, so a paraphrase that shares no word with its fact is found by
// the vector signal alone. Then the service goes down, slow, answers errors, wrong dimensions
// or NaN: recall still answers from the words, nothing is lost (every record gets its vector
// once the service is back), and tmcra_status says what is wrong. A new model re-embeds every
// record and recall searches its vectors only; the OpenAI-compatible endpoint gets the key as a
// bearer token, and the key appears in no output. Over HTTPS (a test-time certificate) the
// service is used with its CA file and refused without it; and a tmcra-memd configured with the
// service gives a remote tmcra-mcp the same vector recall.
import fs from 'node:fs';
import path from 'node:path';
import { Runner, assert, parseBins, run, connectV1, callOk, serverEnv } from './lib.mjs';
import { FakeEmbeddings } from '../support/fake_embeddings.mjs';
import { makeCerts, createKey, startMemd, remoteEnv } from './remote_lib.mjs';

const NAME = 'embeddings_e2e.mjs';
const bins = parseBins(NAME);
const r = new Runner(NAME, { budgetMs: 240_000 });
const sleep = (ms) => new Promise((done) => setTimeout(done, ms));

const fake = await FakeEmbeddings.start();
r.onCleanup(() => fake.server && fake.stop());

const FACT = 'We are deploying the billing API tonight';
const SECRET = 'sk-embed-e2e-4f9c2a7d1b';
const base = serverEnv();
const envFor = (model, { api = '/api/embed', key } = {}) => ({
  ...base,
  TMCRA_EMBEDDINGS_URL: `http://localhost:${fake.port}${api}`,
  TMCRA_EMBEDDINGS_MODEL: model,
  TMCRA_EMBEDDINGS_TIMEOUT_SECONDS: '1',
  TMCRA_RECALL_LANGUAGE: 'none',
  TMCRA_RECALL_SYNONYMS: 'off',
  ...(key ? { TMCRA_EMBEDDINGS_API_KEY: key } : {}),
});

let counter = 0;
async function say(client, text) {
  const n = ++counter;
  await callOk(client, 'tmcra_ingest', {
    session_id: `e2e-${n}`, consistency: 'read_your_writes',
    messages: [{ message_id: `m${n}`, role: 'user', content: text }],
  });
}

async function embeddings(client) {
  const status = await callOk(client, 'tmcra_status', {});
  const figures = status.store?.figures ?? {};
  return { ...figures.embeddings, records: figures.records };
}

async function waitFor(client, what, done, ms = 30_000) {
  const until = Date.now() + ms;
  let last;
  while (Date.now() < until) {
    last = await embeddings(client);
    if (done(last)) return last;
    await sleep(100);
  }
  throw new Error(`${what}: never reached; last ${JSON.stringify(last)}`);
}

async function explain(env, query) {
  const res = await run(bins.server, ['memory', 'search', '--explain', '--json', query], { env, timeoutMs: 30_000 });
  assert.equal(res.code, 0, res.stderr);
  return JSON.parse(res.stdout);
}

function hitOf(results, text) {
  return results.results.find((x) => x.hit && x.text === text);
}

const envA = envFor('fake-a');
const s = await connectV1({ bin: bins.server, label: 'embed-a', env: envA });
r.onCleanup(() => s.closeQuietly());

await r.test('records are embedded in the background and the vector signal alone finds a paraphrase', async () => {
  await say(s.client, FACT);
  await say(s.client, 'The physician prescribed rest and water');
  await say(s.client, 'Lunch is at noon in the garden');
  const e = await waitFor(s.client, 'every record embedded', (x) => x.backlog === 0 && x.vectors === 3);
  assert.equal(e.model, 'fake-a');
  assert.equal(e.dimensions, 384);
  assert.equal(e.state, 'ok');
  assert.ok(fake.requests.every((q) => q.model === 'fake-a' && q.path === '/api/embed'));
  const recall = await callOk(s.client, 'tmcra_recall', { query: 'ship invoicing' });
  assert.ok(JSON.stringify(recall).includes(FACT), JSON.stringify(recall).slice(0, 400));
  const found = await explain(envA, 'ship invoicing');
  const hit = hitOf(found, FACT);
  assert.ok(hit, JSON.stringify(found).slice(0, 600));
  assert.deepEqual(hit.why.signals, ['vector']);
  assert.ok(hit.why.similarity > 0.3, JSON.stringify(hit.why));
  assert.equal(found.vectors.searched, true);
  assert.equal(hitOf(found, 'Lunch is at noon in the garden'), undefined, 'below the similarity floor');
});

for (const mode of ['down', 'slow', 'error', 'wrongdims', 'nan']) {
  await r.test(`the service ${mode}: recall answers from the words, nothing is lost, the status says why`, async () => {
    const marker = `zq${mode}x${counter}`;
    if (mode === 'down') await fake.stop(); else fake.mode = mode;
    try {
      await say(s.client, `fault note ${marker} for the ${mode} service`);
      const failing = await waitFor(s.client, 'the status says what is wrong', (x) => x.state === 'failing' && x.backlog >= 1);
      assert.ok(failing.last_error, JSON.stringify(failing));
      const started = Date.now();
      const found = await explain(envA, marker);
      assert.ok(Date.now() - started < 15_000, 'recall did not wait on the service');
      const hit = found.results.find((x) => x.hit && x.text.includes(marker));
      assert.ok(hit, JSON.stringify(found).slice(0, 600));
      assert.deepEqual(hit.why.signals, ['word']);
      assert.equal(found.vectors.searched, false);
      assert.ok(found.vectors.note, JSON.stringify(found.vectors));
    } finally {
      fake.mode = 'ok';
      if (mode === 'down') await fake.restart();
    }
    await say(s.client, `wake note after ${mode}`);  // a new job wakes the embedding thread
    const e = await waitFor(s.client, 'the backlog embedded once the service is back',
      (x) => x.backlog === 0 && x.state === 'ok', 90_000);
    assert.equal(e.vectors, e.records, 'every record has its vector');
  });
}

await r.test('a new model re-embeds every record, and recall searches its vectors only', async () => {
  await s.closeQuietly();
  const before = fake.requests.length;
  const envB = envFor('fake-b');
  const b = await connectV1({ bin: bins.server, label: 'embed-b', env: envB });
  try {
    const e = await waitFor(b.client, 're-embedded', (x) => x.backlog === 0 && x.vectors === x.records && x.vectors > 0);
    assert.equal(e.model, 'fake-b');
    assert.equal(e.dimensions, 256);
    assert.ok(fake.requests.slice(before).every((q) => q.model === 'fake-b'), 'only the new model is asked');
    const found = await explain(envB, 'ship invoicing');
    const hit = hitOf(found, FACT);
    assert.ok(hit, JSON.stringify(found).slice(0, 600));
    assert.deepEqual(hit.why.signals, ['vector']);
  } finally {
    await b.closeQuietly();
  }
});

await r.test('the OpenAI-compatible endpoint gets the key as a bearer token; the key is in no output', async () => {
  const env = { ...envFor('fake-a', { api: '/v1/embeddings', key: SECRET }), TMCRA_DATA_DIR: path.join(base.HOME, 'openai-data') };
  const before = fake.requests.length;
  const o = await connectV1({ bin: bins.server, label: 'embed-openai', env });
  try {
    await say(o.client, FACT);
    await waitFor(o.client, 'embedded', (x) => x.backlog === 0 && x.vectors === 1);
    const status = await callOk(o.client, 'tmcra_status', {});
    assert.equal(status.memory.embeddings.key, 'set');
    const found = await explain(env, 'ship invoicing');
    assert.deepEqual(hitOf(found, FACT)?.why.signals, ['vector']);
    const sent = fake.requests.slice(before);
    assert.ok(sent.length > 0 && sent.every((q) => q.path === '/v1/embeddings' && q.authorization === `Bearer ${SECRET}`));
    assert.ok(!JSON.stringify(status).includes(SECRET), 'the key in tmcra_status');
    assert.ok(!o.stderr().includes(SECRET), 'the key in the log');
  } finally {
    await o.closeQuietly();
  }
});

const certs = makeCerts();

await r.test('over HTTPS the service is used with its CA file, and refused without it', async () => {
  const tls = await FakeEmbeddings.start({ cert: certs.cert, key: certs.key });
  try {
    const url = `https://127.0.0.1:${tls.port}/api/embed`;
    const trusted = { ...envFor('fake-a'), TMCRA_EMBEDDINGS_URL: url, TMCRA_EMBEDDINGS_CA_FILE: certs.ca,
      TMCRA_DATA_DIR: path.join(base.HOME, 'https-data') };
    const t = await connectV1({ bin: bins.server, label: 'embed-https', env: trusted });
    try {
      await say(t.client, FACT);
      await waitFor(t.client, 'embedded over https', (x) => x.backlog === 0 && x.vectors === 1);
      assert.deepEqual(hitOf(await explain(trusted, 'ship invoicing'), FACT)?.why.signals, ['vector']);
    } finally {
      await t.closeQuietly();
    }
    const untrusted = { ...trusted, TMCRA_EMBEDDINGS_CA_FILE: '', TMCRA_DATA_DIR: path.join(base.HOME, 'https-untrusted') };
    const u = await connectV1({ bin: bins.server, label: 'embed-untrusted', env: untrusted });
    try {
      await say(u.client, FACT);
      const failing = await waitFor(u.client, 'refused', (x) => x.state === 'failing');
      assert.match(failing.last_error, /certificate|SSL|TLS/i);
      assert.equal(failing.vectors, 0);
    } finally {
      await u.closeQuietly();
    }
  } finally {
    await tls.stop();
  }
});

await r.test('a tmcra-memd with the service gives a remote tmcra-mcp vector recall', async () => {
  const dataDir = path.join(base.HOME, 'memd-data');
  fs.mkdirSync(dataDir, { recursive: true, mode: 0o700 });
  const key = createKey(dataDir);
  const memd = await startMemd({ dataDir, certs, args: ['--embeddings-url', `http://localhost:${fake.port}/api/embed`,
    '--embeddings-model', 'fake-a', '--recall-language', 'none', '--recall-synonyms', 'off'] });
  try {
    const env = remoteEnv({ url: memd.url, key, ca: certs.ca });
    const m = await connectV1({ bin: bins.server, label: 'embed-memd', env });
    try {
      await say(m.client, FACT);
      const until = Date.now() + 30_000;
      let found;
      do {
        await sleep(200);
        found = await explain(env, 'ship invoicing');
      } while (!hitOf(found, FACT) && Date.now() < until);
      assert.deepEqual(hitOf(found, FACT)?.why.signals, ['vector'], JSON.stringify(found).slice(0, 600));
    } finally {
      await m.closeQuietly();
    }
  } finally {
    await memd.stop();
  }
});

await r.finish();
