// A loopback fake embeddings service for the tests (docs/recall.md, "Vectors"): Ollama's
// POST /api/embed and the OpenAI-compatible POST /v1/embeddings, with deterministic vectors
// that make chosen paraphrases close. A text's vector is the sum of one pseudo-random unit
// vector per word (letters only, 3 or more, stop words left out), where the words of one
// meaning share a vector ("ship", "deploying" -> deploy; "invoicing", "billing" -> bill;
// "physician", "doctor" -> doctor). Model "fake-b" answers 256 dimensions, any other 384.
//
//   const fake = await FakeEmbeddings.start();   // fake.port, fake.requests
//   const tls = await FakeEmbeddings.start({ cert, key });  // HTTPS with that certificate (PEM files)
//   fake.mode = 'ok' | 'slow' | 'error' | 'wrongdims' | 'nan';  await fake.stop(); await fake.restart();
import fs from 'node:fs';
import http from 'node:http';
import https from 'node:https';

const CONCEPTS = {
  ship: 'deploy', shipped: 'deploy', shipping: 'deploy', deploying: 'deploy', deployment: 'deploy',
  deployed: 'deploy', rollout: 'deploy', invoicing: 'bill', invoice: 'bill', billing: 'bill',
  physician: 'doctor', doctor: 'doctor', medic: 'doctor', prescribed: 'prescribe',
  prescription: 'prescribe',
};
const STOP = new Set(['the', 'and', 'are', 'was', 'for', 'with', 'what', 'did', 'our', 'which']);

function seedOf(text) {
  let h = 2166136261;
  for (const c of Buffer.from(text)) h = Math.imul(h ^ c, 16777619) >>> 0;
  return h;
}

function unitVector(word, dims) {
  let s = seedOf(word);
  const v = [];
  for (let i = 0; i < dims; ++i) {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    v.push(s / 2 ** 32 - 0.5);
  }
  const norm = Math.hypot(...v);
  return v.map((x) => x / norm);
}

export function fakeVector(text, dims) {
  const v = new Array(dims).fill(0);
  const words = (text.toLowerCase().match(/[a-z]+/g) ?? []).filter((w) => w.length >= 3 && !STOP.has(w));
  for (const w of words.length ? words : ['empty']) {
    const u = unitVector(CONCEPTS[w] ?? w, dims);
    for (let i = 0; i < dims; ++i) v[i] += u[i];
  }
  return v;
}

export class FakeEmbeddings {
  static async start(tls = null) {
    const fake = new FakeEmbeddings(tls);
    await fake.restart();
    return fake;
  }

  constructor(tls = null) {
    this.tls = tls ? { cert: fs.readFileSync(tls.cert), key: fs.readFileSync(tls.key) } : null;
    this.mode = 'ok';
    this.requests = [];  // {path, model, inputs, authorization}
    this.port = 0;
    this.server = null;
  }

  async restart() {
    const handler = (req, res) => this.handle(req, res);
    this.server = this.tls ? https.createServer(this.tls, handler) : http.createServer(handler);
    await new Promise((done, fail) => {
      this.server.once('error', fail);
      this.server.listen(this.port, '127.0.0.1', done);
    });
    this.port = this.server.address().port;
  }

  async stop() {
    const s = this.server;
    this.server = null;
    s.closeAllConnections?.();
    await new Promise((done) => s.close(done));
  }

  handle(req, res) {
    let body = '';
    req.on('data', (c) => { body += c; });
    req.on('end', () => {
      let parsed = {};
      try { parsed = JSON.parse(body); } catch { /* answered below */ }
      const inputs = Array.isArray(parsed.input) ? parsed.input : [parsed.input];
      this.requests.push({ path: req.url, model: parsed.model, inputs, authorization: req.headers.authorization ?? null });
      const answer = () => this.answer(req.url, parsed.model, inputs, res);
      if (this.mode === 'slow') setTimeout(answer, 3000); else answer();
    });
  }

  answer(path, model, inputs, res) {
    if (this.mode === 'error') {
      res.writeHead(500, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ error: 'model failed to load' }));
      return;
    }
    const dims = (model === 'fake-b' ? 256 : 384) + (this.mode === 'wrongdims' ? 7 : 0);
    const vectors = inputs.map((t) => fakeVector(String(t), dims));
    let text = path.endsWith('/api/embed')
      ? JSON.stringify({ model, embeddings: vectors })
      : JSON.stringify({ object: 'list', model, data: vectors.map((embedding, index) => ({ object: 'embedding', index, embedding })) });
    if (this.mode === 'nan') text = text.replace(/-?\d+\.\d+/, 'NaN');
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(text);
  }
}
