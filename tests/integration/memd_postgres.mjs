#!/usr/bin/env node
// memd_postgres.mjs — tmcra-memd's commands against the suite's real PostgreSQL cluster
// (tests/support/pg_cluster.sh; CTest's fixture `postgres` names it in TMCRA_PG_DIR).
//
//   node tests/integration/memd_postgres.mjs <tmcra-memd>
//
// Keys on a database: made, listed and revoked through --database with the password from
// --database-password-file, PGPASSWORD or a .pgpass file; a password in the setting refused
// without echoing it; a wrong password, a server that is down and a missing database each one
// clear line on stderr and exit 1. Last line: "<N> passed, <M> failed".
import fs from 'node:fs';
import path from 'node:path';

import { Runner, assert, tmpDir, serverEnv, run } from '../peer/lib.mjs';

const BIN = process.argv[2] ? path.resolve(process.argv[2]) : '';
const PG_DIR = process.env.TMCRA_PG_DIR;
if (!BIN || !fs.existsSync(BIN) || !PG_DIR) {
  console.error('usage: TMCRA_PG_DIR=<cluster dir> node memd_postgres.mjs <tmcra-memd binary>');
  console.log('0 passed, 1 failed');
  process.exit(2);
}

const r = new Runner('memd_postgres', { budgetMs: 120_000 });
const TMP = tmpDir('tmcra-memd-pg-');
const CLUSTER = Object.fromEntries(fs.readFileSync(path.join(PG_DIR, 'env'), 'utf8').trim()
  .split('\n').map((line) => line.split('=')));
const PASSWORD_FILE = CLUSTER.TMCRA_PG_PASSWORD_FILE;
const PASSWORD = fs.readFileSync(PASSWORD_FILE, 'utf8').trim();
const ENV = serverEnv();
delete ENV.PGPASSWORD;
delete ENV.PGPASSFILE;
ENV.PGPASSFILE = path.join(TMP, 'no-pgpass');  // never the runner's own ~/.pgpass

/** A fresh database on the cluster for one test: its URI (no password in it). */
async function freshDatabase(label) {
  const name = `memd_${label}_${process.pid}_${Date.now() % 100000}`;
  const res = await run('psql', ['-h', '127.0.0.1', '-p', CLUSTER.TMCRA_PG_PORT, '-U', 'tmcra',
    '-d', 'postgres', '-v', 'ON_ERROR_STOP=1', '-c', `CREATE DATABASE ${name}`],
  { env: { ...ENV, PGPASSWORD: PASSWORD } });
  assert(res.code === 0, `createdb: ${res.stderr}`);
  r.cleanups.push(() => run('psql', ['-h', '127.0.0.1', '-p', CLUSTER.TMCRA_PG_PORT, '-U', 'tmcra',
    '-d', 'postgres', '-c', `DROP DATABASE IF EXISTS ${name} WITH (FORCE)`],
  { env: { ...ENV, PGPASSWORD: PASSWORD } }));
  return `postgresql://tmcra@127.0.0.1:${CLUSTER.TMCRA_PG_PORT}/${name}`;
}

function keys(args, env = ENV) {
  return run(BIN, ['keys', ...args], { env });
}

function stderrLines(res) {
  return res.stderr.split('\n').filter((l) => l.trim() !== '');
}

await r.test('keys made, listed and revoked on a database, the password from each of its sources', async () => {
  const url = await freshDatabase('keys');
  const made = await keys(['create', '--database', url, '--database-password-file', PASSWORD_FILE, '--label', 'a']);
  assert(made.code === 0, made.stderr);
  const token = made.stdout.trim();
  assert(/^tmcra_[0-9a-f]{24}\.[0-9a-f]{64}$/.test(token), token);
  const id = token.slice(6, 30);
  const listed = await keys(['list', '--database', url], { ...ENV, PGPASSWORD: PASSWORD });
  assert(listed.code === 0, listed.stderr);
  const rows = listed.stdout.trim().split('\n').map((l) => JSON.parse(l));
  assert(rows.length === 1 && rows[0].key_id === id && rows[0].label === 'a', listed.stdout);
  assert(!listed.stdout.includes(token.slice(31)), 'the secret is never listed');
  const pgpass = path.join(TMP, 'pgpass');
  fs.writeFileSync(pgpass, `127.0.0.1:${CLUSTER.TMCRA_PG_PORT}:*:tmcra:${PASSWORD}\n`, { mode: 0o600 });
  const revoked = await keys(['revoke', '--database', url, id], { ...ENV, PGPASSFILE: pgpass });
  assert(revoked.code === 0, revoked.stderr);
  const after = await keys(['list', '--database', url, '--database-password-file', PASSWORD_FILE]);
  assert(JSON.parse(after.stdout.trim()).revoked_at !== null, after.stdout);
  for (const res of [made, listed, revoked, after]) {
    assert(!res.stderr.includes(PASSWORD), 'the password never reaches the log');
  }
});

await r.test('a password in --database is refused (exit 2) and never echoed', async () => {
  const res = await keys(['list', '--database', `postgresql://tmcra:s3cr3t-in-argv@127.0.0.1:${CLUSTER.TMCRA_PG_PORT}/postgres`]);
  assert(res.code === 2, `exit ${res.code}`);
  assert(res.stderr.includes('PGPASSWORD') && !res.stderr.includes('s3cr3t-in-argv'), res.stderr);
  const loose = path.join(TMP, 'loose-password');
  fs.writeFileSync(loose, PASSWORD, { mode: 0o644 });
  fs.chmodSync(loose, 0o644);
  const open = await keys(['list', '--database', `postgresql://tmcra@127.0.0.1:${CLUSTER.TMCRA_PG_PORT}/postgres`,
    '--database-password-file', loose]);
  assert(open.code === 2 && open.stderr.includes('chmod 600'), open.stderr);
  const both = await keys(['list', '--database', 'dbname=x', '--data-dir', TMP]);
  assert(both.code === 2 && both.stderr.includes('give one'), both.stderr);
});

await r.test('a wrong password, a server that is down, a missing database: one clear line, exit 1', async () => {
  const base = `postgresql://tmcra@127.0.0.1:${CLUSTER.TMCRA_PG_PORT}`;
  const cases = [
    [['list', '--database', `${base}/postgres`], { ...ENV, PGPASSWORD: 'wrong-password-123' }, 'password authentication failed'],
    [['list', '--database', 'postgresql://tmcra@127.0.0.1:1/postgres'], { ...ENV, PGPASSWORD: PASSWORD }, 'Connection refused'],
    [['list', '--database', `${base}/no_such_database`], { ...ENV, PGPASSWORD: PASSWORD }, 'does not exist'],
  ];
  for (const [args, env, says] of cases) {
    const res = await keys(args, env);
    assert(res.code === 1, `exit ${res.code}: ${res.stderr}`);
    const lines = stderrLines(res);
    assert(lines.length === 1, `one line, got:\n${res.stderr}`);
    assert(lines[0].includes(says) && lines[0].includes('key store'), lines[0]);
    assert(!res.stderr.includes('wrong-password-123'), 'the password is not echoed');
  }
});

await r.finish();
