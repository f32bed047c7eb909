#!/usr/bin/env node
// recall_side_by_side.mjs — the same synthetic corpus in tmcra-mcp and in
// @modelcontextprotocol/server-memory, driven by the same SDK client over MCP.
//
// The corpus comes from `memory_bench --export FILE` (sessions of user/assistant turns with one
// planted fact each, and paraphrased questions about a sample of the facts). Each server stores
// every session (tmcra-mcp: `tmcra_ingest`, one call per session; server-memory: one entity per
// session whose observations are the messages, `create_entities` in chunks), then answers every
// question:
//   tmcra-mcp      `tmcra_recall` {query: question}
//   server-memory  `search_nodes` {query: question}   (what a host would send), and
//                  `search_nodes` {query: the fact's entity key, e.g. "tango-417"}
//                  (the best case for its substring match).
// A question is an evidence hit when the planted fact's message (tmcra-mcp: a record of the
// returned windows; server-memory: the session's entity among the first 8 returned) is there.
// Reports median and p99 latency, hit rate, and the server's peak RSS. A benchmark, never a test.
//
// Usage: node recall_side_by_side.mjs --corpus FILE [--bin PATH] [--out DIR]

import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';

const HERE = path.dirname(fileURLToPath(import.meta.url));
const REPO = path.resolve(HERE, '..');

function arg(name, fallback) {
  const i = process.argv.indexOf(name);
  return i >= 0 && i + 1 < process.argv.length ? process.argv[i + 1] : fallback;
}

const corpusFile = arg('--corpus');
if (!corpusFile) {
  console.error('usage: node recall_side_by_side.mjs --corpus FILE [--bin PATH] [--out DIR]');
  process.exit(2);
}
const bin = path.resolve(arg('--bin', path.join(REPO, 'build', 'bench', 'src', 'app', 'tmcra-mcp')));
const outDir = path.resolve(arg('--out', path.join(HERE, 'results')));

function loadCorpus(file) {
  const sessions = new Map();
  const questions = [];
  for (const line of fs.readFileSync(file, 'utf8').split('\n')) {
    if (!line.trim()) continue;
    const row = JSON.parse(line);
    if (row.question) {
      questions.push(row);
    } else {
      if (!sessions.has(row.session_id)) sessions.set(row.session_id, []);
      sessions.get(row.session_id).push(row.message);
    }
  }
  return { sessions, questions };
}

function summarize(samples) {
  const s = [...samples].sort((a, b) => a - b);
  const at = (p) => s[Math.min(s.length - 1, Math.floor(p * s.length))];
  return { n: s.length, p50_ms: +at(0.5).toFixed(3), p99_ms: +at(0.99).toFixed(3) };
}

function vmHwmKiB(pid) {
  const m = /VmHWM:\s+(\d+) kB/.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'));
  return m ? Number(m[1]) : null;
}

async function connect(command, args, env) {
  const transport = new StdioClientTransport({ command, args, env, stderr: 'ignore' });
  const client = new Client({ name: 'recall-bench', version: '0' }, { capabilities: {} });
  await client.connect(transport);
  return { client, transport };
}

async function call(client, name, args) {
  const r = await client.callTool({ name, arguments: args }, undefined, { timeout: 120_000 });
  if (r.isError) throw new Error(`${name}: ${r.content?.[0]?.text}`);
  return r.structuredContent;
}

function entityKey(question) {
  // "When is the backup window of cluster tango-417?" -> "tango-417"
  const words = question.replace(/\?$/, '').split(' ');
  return words[words.length - 1];
}

async function benchTmcra(corpus, tmp) {
  const env = { ...process.env, HOME: tmp, TMCRA_DATA_DIR: path.join(tmp, 'tmcra'),
                TMCRA_LOG_LEVEL: 'warn' };
  for (const k of ['TMCRA_API_KEY', 'TMCRA_BASE_URL', 'TMCRA_CONFIG_FILE']) delete env[k];
  const { client, transport } = await connect(bin, [], env);
  const t0 = performance.now();
  let lastJob = null;
  for (const [session_id, messages] of corpus.sessions) {
    const r = await call(client, 'tmcra_ingest', { session_id, messages });
    lastJob = r.job_id;
  }
  await call(client, 'tmcra_wait_job', { job_id: lastJob, poll_interval_seconds: 0.1 });
  // Earlier jobs finish before the last one; make sure none is left.
  for (let i = 0; i < 600; i += 1) {
    const s = await call(client, 'tmcra_status', {});
    if (s.store?.figures?.jobs_pending === 0) break;
    await new Promise((r) => setTimeout(r, 100));
  }
  const ingestMs = performance.now() - t0;
  const latencies = [];
  let hits = 0;
  for (const q of corpus.questions) {
    const t = performance.now();
    const r = await call(client, 'tmcra_recall', { query: q.question, include_structured_evidence: true });
    latencies.push(performance.now() - t);
    const found = (r.evidence?.windows ?? []).some((w) => w.records.some(
      (rec) => rec.session_id === q.session_id && rec.message_id === q.message_id));
    if (found) hits += 1;
  }
  const rss = vmHwmKiB(transport.pid);
  await client.close();
  return { server: 'tmcra-mcp', ingest_ms: Math.round(ingestMs), recall: summarize(latencies),
           evidence_hit_at_8: hits / corpus.questions.length, peak_rss_kib: rss };
}

async function benchServerMemory(corpus, tmp) {
  const entry = path.join(HERE, 'node_modules', '@modelcontextprotocol', 'server-memory', 'dist',
                          'index.js');
  const env = { ...process.env, MEMORY_FILE_PATH: path.join(tmp, 'memory.jsonl') };
  const { client, transport } = await connect(process.execPath, [entry], env);
  const t0 = performance.now();
  const entities = [...corpus.sessions].map(([name, messages]) => ({
    name, entityType: 'conversation', observations: messages.map((m) => m.content) }));
  for (let i = 0; i < entities.length; i += 100) {
    await call(client, 'create_entities', { entities: entities.slice(i, i + 100) });
  }
  const ingestMs = performance.now() - t0;
  const result = { server: '@modelcontextprotocol/server-memory', ingest_ms: Math.round(ingestMs) };
  for (const [label, queryOf] of [['question', (q) => q.question], ['entity_key', (q) => entityKey(q.question)]]) {
    const latencies = [];
    let hits = 0;
    for (const q of corpus.questions) {
      const t = performance.now();
      const r = await call(client, 'search_nodes', { query: queryOf(q) });
      latencies.push(performance.now() - t);
      if ((r.entities ?? []).slice(0, 8).some((e) => e.name === q.session_id)) hits += 1;
    }
    result[`search_${label}`] = { ...summarize(latencies), evidence_hit_at_8: hits / corpus.questions.length };
  }
  result.peak_rss_kib = vmHwmKiB(transport.pid);
  await client.close();
  return result;
}

const corpus = loadCorpus(corpusFile);
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'tmcra-recall-bench-'));
try {
  const messages = [...corpus.sessions.values()].reduce((n, m) => n + m.length, 0);
  console.error(`corpus: ${messages} messages in ${corpus.sessions.size} sessions, ${corpus.questions.length} questions`);
  const results = [await benchTmcra(corpus, tmp), await benchServerMemory(corpus, tmp)];
  const report = { date: new Date().toISOString(), messages, questions: corpus.questions.length,
                   host: { cpus: os.cpus()[0]?.model, nproc: os.cpus().length, kernel: os.release() },
                   results };
  fs.mkdirSync(outDir, { recursive: true });
  const file = path.join(outDir, `recall-${report.date.replace(/[:.]/g, '-')}.json`);
  fs.writeFileSync(file, JSON.stringify(report, null, 2));
  console.log(JSON.stringify(report, null, 2));
  console.error(`written: ${file}`);
} finally {
  fs.rmSync(tmp, { recursive: true, force: true });
}
