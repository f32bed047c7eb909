#!/usr/bin/env node
// memd_postgres.mjs — tmcra-memd on SQLite against tmcra-memd on PostgreSQL, one and two
// instances, side by side in one run: ingest throughput and recall latency with 16 concurrent
// clients.
//
//   node bench/memd_postgres.mjs --memd build/bench/memd/tmcra-memd
//                                [--messages 100000] [--clients 16] [--recalls 100] [--out DIR]
//
// A private PostgreSQL 15 cluster is started for the run (tests/support/pg_cluster.sh: its
// defaults plus shared_buffers 128 MB, fsync on) and stopped after. Each configuration starts
// afresh (an empty data directory, or an empty database):
//   sqlite   one memd, --data-dir
//   pg-1     one memd, --database
//   pg-2     two memd on one database, the clients split between them
// Ingest: `--messages` messages (turns of two, 20 turns per ingest/batch request) sent by
// `--clients` clients; "accepted" is messages per second until the last request is answered
// 202, "indexed" until every job has succeeded and every instance's recall counts every record.
// Recall: each client sends `--recalls` recalls (after 5 warm-up each), spread over the
// instances; p50 and p95. Goals (issue "memd on PostgreSQL"): recall p50 on PostgreSQL at most
// 2x SQLite's; ingest at least 1,000 messages/s. This machine has 2 cores, so two instances share
// them with PostgreSQL and the clients: pg-2 shows the cost of a second instance, not scale-out.
// Prints a Markdown table; the figures go to bench/results/memd-postgres-*.json. Never fails on a
// figure.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import https from 'node:https';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

import {
  summarize, f, verdict, describeMachine, sleep, parseFlags, memdTurnItems, MEMD_QUERIES, MEMD_TOPICS,
  MEMD_WORDS,
} from './bench_lib.mjs';
import { makeCertificate, startMemd, stopMemd, request } from '../tests/integration/memd_lib.mjs';

const args = parseFlags();
const here = path.dirname(fileURLToPath(import.meta.url));
const MEMD = path.resolve(args.memd || 'build/bench/memd/tmcra-memd');
const MESSAGES = Number(args.messages || 100000);
const CLIENTS = Number(args.clients || 16);
const RECALLS = Number(args.recalls || 100);
const OUT = path.resolve(args.out || path.join(here, 'results'));
const TURNS_PER_REQUEST = 20;

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'tmcra-pg-bench-'));
fs.chmodSync(tmp, 0o700);
const env = { ...process.env, TMCRA_LOG_LEVEL: 'warn' };
delete env.PGPASSWORD;
const tls = await makeCertificate(tmp);
const clusterDir = `/tmp/tmcra-pg-bench-${process.pid}`;
const clusterScript = path.join(here, '../tests/support/pg_cluster.sh');

function cluster(mode) {
  const res = spawnSync('bash', [clusterScript, mode, clusterDir], { encoding: 'utf8' });
  if (res.status !== 0) throw new Error(`pg_cluster ${mode}: ${res.stderr}`);
}
cluster('start');
const pg = Object.fromEntries(fs.readFileSync(path.join(clusterDir, 'env'), 'utf8').trim().split('\n')
  .map((l) => l.split('=')));
const password = fs.readFileSync(pg.TMCRA_PG_PASSWORD_FILE, 'utf8').trim();

function psql(sql) {
  const res = spawnSync('psql', ['-h', '127.0.0.1', '-p', pg.TMCRA_PG_PORT, '-U', 'tmcra', '-d', 'postgres',
    '-v', 'ON_ERROR_STOP=1', '-At', '-c', sql], { encoding: 'utf8', env: { ...env, PGPASSWORD: password } });
  if (res.status !== 0) throw new Error(`psql: ${res.stderr}`);
  return res.stdout.trim();
}

function keysCreate(storeArgs) {
  const res = spawnSync(MEMD, ['keys', 'create', ...storeArgs], { encoding: 'utf8', env });
  if (res.status !== 0) throw new Error(`keys create: ${res.stderr}`);
  return res.stdout.trim();
}


async function ingest(servers, key) {
  const turns = MESSAGES / 2;
  let next = 0;
  let errors = 0;
  const t0 = Date.now();
  const client = async (c) => {
    for (;;) {
      const first = next;
      next += TURNS_PER_REQUEST;
      if (first >= turns) return;
      const srv = servers[c % servers.length];
      for (;;) {
        const res = await request(srv.port, tls.ca, 'POST', '/v1/scopes/bench/ingest/batch', {
          key, body: { items: memdTurnItems(first, TURNS_PER_REQUEST) }, agent: srv.agent, timeoutMs: 60_000 });
        if (res.status === 202) break;
        errors += 1;
        if (errors > 100) throw new Error(`ingest: ${res.status} ${res.text}`);
        await sleep(100);
      }
    }
  };
  await Promise.all(Array.from({ length: CLIENTS }, (_, c) => client(c)));
  const acceptedMs = Date.now() - t0;
  // Indexed: every instance's recall counts every record.
  for (const srv of servers) {
    for (;;) {
      const res = await request(srv.port, tls.ca, 'POST', '/v1/scopes/bench/recall', {
        key, body: { query: 'readiness probe' }, agent: srv.agent, timeoutMs: 120_000 });
      if (res.status === 200 && res.json.evidence.snapshot.records >= MESSAGES) break;
      await sleep(100);
    }
  }
  return { acceptedMs, indexedMs: Date.now() - t0, errors };
}

async function recall(servers, key) {
  const queries = MEMD_QUERIES;
  const samples = [];
  const client = async (c) => {
    const srv = servers[c % servers.length];
    for (let i = 0; i < RECALLS + 5; i += 1) {
      const res = await request(srv.port, tls.ca, 'POST', '/v1/scopes/bench/recall', {
        key, body: { query: queries[(c + i) % queries.length] }, agent: srv.agent, timeoutMs: 30_000 });
      if (res.status !== 200) throw new Error(`recall: ${res.status} ${res.text}`);
      if (i >= 5) samples.push(res.ms);
    }
  };
  await Promise.all(Array.from({ length: CLIENTS }, (_, c) => client(c)));
  const sorted = [...samples].sort((a, b) => a - b);
  return { ...summarize(samples), p95: sorted[Math.min(sorted.length - 1, Math.ceil(0.95 * sorted.length) - 1)] };
}

async function runConfig(name) {
  let storeArgs;
  if (name === 'sqlite') {
    storeArgs = ['--data-dir', path.join(tmp, `data-${name}`)];
  } else {
    const db = `bench_${name.replace('-', '_')}`;
    psql(`DROP DATABASE IF EXISTS ${db} WITH (FORCE)`);
    psql(`CREATE DATABASE ${db}`);
    storeArgs = ['--database', `postgresql://tmcra@127.0.0.1:${pg.TMCRA_PG_PORT}/${db}`,
      '--database-password-file', pg.TMCRA_PG_PASSWORD_FILE];
  }
  const key = keysCreate(storeArgs);
  const instances = name === 'pg-2' ? 2 : 1;
  const servers = [];
  for (let i = 0; i < instances; i += 1) {
    const extra = name === 'sqlite' ? [] : ['--index-dir', path.join(tmp, `index-${name}-${i}`)];
    const srv = await startMemd(MEMD, [...storeArgs, ...extra, '--tls-cert', tls.cert, '--tls-key', tls.key,
      '--max-concurrency', String(CLIENTS), '--threads', String(CLIENTS)], { env });
    srv.agent = new https.Agent({ keepAlive: true, maxSockets: CLIENTS });
    servers.push(srv);
  }
  process.stderr.write(`[pg-bench] ${name}: ingesting ${MESSAGES} messages\n`);
  const ing = await ingest(servers, key);
  process.stderr.write(`[pg-bench] ${name}: recalls\n`);
  const rec = await recall(servers, key);
  for (const srv of servers) await stopMemd(srv);
  return {
    name, instances,
    accepted_per_s: MESSAGES / (ing.acceptedMs / 1000),
    indexed_per_s: MESSAGES / (ing.indexedMs / 1000),
    ingest_retries: ing.errors,
    recall: rec,
  };
}

// The SQLite configuration's store copied into a database with `tmcra-memd migrate`: its time,
// its verification, and the same recalls from both stores.
async function migrateAndCompare() {
  const dataDir = path.join(tmp, 'data-sqlite');
  psql('DROP DATABASE IF EXISTS bench_migrated WITH (FORCE)');
  psql('CREATE DATABASE bench_migrated');
  const url = `postgresql://tmcra@127.0.0.1:${pg.TMCRA_PG_PORT}/bench_migrated`;
  const storeArgs = ['--database', url, '--database-password-file', pg.TMCRA_PG_PASSWORD_FILE];
  process.stderr.write('[pg-bench] migrate: the sqlite store into PostgreSQL\n');
  const t0 = Date.now();
  const res = spawnSync(MEMD, ['migrate', '--from-data-dir', dataDir, ...storeArgs], { encoding: 'utf8', env });
  const ms = Date.now() - t0;
  if (res.status !== 0) throw new Error(`migrate: ${res.stderr}`);
  const summary = JSON.parse(res.stdout.trim());
  const liteKey = keysCreate(['--data-dir', dataDir]);
  const pgKey = keysCreate(storeArgs);
  const lite = await startMemd(MEMD, ['--data-dir', dataDir, '--tls-cert', tls.cert, '--tls-key', tls.key], { env });
  const moved = await startMemd(MEMD, [...storeArgs, '--index-dir', path.join(tmp, 'index-migrated'),
    '--tls-cert', tls.cert, '--tls-key', tls.key], { env });
  let same = 0;
  const queries = MEMD_TOPICS.map((t, i) => `${t} ${MEMD_WORDS[(i * 3) % MEMD_WORDS.length]}`);
  for (const query of queries) {
    const one = await request(lite.port, tls.ca, 'POST', '/v1/scopes/bench/recall', { key: liteKey, body: { query } });
    const two = await request(moved.port, tls.ca, 'POST', '/v1/scopes/bench/recall', { key: pgKey, body: { query }, timeoutMs: 300_000 });
    if (one.status === 200 && two.status === 200 &&
        one.json.prompt_evidence.content === two.json.prompt_evidence.content &&
        JSON.stringify(one.json.evidence.windows) === JSON.stringify(two.json.evidence.windows)) same += 1;
  }
  await stopMemd(lite);
  await stopMemd(moved);
  return { ms, per_s: summary.records / (ms / 1000), summary, recalls: queries.length, recalls_same: same };
}

const results = [];
let migration = null;
try {
  for (const name of ['sqlite', 'pg-1', 'pg-2']) results.push(await runConfig(name));
  migration = await migrateAndCompare();
} finally {
  cluster('stop');
  fs.rmSync(clusterDir, { recursive: true, force: true });
}

const sqlite = results[0];
const machine = describeMachine(MEMD);
console.log(`\n${machine.nproc} cores, ${machine.cpu_model}, PostgreSQL ${
  spawnSync(path.join(pg.TMCRA_PG_BIN || '/usr/lib/postgresql/15/bin', 'postgres'), ['--version'], { encoding: 'utf8' }).stdout.trim()}`);
console.log(`${MESSAGES} messages, ${CLIENTS} clients, ${RECALLS} recalls each\n`);
console.log('| store | instances | ingest accepted (msg/s) | indexed (msg/s) | recall p50 (ms) | recall p95 (ms) | p50 vs SQLite |');
console.log('| --- | --- | --- | --- | --- | --- | --- |');
for (const r of results) {
  console.log(`| ${r.name} | ${r.instances} | ${f(r.accepted_per_s, 0)} | ${f(r.indexed_per_s, 0)} | ` +
    `${f(r.recall.p50)} | ${f(r.recall.p95)} | ${f(r.recall.p50 / sqlite.recall.p50)}x |`);
}
for (const r of results.slice(1)) {
  console.log(`\n${r.name}: recall p50 ${verdict(r.recall.p50 / sqlite.recall.p50, 2)} (goal <= 2x SQLite); ` +
    `ingest ${verdict(r.indexed_per_s, 1000, false)} (goal >= 1000 msg/s indexed)`);
}
console.log(`\nmigrate: ${migration.summary.records} records in ${f(migration.ms / 1000, 1)} s ` +
  `(${f(migration.per_s, 0)} records/s), ${migration.summary.records_verified} verified; ` +
  `${migration.recalls_same} of ${migration.recalls} recalls the same from both stores`);
fs.mkdirSync(OUT, { recursive: true });
const file = path.join(OUT, `memd-postgres-${new Date().toISOString().replace(/[:.]/g, '-')}.json`);
fs.writeFileSync(file, JSON.stringify({ machine, messages: MESSAGES, clients: CLIENTS, recalls: RECALLS, results, migration }, null, 2));
console.log(`\nfigures: ${file}`);
fs.rmSync(tmp, { recursive: true, force: true });
