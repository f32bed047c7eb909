#!/usr/bin/env node
// memd_mcp.mjs — recall over tmcra-memd's MCP endpoint (/mcp, tmcra_recall) against the same
// recall over its REST API (POST /v1/scopes/{scope}/recall), one memd, in one run.
//
//   node bench/memd_mcp.mjs --memd build/bench/memd/tmcra-memd [--messages 20000]
//                           [--recalls 500] [--out DIR]
//
// One memd (--data-dir, HTTPS with a certificate made for the run) is filled with `--messages`
// messages through ingest/batch and waited for until every job ran. Then one client, over one
// kept-alive TLS connection per path, alternates the two paths for `--recalls` timed rounds
// (after 50 warm-up rounds), with the same ten queries: REST answers the Memory API's recall,
// /mcp answers a tools/call of tmcra_recall in a session (the tool validates the answer as a
// receipt, applies the recall budget and the controls, and serializes the MCP result). Latency
// is from the request's first byte to the answer's last (the client's parse is not counted). Goal (issue "MCP endpoint on
// tmcra-memd"): /mcp p50 at most 1.3x REST's. Prints a Markdown table; the figures go to
// bench/results/memd-mcp-*.json. Never fails on a figure.
import fs from 'node:fs';
import https from 'node:https';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

import {
  summarize, f, verdict, describeMachine, sleep, parseFlags, memdTurnItems, MEMD_QUERIES,
} from './bench_lib.mjs';
import { makeCertificate, startMemd, stopMemd, request } from '../tests/integration/memd_lib.mjs';

const args = parseFlags();
const here = path.dirname(fileURLToPath(import.meta.url));
const MEMD = path.resolve(args.memd || 'build/bench/memd/tmcra-memd');
const MESSAGES = Number(args.messages || 20000);
const RECALLS = Number(args.recalls || 500);
const WARMUP = 50;
const OUT = path.resolve(args.out || path.join(here, 'results'));
const GOAL = 1.3;

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'tmcra-mcp-bench-'));
fs.chmodSync(tmp, 0o700);
const env = { ...process.env, TMCRA_LOG_LEVEL: 'warn' };
const tls = await makeCertificate(tmp);
const dataDir = path.join(tmp, 'data');


/** One request on a kept-alive agent: {status, headers, text, json, ms}, `ms` taken when the
 *  answer's last byte came, before the client parses it. */
function timed(port, method, urlPath, { key, body, headers = {}, agent }) {
  return new Promise((resolve, reject) => {
    const payload = body === undefined ? null : Buffer.from(JSON.stringify(body));
    const h = { ...headers, Authorization: `Bearer ${key}` };
    if (payload) Object.assign(h, { 'Content-Type': 'application/json', 'Content-Length': payload.length });
    const t0 = process.hrtime.bigint();
    const req = https.request({ host: '127.0.0.1', port, method, path: urlPath, headers: h, agent }, (res) => {
      const chunks = [];
      res.on('data', (c) => chunks.push(c));
      res.on('end', () => {
        const ms = Number(process.hrtime.bigint() - t0) / 1e6;
        const text = Buffer.concat(chunks).toString('utf8');
        let json;
        try { json = JSON.parse(text); } catch { json = undefined; }
        resolve({ status: res.statusCode, headers: res.headers, text, json, ms });
      });
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end(payload ?? undefined);
  });
}

async function fill(port, key, agent) {
  for (let first = 0; first < MESSAGES / 2; first += 20) {
    const res = await request(port, tls.ca, 'POST', '/v1/scopes/bench/ingest/batch', {
      key, body: { items: memdTurnItems(first, 20) }, agent, timeoutMs: 60_000 });
    if (res.status !== 202) throw new Error(`ingest: ${res.status} ${res.text}`);
  }
  for (;;) {
    const res = await request(port, tls.ca, 'POST', '/v1/scopes/bench/recall', {
      key, body: { query: 'readiness probe' }, agent, timeoutMs: 120_000 });
    if (res.status === 200 && res.json.evidence.snapshot.records >= MESSAGES) return;
    await sleep(200);
  }
}

async function mcpSession(port, key, agent) {
  const init = await request(port, tls.ca, 'POST', '/mcp', { key, agent,
    headers: { Accept: 'application/json, text/event-stream' },
    body: { jsonrpc: '2.0', id: 0, method: 'initialize',
      params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'bench', version: '0' } } } });
  if (init.status !== 200) throw new Error(`initialize: ${init.status} ${init.text}`);
  return init.headers['mcp-session-id'];
}

async function main() {
  const keyRes = await import('node:child_process').then(({ spawnSync }) =>
    spawnSync(MEMD, ['keys', 'create', '--data-dir', dataDir], { encoding: 'utf8', env }));
  if (keyRes.status !== 0) throw new Error(`keys create: ${keyRes.stderr}`);
  const key = keyRes.stdout.trim();
  const srv = await startMemd(MEMD, ['--data-dir', dataDir, '--listen', '127.0.0.1:0',
    '--tls-cert', tls.cert, '--tls-key', tls.key], { env });
  const restAgent = new https.Agent({ keepAlive: true, maxSockets: 1, ca: tls.ca });
  const mcpAgent = new https.Agent({ keepAlive: true, maxSockets: 1, ca: tls.ca });
  const t0 = Date.now();
  await fill(srv.port, key, restAgent);
  const fillMs = Date.now() - t0;
  const session = await mcpSession(srv.port, key, mcpAgent);
  const samples = { rest: [], mcp: [] };
  let bytes = { rest: 0, mcp: 0 };
  for (let i = 0; i < WARMUP + RECALLS; i += 1) {
    const query = MEMD_QUERIES[i % MEMD_QUERIES.length];
    const rest = await timed(srv.port, 'POST', '/v1/scopes/bench/recall', {
      key, agent: restAgent, body: { query, evidence_mode: 'auto', max_windows: 8, response_projection: 'prompt_only' } });
    const mcp = await timed(srv.port, 'POST', '/mcp', { key, agent: mcpAgent,
      headers: { Accept: 'application/json, text/event-stream', 'Mcp-Session-Id': session,
        'MCP-Protocol-Version': '2025-11-25' },
      body: { jsonrpc: '2.0', id: i + 1, method: 'tools/call',
        params: { name: 'tmcra_recall', arguments: { scope: 'bench', session_id: 'bench', query } } } });
    if (rest.status !== 200) throw new Error(`rest recall: ${rest.status} ${rest.text}`);
    if (mcp.status !== 200 || mcp.json?.result?.isError) throw new Error(`mcp recall: ${mcp.status} ${mcp.text.slice(0, 500)}`);
    if (i < WARMUP) continue;
    samples.rest.push(rest.ms);
    samples.mcp.push(mcp.ms);
    bytes = { rest: bytes.rest + rest.text.length, mcp: bytes.mcp + mcp.text.length };
  }
  await stopMemd(srv);
  restAgent.destroy();
  mcpAgent.destroy();
  const rest = summarize(samples.rest);
  const mcp = summarize(samples.mcp);
  const ratio = mcp.p50 / rest.p50;
  const result = {
    bench: 'memd-mcp', at: new Date().toISOString(), machine: describeMachine(MEMD),
    messages: MESSAGES, recalls: RECALLS, warmup: WARMUP, fill_ms: fillMs,
    rest: { ...rest, mean_bytes: Math.round(bytes.rest / RECALLS) },
    mcp: { ...mcp, mean_bytes: Math.round(bytes.mcp / RECALLS) },
    ratio_p50: ratio, goal: GOAL, verdict: verdict(ratio, GOAL),
  };
  fs.mkdirSync(OUT, { recursive: true });
  const file = path.join(OUT, `memd-mcp-${result.at.replace(/[:.]/g, '-')}.json`);
  fs.writeFileSync(file, `${JSON.stringify(result, null, 2)}\n`);
  console.log(`| recall over | p50 ms | p90 ms | p99 ms | answer bytes |`);
  console.log(`| --- | --- | --- | --- | --- |`);
  console.log(`| REST \`POST /v1/scopes/bench/recall\` | ${f(rest.p50)} | ${f(rest.p90)} | ${f(rest.p99)} | ${result.rest.mean_bytes} |`);
  console.log(`| MCP \`tools/call tmcra_recall\` at /mcp | ${f(mcp.p50)} | ${f(mcp.p90)} | ${f(mcp.p99)} | ${result.mcp.mean_bytes} |`);
  console.log(`\n/mcp p50 / REST p50 = ${f(ratio)} (goal <= ${GOAL}: ${result.verdict}); ${MESSAGES} messages, ${RECALLS} recalls each; ${file}`);
}

main().catch((e) => { console.error(e); process.exit(1); });
