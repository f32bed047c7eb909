#!/usr/bin/env node
// content_filter_e2e.mjs — the content filter (filter/content_filter.h) end to end through the
// real tmcra-mcp, embedded and against a real tmcra-memd over HTTPS, driven by the official SDK
// v1 client (@modelcontextprotocol/sdk), every tmcra-mcp behind the stdout tap.
//
//   node content_filter_e2e.mjs <tmcra-mcp> <tmcra-mcp-testserver>   (TMCRA_MEMD, TMCRA_STORE_CHECK set)
//
// Every secret is generated at this run from its format (nothing realistic is committed). Proved:
//   1. prepare + commit and tmcra_ingest with planted secrets and <private> spans store the text
//      redacted ("[REDACTED:<kind>]", recalled back) and without the private spans; a raw-byte
//      sweep of every file under each tmcra-mcp's HOME (memory.db, outbox, their -wal/-shm,
//      controls), memd's data directory, both processes' stderr (log level trace) and every
//      tool answer finds neither a secret, nor any 16 characters of its random part, nor a
//      private marker: while the processes run (WAL not checkpointed) and after a clean stop.
//      tmcra-memd also redacts on its own (a client with TMCRA_REDACT_SECRETS=off).
//   2. look-alikes (git SHAs, UUIDs, sha256, file paths, `password = get_password()`, ...) are
//      stored and recalled verbatim, with an empty `content_filter.redacted`.
//   3. recall -> inject -> commit, 10 rounds: each answer quotes the marked injected context (and
//      in some rounds the unmarked prompt_evidence copy, or a JSON-escaped copy) after Claude
//      Code's "UserPromptSubmit hook additional context: " prefix, plus one new fact. The store
//      grows by exactly 2 records a round, each fact is in exactly one record, and neither the
//      raw memory.db/-wal nor any recalled record holds an envelope header or marker.
//   4. SIGKILL in the middle of a commit of redacted text (failpoints at each step when the
//      build has them, and timed kills): after a restart, tmcra_reconcile and the host's retry,
//      the turn is stored exactly once, redacted; the same against tmcra-memd.
//   5. receipts' `content_filter` name the kinds with their counts; tmcra_status's tally is the
//      sum of the process's receipts; no answer carries a secret.
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';

import {
  Runner, assert, parseBins, requireNodeModules, connectV1, assertAllStdoutPure, textOf, tmpDir,
  serverEnv, sleep, withTimeout,
} from './lib.mjs';
import { makeCerts, createKey, startMemd, storeCheck, remoteEnv } from './remote_lib.mjs';

const NAME = 'content_filter_e2e.mjs';
requireNodeModules(NAME, ['@modelcontextprotocol/sdk']);
const bins = parseBins(NAME);
const r = new Runner(NAME, { budgetMs: 90_000 });
const LOG_LEVEL = 'trace';  // the most a process logs: none of it may hold a secret

const logs = [];      // tap stdout logs (what the servers answered)
const sessions = [];
const memds = [];
const answers = [];   // every tool answer's text
r.onCleanup(async () => {
  for (const s of sessions) await s.closeQuietly();
  for (const m of memds) await m.stop('SIGKILL');
});
const summary = [];
const note = (line) => { summary.push(line); console.log(`# ${line}`); };

// ---------------------------------------------------------------------------
// Secrets made at test time from their formats
// ---------------------------------------------------------------------------
const ALNUM = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789';
const pick = (alphabet, n) => Array.from(crypto.randomBytes(n), (b) => alphabet[b % alphabet.length]).join('');
const hex = (bytes = 6) => crypto.randomBytes(bytes).toString('hex');
const lower = (n) => pick('abcdefghijklmnopqrstuvwxyz', n);
const digits = (n) => pick('0123456789', n);
// Letters and digits both (what a real key has; the filter asks for it), starting with a
// lower-case letter so that no other format's prefix can start it.
const alnum = (n) => `${lower(1)}${pick(ALNUM, n - 3)}${digits(1)}${pick('ABCDEFGHIJKLMNOPQRSTUVWXYZ', 1)}`;
const b64url = (bytes) => crypto.randomBytes(bytes).toString('base64url');

/** One secret: its kind as the filter names it, its text, and the parts of it that are random. */
const secret = (kind, text, random = [text]) => ({ kind, text, random });

const MAKERS = {
  github_token: () => { const t = `ghp_${alnum(36)}`; return secret('github_token', t, [t.slice(4)]); },
  aws_access_key_id: () => {
    const body = pick('ABCDEFGHIJKLMNOPQRSTUVWXYZ234567', 16);
    return secret('aws_access_key_id', `AKIA${body}`, [body]);
  },
  anthropic_api_key: () => {
    const body = `${b64url(60)}${digits(2)}AA`;
    return secret('anthropic_api_key', `sk-ant-api03-${body}`, [body]);
  },
  url_password: () => {
    const pw = alnum(24);
    return { ...secret('url_password', pw), context: `postgres://app_user:${pw}@db-${hex(3)}.internal:5432/orders` };
  },
  password_assignment: () => {
    const pw = alnum(24);
    return { ...secret('password_assignment', pw), context: `password=${pw}` };
  },
  jwt: () => {
    const seg = (o) => Buffer.from(JSON.stringify(o)).toString('base64url');
    const sig = b64url(32);
    const t = `${seg({ alg: 'HS256', typ: 'JWT' })}.${seg({ sub: hex(8), n: b64url(12), iat: 1700000000 })}.${sig}`;
    return secret('jwt', t, t.split('.').slice(1));  // the header is the same in every HS256 JWT
  },
  private_key: () => {
    const lines = crypto.randomBytes(48 * 8).toString('base64').match(/.{1,64}/g);
    return secret('private_key', `-----BEGIN PRIVATE KEY-----\n${lines.join('\n')}\n-----END PRIVATE KEY-----`, lines);
  },
  slack_token: () => {
    const body = `${digits(12)}-${digits(13)}-${alnum(24)}`;
    return secret('slack_token', `xoxb-${body}`, [body]);
  },
  authorization_header: () => {
    const cred = alnum(40);
    return { ...secret('authorization_header', cred), context: `Authorization: Bearer ${cred}` };
  },
};

/** The secrets of `kinds`, freshly made. `in` is how each appears in a message. */
function makeSecrets(kinds) {
  return kinds.map((k) => { const s = MAKERS[k](); return { ...s, in: s.context ?? s.text }; });
}

/** A private span around a unique marker; the marker must never be stored. */
function makePrivate() {
  const marker = `pv${hex(8)}`;
  return { marker, span: `<private>the door code note ${marker} stays between us</private>` };
}

/** {kind: n} of a list of secrets. */
function kindCounts(list) {
  const out = {};
  for (const s of list) out[s.kind] = (out[s.kind] ?? 0) + 1;
  return out;
}

// ---------------------------------------------------------------------------
// The sweep: raw bytes of files and texts, case-insensitive, for whole secrets, any 16
// characters of a random part, and private markers
// ---------------------------------------------------------------------------
const WINDOW = 16;

class Canaries {
  constructor() { this.whole = []; this.windows = new Map(); }

  addSecret(s, label) {
    this.byHash = null;  // rebuilt at the next scan
    this.whole.push({ needle: s.text.toLowerCase(), label: `${label} ${s.kind}` });
    for (const part of s.random) {
      const p = part.toLowerCase();
      for (let i = 0; i + WINDOW <= p.length; i += 1) this.windows.set(p.slice(i, i + WINDOW), `${label} ${s.kind}`);
    }
  }

  addMarker(marker, label) { this.whole.push({ needle: marker.toLowerCase(), label }); }

  /** Where any canary is in `buf` (a Buffer): a list of findings. */
  scan(where, buf) {
    const text = buf.toString('latin1').toLowerCase();
    const hits = [];
    for (const { needle, label } of this.whole) {
      const at = text.indexOf(needle);
      if (at !== -1) hits.push(`${where}: ${label} (whole) at ${at}`);
    }
    // 16-character windows: a rolling hash over the text, checked against every window.
    const M = 0x01000193;
    const hashOf = (s) => { let h = 0; for (let i = 0; i < s.length; i += 1) h = (Math.imul(h, M) + s.charCodeAt(i)) | 0; return h; };
    if (!this.byHash) {
      this.byHash = new Map();
      for (const w of this.windows.keys()) {
        const h = hashOf(w);
        if (!this.byHash.has(h)) this.byHash.set(h, []);
        this.byHash.get(h).push(w);
      }
      let pow = 1;
      for (let i = 0; i < WINDOW - 1; i += 1) pow = Math.imul(pow, M);
      this.pow = pow;
    }
    let h = 0;
    for (let i = 0; i < text.length; i += 1) {
      if (i >= WINDOW) h = (h - Math.imul(text.charCodeAt(i - WINDOW), this.pow)) | 0;
      h = (Math.imul(h, M) + text.charCodeAt(i)) | 0;
      if (i + 1 < WINDOW) continue;
      const cands = this.byHash.get(h);
      if (!cands) continue;
      const w = text.slice(i + 1 - WINDOW, i + 1);
      if (cands.includes(w)) {
        hits.push(`${where}: 16 characters of ${this.windows.get(w)} at ${i + 1 - WINDOW} (${JSON.stringify(text.slice(Math.max(0, i - 40), i + 24))})`);
        if (hits.length > 20) break;
      }
    }
    return hits;
  }

  /** Every file under `dirs` (recursively), `files`, and `texts`: the findings and what was read. */
  sweep({ dirs = [], files = [], texts = [] }) {
    const hits = [];
    const read = [];
    const walk = (p) => {
      let st;
      try { st = fs.lstatSync(p); } catch { return; }
      if (st.isDirectory()) { for (const e of fs.readdirSync(p)) walk(path.join(p, e)); return; }
      if (!st.isFile()) return;
      let buf;
      try { buf = fs.readFileSync(p); } catch { return; }  // removed meanwhile (a -shm at close)
      read.push(`${path.basename(p)}:${buf.length}`);
      hits.push(...this.scan(p, buf));
    };
    for (const d of dirs) walk(d);
    for (const f of files) walk(f);
    texts.forEach(([label, t]) => hits.push(...this.scan(label, Buffer.from(String(t)))));
    return { hits, read };
  }
}

// ---------------------------------------------------------------------------
// Processes and calls
// ---------------------------------------------------------------------------
/** An environment whose HOME, XDG dirs and data dir are all under tmp/<name> (swept whole). */
function isolatedEnv(name, extra = {}) {
  const home = path.join(tmpDir(), name);
  fs.mkdirSync(home, { recursive: true });
  return {
    home,
    env: serverEnv({
      HOME: home,
      XDG_DATA_HOME: path.join(home, '.local', 'share'),
      XDG_CONFIG_HOME: path.join(home, '.config'),
      XDG_STATE_HOME: path.join(home, '.local', 'state'),
      XDG_CACHE_HOME: path.join(home, '.cache'),
      TMCRA_DATA_DIR: path.join(home, 'data'),
      TMCRA_LOG_LEVEL: LOG_LEVEL,
      ...extra,
    }),
  };
}

/** The HOME and XDG variables of an isolated env (to lay over remoteEnv's). */
function pickHomeVars(env) {
  const out = {};
  for (const k of ['HOME', 'XDG_DATA_HOME', 'XDG_CONFIG_HOME', 'XDG_STATE_HOME', 'XDG_CACHE_HOME', 'TMCRA_DATA_DIR', 'TMCRA_LOG_LEVEL']) out[k] = env[k];
  return out;
}

async function connect(label, env) {
  const s = await connectV1({ bin: bins.server, label, env });
  logs.push(s.logPath);
  sessions.push(s);
  return s;
}

/** A tool call that must succeed; its answer text is kept for the sweep. */
async function call(s, name, args, what = name) {
  const res = await s.call({ name, arguments: args }, { timeout: 20_000 });
  answers.push(textOf(res));
  assert.notEqual(res.isError, true, `${what}: isError: ${textOf(res)}`);
  return res.structuredContent ?? JSON.parse(textOf(res));
}

/** The records of a recall (include_structured_evidence). */
async function recallRecords(s, query, extra = {}) {
  const rc = await call(s, 'tmcra_recall', { query, include_structured_evidence: true, ...extra }, `recall "${query.slice(0, 40)}"`);
  return { rc, records: (rc.evidence?.windows ?? []).flatMap((w) => w.records ?? []) };
}

const EMPTY_FILTER = { redacted: {}, private_spans: 0, recalled_blocks: 0, dropped_messages: 0 };

/** Adds receipt `b`'s content_filter into tally `a`. */
function addFilter(a, b) {
  for (const [k, n] of Object.entries(b.redacted)) a.redacted[k] = (a.redacted[k] ?? 0) + n;
  for (const k of ['private_spans', 'recalled_blocks', 'dropped_messages']) a[k] += b[k];
}

/** Sum of a process's receipts' content_filter, to compare with its tmcra_status tally. */
const newTally = () => structuredClone(EMPTY_FILTER);

// ---------------------------------------------------------------------------
// One planted write set: prepare + commit (secrets and a private span in each) and an ingest
// (secrets, a private span, and a message that is all private)
// ---------------------------------------------------------------------------
function plantedWrites(tag) {
  const m = `${tag}${hex(5)}`;
  const w = {
    marker: m,
    session: `s-${m}`,
    userSecrets: makeSecrets(['github_token', 'url_password']),
    assistantSecrets: makeSecrets(['anthropic_api_key', 'jwt', 'private_key']),
    ingestSecrets: makeSecrets(['aws_access_key_id', 'password_assignment', 'slack_token', 'authorization_header']),
    privates: [makePrivate(), makePrivate(), makePrivate(), makePrivate()],
  };
  const [pu, pa, pi, pall] = w.privates;
  w.user = `Deploy note ${m}: the staging token is ${w.userSecrets[0].in} and the database is ` +
    `${w.userSecrets[1].in} ${pu.span} please keep both handy.`;
  w.assistant = `Understood ${m}. I set ANTHROPIC_API_KEY to ${w.assistantSecrets[0].in} and the ` +
    `session cookie is ${w.assistantSecrets[1].in} ${pa.span}\nThe signing key:\n${w.assistantSecrets[2].in}\nDone.`;
  w.ingest = [
    `Ingested config ${m}:\naws_access_key_id ${w.ingestSecrets[0].in} for the uploader\n${w.ingestSecrets[1].in}\n` +
      `slack bot ${w.ingestSecrets[2].in} ${pi.span}\n${w.ingestSecrets[3].in}\nend of config ${m}`,
    pall.span,  // all private: not stored at all
  ];
  w.all = [...w.userSecrets, ...w.assistantSecrets, ...w.ingestSecrets];
  return w;
}

/** Runs a planted write set on `s`; checks the receipts; returns them (for the tally). */
async function runPlanted(s, w, { remote = false } = {}) {
  const prep = await call(s, 'tmcra_turn_prepare', {
    turn_id: `t-${w.marker}`, session_id: w.session, user_message_id: `u-${w.marker}`, user_content: w.user,
  });
  assert.equal(prep.status, 'prepared', JSON.stringify(prep).slice(0, 300));
  assert.deepEqual(prep.content_filter, { ...EMPTY_FILTER, redacted: kindCounts(w.userSecrets), private_spans: 1 },
    'prepare receipt: content_filter');
  const commit = await call(s, 'tmcra_turn_commit', {
    turn_id: `t-${w.marker}`, assistant_message_id: `a-${w.marker}`, assistant_content: w.assistant,
  });
  assert.equal(commit.status, 'succeeded', `commit: ${JSON.stringify(commit).slice(0, 400)}`);
  assert.deepEqual(commit.content_filter, { ...EMPTY_FILTER, redacted: kindCounts(w.assistantSecrets), private_spans: 1 },
    'commit receipt: content_filter');
  const ingest = await call(s, 'tmcra_ingest', {
    session_id: w.session,
    consistency: 'read_your_writes',
    messages: [
      { message_id: `i1-${w.marker}`, role: 'user', content: w.ingest[0] },
      { message_id: `i2-${w.marker}`, role: 'assistant', content: w.ingest[1] },
    ],
  });
  assert.deepEqual(ingest.content_filter,
    { ...EMPTY_FILTER, redacted: kindCounts(w.ingestSecrets), private_spans: 2, dropped_messages: 1 },
    `ingest receipt: content_filter: ${JSON.stringify(ingest).slice(0, 400)}`);
  if (!remote && ingest.job_id) {
    await call(s, 'tmcra_wait_job', { job_id: ingest.job_id, timeout_seconds: 20, poll_interval_seconds: 0.1 });
  } else {
    const rec = await call(s, 'tmcra_reconcile', {});
    assert.equal(rec.queue_counts.pending + rec.queue_counts.submitted, 0, `delivered: ${JSON.stringify(rec.queue_counts)}`);
  }
  return [prep, commit, ingest];
}

/** The stored texts of a planted set are there, redacted by kind, private spans gone. */
async function assertPlantedStored(s, w) {
  const { records } = await recallRecords(s, `Deploy note config ${w.marker}`, { session_id: w.session });
  const byId = Object.fromEntries(records.map((x) => [x.message_id, x.text]));
  const expectRedacted = { [`u-${w.marker}`]: w.userSecrets, [`a-${w.marker}`]: w.assistantSecrets, [`i1-${w.marker}`]: w.ingestSecrets };
  for (const [id, list] of Object.entries(expectRedacted)) {
    const text = byId[id];
    assert.equal(typeof text, 'string', `${id} is recalled: ${JSON.stringify(Object.keys(byId))}`);
    for (const sec of list) assert.ok(text.includes(`[REDACTED:${sec.kind}]`), `${id} holds [REDACTED:${sec.kind}]: ${JSON.stringify(text)}`);
    assert.ok(text.includes(w.marker), `${id} keeps the rest of its text`);
    assert.ok(!/<\/?private>/i.test(text), `${id}: the private tags are gone: ${JSON.stringify(text)}`);
  }
  assert.ok(!(`i2-${w.marker}` in byId), 'the all-private message is not stored');
}

// ---------------------------------------------------------------------------
// Look-alikes: not secrets, stored verbatim
// ---------------------------------------------------------------------------
function lookAlikes() {
  const m = `la${hex(5)}`;
  const sha1 = hex(20);
  const sha256 = crypto.createHash('sha256').update(hex(16)).digest('hex');
  const uuid = crypto.randomUUID();
  return {
    marker: m,
    texts: [
      `Look-alike ${m}: fixed in commit ${sha1} (short ${sha1.slice(0, 7)}), request id ${uuid}.`,
      `Look-alike ${m}: the artifact sha256: ${sha256} lives at /home/dev/project-${m}/build/out/app.tar.gz ` +
        `and C:\\Users\\dev\\AppData\\Local\\${m}\\cache.db`,
      `Look-alike ${m} code:\n    password = get_password()\n    token: str = os.environ["API_KEY"]\n` +
        `    cache_key = "${hex(16)}"\n    uuid = "${crypto.randomUUID()}"\n    $PASSWORD <your-api-key>`,
    ],
  };
}

// ---------------------------------------------------------------------------
// Envelope copies: what must never be stored again
// ---------------------------------------------------------------------------
const PREFIX = 'UserPromptSubmit hook additional context: ';  // Claude Code's, before a hook's context
const ENVELOPE = ['[TMCRA authority policy', '[TMCRA actor section', '[Immutable source window',
  '[Immutable neighboring source', '[[tmcra:recalled-memory]]', '[[/tmcra:recalled-memory]]'];

/** Envelope strings found in the raw bytes of the memory store files of `dataDir`. */
function envelopeInStore(dataDir) {
  const found = [];
  for (const f of fs.readdirSync(dataDir)) {
    if (!f.startsWith('memory.db')) continue;
    let buf;
    try { buf = fs.readFileSync(path.join(dataDir, f)); } catch { continue; }
    for (const e of ENVELOPE) if (buf.includes(e)) found.push(`${f}: ${e}`);
  }
  return found;
}

// Point 3 on session `s` whose memory store is in `dataDir`: 10 rounds of recall, inject,
// commit of an answer that quotes the injected context; receipts summed into `tally`.
async function injectRounds(s, dataDir, tally, label) {
  const records = async () => storeCheck(dataDir).records;
  const before = await records();
  const topic = `orbit${hex(4)}`;
  const session = `loop-${topic}`;
  const facts = [];
  let injectedRounds = 0;
  let unmarkedRounds = 0;
  let pastedRounds = 0;
  let lastIc = '';
  for (let k = 1; k <= 10; k += 1) {
    const turn = `${topic}-${k}`;
    // In rounds 4 and 8 the user pastes the previous round's injected context too.
    const paste = k % 4 === 0 && lastIc ? `\n${lastIc}` : '';
    const prep = await call(s, 'tmcra_turn_prepare', {
      turn_id: `t-${turn}`, session_id: session, user_message_id: `u-${turn}`,
      user_content: `Round ${k}: what do we know about the ${topic} migration plan so far?${paste}`,
    });
    addFilter(tally, prep.content_filter);
    if (paste) {
      assert.equal(prep.content_filter.recalled_blocks, 1, `round ${k}: the pasted block is dropped: ${JSON.stringify(prep.content_filter)}`);
      pastedRounds += 1;
    }
    const ic = prep.injectable_context.content;
    lastIc = ic;
    const pe = prep.recall.prompt_evidence?.content ?? '';
    if (k > 1) {
      assert.ok(ic.startsWith('[[tmcra:recalled-memory]]\n') && ic.endsWith('[[/tmcra:recalled-memory]]'),
        `round ${k}: the injected context is marked: ${JSON.stringify(ic.slice(0, 200))}`);
      assert.ok(facts.some((f) => ic.includes(f)), `round ${k}: earlier memory is recalled: ${JSON.stringify(ic.slice(0, 600))}`);
      injectedRounds += 1;
    }
    const fact = `fact${k}x${hex(4)}`;
    facts.push(fact);
    const sentence = `Round ${k} fact: the ${topic} migration step ${k} is ${fact}.`;
    // (The filter drops a marked block with the line break after it.)
    let answer = `${PREFIX}${ic}${ic ? '\n' : ''}`;
    if (k % 3 === 0 && pe) { answer += `${pe}\n\n`; unmarkedRounds += 1; }
    if (k % 5 === 0 && pe) { answer += `${JSON.stringify({ prompt_evidence: pe })}\n\n`; unmarkedRounds += 1; }
    answer += sentence;
    const commit = await call(s, 'tmcra_turn_commit', { turn_id: `t-${turn}`, assistant_message_id: `a-${turn}`, assistant_content: answer });
    assert.equal(commit.status, 'succeeded', `round ${k}: ${JSON.stringify(commit).slice(0, 300)}`);
    addFilter(tally, commit.content_filter);
    if (k > 1) assert.ok(commit.content_filter.recalled_blocks >= 1, `round ${k}: recalled blocks counted: ${JSON.stringify(commit.content_filter)}`);
    assert.equal(await records(), before + 2 * k, `round ${k}: records grow by 2 a round`);
  }
  const check = storeCheck(dataDir);
  for (let k = 1; k <= 10; k += 1) {
    for (const id of [`u-${topic}-${k}`, `a-${topic}-${k}`]) assert.equal(check.message_counts[id], 1, `${id} stored once`);
  }
  // Each fact is in exactly one record (its own round's answer), and no record holds an
  // envelope header or marker.
  for (const [i, fact] of facts.entries()) {
    const { records: recs } = await recallRecords(s, fact, { session_id: session });
    const holding = recs.filter((x) => x.text.includes(fact));
    assert.deepEqual(holding.map((x) => x.message_id), [`a-${topic}-${i + 1}`], `${fact} is in exactly one record`);
    // The answer kept its prefix and new sentence; of a JSON-escaped quote only the JSON
    // around it may stay ({"prompt_evidence":").
    const stored = holding[0].text;
    const sentence = `Round ${i + 1} fact: the ${topic} migration step ${i + 1} is ${fact}.`;
    assert.ok(stored.startsWith(PREFIX) && stored.endsWith(sentence) && stored.length <= PREFIX.length + sentence.length + 24,
      `the stored answer is the prefix and the new sentence only: ${JSON.stringify(stored)}`);
    for (const x of recs) for (const e of ENVELOPE) assert.ok(!x.text.includes(e), `${x.message_id} holds ${e}: ${JSON.stringify(x.text.slice(0, 300))}`);
  }
  assert.deepEqual(envelopeInStore(dataDir), [], 'memory.db/-wal raw bytes hold an envelope block');
  note(`3. ${label}: 10 rounds (${injectedRounds} with marked context, ${unmarkedRounds} unmarked/JSON-escaped copies, ${pastedRounds} pasted by the user): records ${before} -> ${before + 20}, each fact once, no envelope in memory.db/-wal or recall`);
}

// ===========================================================================
// Setup: a tmcra-memd over HTTPS
// ===========================================================================
const certs = makeCerts();
const memdData = path.join(tmpDir(), 'memd-data');
let key;
let memd;
await r.test('setup: tmcra-memd over HTTPS (log level trace)', async () => {
  key = createKey(memdData);
  memd = await startMemd({ dataDir: memdData, certs, env: { TMCRA_LOG_LEVEL: LOG_LEVEL } });
  memds.push(memd);
});

const canaries = new Canaries();
const queryCanaries = new Canaries();  // swept in files and stderr only (see below)
const embedded = isolatedEnv('embedded');
const embeddedData = embedded.env.TMCRA_DATA_DIR;
const eTally = newTally();   // the embedded process's receipts, summed
let eDroppedAtCommit = 0;    // of which messages dropped by tmcra_turn_commit
let E;

// ===========================================================================
// 1 + 5, embedded
// ===========================================================================
const wE = plantedWrites('emb');
wE.all.forEach((s) => canaries.addSecret(s, 'embedded'));
wE.privates.forEach((p) => canaries.addMarker(p.marker, 'embedded private marker'));

await r.test('[embedded] prepare/commit/ingest with planted secrets and private spans: receipts name the kinds', async () => {
  E = await connect('embedded', embedded.env);
  for (const rc of await runPlanted(E, wE)) addFilter(eTally, rc.content_filter);
});

if (E) {
  await r.test('[embedded] the stored texts are redacted by kind and without the private spans', async () => {
    await assertPlantedStored(E, wE);
  });

  await r.test('[embedded] a recall whose query holds a secret stores nothing of it (files and stderr)', async () => {
    // tmcra_recall's query is not filtered (docs/privacy.md) and its answer echoes it back to
    // the caller (task_handoff.query), so only files and logs are swept for it.
    const q = makeSecrets(['github_token'])[0];
    queryCanaries.addSecret(q, 'recall query');
    await call(E, 'tmcra_recall', { query: `what was the token ${q.in} for?`, session_id: wE.session });
  });

  // =========================================================================
  // 2. Look-alikes
  // =========================================================================
  await r.test('[embedded] look-alikes (SHA, UUID, sha256, paths, code) are stored and recalled verbatim', async () => {
    const la = lookAlikes();
    const rc = await call(E, 'tmcra_ingest', {
      session_id: `s-${la.marker}`, consistency: 'read_your_writes',
      messages: la.texts.map((t, i) => ({ message_id: `la${i}-${la.marker}`, role: i % 2 ? 'assistant' : 'user', content: t })),
    });
    assert.deepEqual(rc.content_filter, EMPTY_FILTER, 'nothing is filtered from look-alikes');
    addFilter(eTally, rc.content_filter);
    if (rc.job_id) await call(E, 'tmcra_wait_job', { job_id: rc.job_id, timeout_seconds: 20, poll_interval_seconds: 0.1 });
    const { rc: recall, records } = await recallRecords(E, `Look-alike ${la.marker} commit artifact code`, { session_id: `s-${la.marker}` });
    for (const t of la.texts) {
      assert.ok(records.some((x) => x.text === t), `recalled verbatim: ${JSON.stringify(t)}\nrecords: ${JSON.stringify(records.map((x) => x.text))}`);
      assert.ok(recall.prompt_evidence.content.includes(t.split('\n')[0]), 'in prompt_evidence too');
    }
    note(`2. look-alikes: ${la.texts.length} texts with git SHA, UUID, sha256, paths and code recalled verbatim, content_filter empty`);
  });

  // =========================================================================
  // 3. Recall -> inject -> commit, 10 rounds
  // =========================================================================
  await r.test('[embedded] 10 rounds of recall -> inject -> commit: +2 records a round, no envelope stored', async () => {
    await injectRounds(E, embeddedData, eTally, 'embedded');
  }, { timeoutMs: 40_000 });

  await r.test('[embedded] a turn whose user message is all private stores only the answer', async () => {
    const m = `ap${hex(5)}`;
    const p = makePrivate();
    canaries.addMarker(p.marker, 'all-private user message');
    const prep = await call(E, 'tmcra_turn_prepare', { turn_id: `t-${m}`, session_id: `s-${m}`, user_message_id: `u-${m}`, user_content: p.span });
    assert.deepEqual(prep.content_filter, { ...EMPTY_FILTER, private_spans: 1 }, 'prepare receipt');
    assert.equal(prep.injectable_context.content, '', 'nothing is recalled for an all-private message');
    const commit = await call(E, 'tmcra_turn_commit', { turn_id: `t-${m}`, assistant_message_id: `a-${m}`, assistant_content: `Answer ${m} without the private part.` });
    assert.equal(commit.status, 'succeeded', JSON.stringify(commit).slice(0, 300));
    assert.deepEqual(commit.content_filter, { ...EMPTY_FILTER, dropped_messages: 1 }, 'commit receipt counts the dropped user message');
    addFilter(eTally, prep.content_filter);
    addFilter(eTally, commit.content_filter);
    eDroppedAtCommit += commit.content_filter.dropped_messages;
    const counts = storeCheck(embeddedData).message_counts;
    assert.equal(counts[`u-${m}`], undefined, 'the all-private user message is not stored');
    assert.equal(counts[`a-${m}`], 1, 'the answer is stored once');
  });

  await r.test('[embedded] tmcra_status: the content_filter tally is the sum of the receipts, counts only', async () => {
    const st = await call(E, 'tmcra_status', {});
    assert.deepEqual(st.content_filter, eTally, 'status tally');
    note(`5. embedded receipts name the kinds; status tally ${JSON.stringify(st.content_filter.redacted)} = sum of receipts (dropped messages ${eTally.dropped_messages}, ${eDroppedAtCommit} of them by commits)`);
  });

  await r.test('[embedded] sweep while running: no secret or private marker in any file, stderr or answer', async () => {
    const { hits, read } = canaries.sweep({ dirs: [embedded.home], texts: [['embedded stderr', E.stderr()], ...answers.map((a, i) => [`answer #${i}`, a])] });
    assert.deepEqual(hits, [], 'canaries found');
    assert.deepEqual(queryCanaries.sweep({ dirs: [embedded.home], texts: [['embedded stderr', E.stderr()]] }).hits, [], 'the recall query was stored or logged');
    const wal = read.find((f) => f.startsWith('memory.db-wal:'));
    assert.ok(wal, `the WAL was read while running: ${read.join(' ')}`);
    note(`1. embedded, running: swept ${read.join(', ')}`);
  });

  await r.test('[embedded] clean stop, then the sweep again (WAL checkpointed) and envelope check', async () => {
    await E.closeAndCheckExit();
    const { hits } = canaries.sweep({ dirs: [embedded.home], files: [E.logPath], texts: [['embedded stderr', E.stderr()]] });
    assert.deepEqual(hits, [], 'canaries found after stop');
    assert.deepEqual(queryCanaries.sweep({ dirs: [embedded.home], texts: [['embedded stderr', E.stderr()]] }).hits, [], 'the recall query was stored or logged');
    assert.deepEqual(envelopeInStore(embeddedData), [], 'memory.db raw bytes hold an envelope block after stop');
  });
}

// ===========================================================================
// 1 + 5, against tmcra-memd over HTTPS
// ===========================================================================
const remote = isolatedEnv('remote');
const wR = plantedWrites('rem');
wR.all.forEach((s) => canaries.addSecret(s, 'remote'));
wR.privates.forEach((p) => canaries.addMarker(p.marker, 'remote private marker'));
let R;
const rTally = newTally();

if (memd) {
  await r.test('[memd] prepare/commit/ingest with planted secrets: receipts, stored once and redacted in memd', async () => {
    R = await connect('remote', remoteEnv({ url: memd.url, key, ca: certs.ca, extra: pickHomeVars(remote.env) }));
    for (const rc of await runPlanted(R, wR, { remote: true })) addFilter(rTally, rc.content_filter);
    await assertPlantedStored(R, wR);
    const check = storeCheck(memdData);
    for (const id of [`u-${wR.marker}`, `a-${wR.marker}`, `i1-${wR.marker}`]) assert.equal(check.message_counts[id], 1, `${id} once in memd`);
    assert.equal(check.message_counts[`i2-${wR.marker}`], undefined, 'the all-private message never reached memd');
    const st = await call(R, 'tmcra_status', {});
    assert.deepEqual(st.content_filter, rTally, 'status tally');
  });

  await r.test('[memd] 10 rounds of recall -> inject -> commit: +2 records a round in memd, no envelope stored', async () => {
    await injectRounds(R, memdData, rTally, 'memd');
    const st = await call(R, 'tmcra_status', {});
    assert.deepEqual(st.content_filter, rTally, 'status tally');
  }, { timeoutMs: 60_000 });

  await r.test('[memd] tmcra-memd redacts on its own: a client with TMCRA_REDACT_SECRETS=off', async () => {
    const off = isolatedEnv('remote-nofilter');
    const env = remoteEnv({ url: memd.url, key, ca: certs.ca, extra: { ...pickHomeVars(off.env), TMCRA_REDACT_SECRETS: 'off' } });
    const s = await connect('remote-nofilter', env);
    const m = `nf${hex(5)}`;
    const secs = makeSecrets(['github_token', 'aws_access_key_id', 'jwt']);
    // Only memd's files are swept for these: this client's outbox keeps them by configuration.
    const memdOnly = new Canaries();
    secs.forEach((x) => memdOnly.addSecret(x, 'client-unfiltered'));
    const rc = await call(s, 'tmcra_ingest', {
      session_id: `s-${m}`, consistency: 'read_your_writes',
      messages: [{ message_id: `nf-${m}`, role: 'user', content: `Unfiltered ${m}: ${secs.map((x) => x.in).join(' and ')} end.` }],
    });
    assert.deepEqual(rc.content_filter.redacted, {}, 'the client did not redact');
    const rec = await call(s, 'tmcra_reconcile', {});
    assert.equal(rec.queue_counts.pending + rec.queue_counts.submitted, 0, JSON.stringify(rec.queue_counts));
    const { records } = await recallRecords(s, `Unfiltered ${m}`, { session_id: `s-${m}` });
    const text = records.find((x) => x.message_id === `nf-${m}`)?.text;
    for (const x of secs) assert.ok(text?.includes(`[REDACTED:${x.kind}]`), `memd stored [REDACTED:${x.kind}]: ${JSON.stringify(text)}`);
    await s.closeAndCheckExit();
    const { hits } = memdOnly.sweep({ dirs: [memdData], texts: [['memd stderr', memd.stderr()]] });
    assert.deepEqual(hits, [], 'memd stored what its own filter should have redacted');
  });

  await r.test('[memd] sweep while running: mcp HOME (outbox, WAL), memd data, both stderr, answers', async () => {
    const { hits, read } = canaries.sweep({
      dirs: [remote.home, memdData],
      texts: [['remote stderr', R.stderr()], ['memd stderr', memd.stderr()], ...answers.map((a, i) => [`answer #${i}`, a])],
    });
    assert.deepEqual(hits, [], 'canaries found');
    assert.ok(read.some((f) => f.startsWith('mcp-queue.sqlite3')), `the outbox was read: ${read.join(' ')}`);
  });
}

// ===========================================================================
// 4. SIGKILL in the middle of a commit of redacted text
// ===========================================================================
const kills = isolatedEnv('kills');
const killData = kills.env.TMCRA_DATA_DIR;
let failpointsBuilt = null;   // learnt from the first failpoint case
const killCases = [];

/** A turn with secrets on both sides. */
function killTurn(tag) {
  const m = `${tag}${hex(4)}`;
  const us = makeSecrets(['aws_access_key_id']);
  const as = makeSecrets(['github_token', 'private_key']);
  [...us, ...as].forEach((x) => canaries.addSecret(x, `kill ${tag}`));
  return {
    m, secrets: as,
    prepare: { turn_id: `t-${m}`, session_id: `kill-${m}`, user_message_id: `u-${m}`, user_content: `Kill case ${m}: rotate ${us[0].in} today.` },
    commit: { turn_id: `t-${m}`, assistant_message_id: `a-${m}`, assistant_content: `Rotated for ${m}: new token ${as[0].in}\n${as[1].in}` },
  };
}

/**
 * Commits a turn on a server that dies in the middle (at `failpoint`, or SIGKILLed `killAfterMs`
 * after the commit was sent); restarts it, reconciles, lets the host retry the unanswered
 * commit, and checks the turn is stored once, redacted. `check` is storeCheck of the memory.
 */
async function killDuringCommit({ label, env, failpoint, killAfterMs, check }) {
  const t = killTurn(label.replace(/[^a-z]/g, '').slice(0, 6));
  const s = await connect(`kill-${label}`, failpoint ? { ...env, TMCRA_FAILPOINTS: failpoint } : env);
  await call(s, 'tmcra_turn_prepare', t.prepare);
  const pid = (await call(s, 'tmcra_status', {})).pid;
  const pending = s.call({ name: 'tmcra_turn_commit', arguments: t.commit }, { timeout: 15_000 });
  let killer;
  if (!failpoint) killer = sleep(killAfterMs).then(() => { try { process.kill(pid, 'SIGKILL'); } catch { /* gone */ } });
  const outcome = await withTimeout(pending.then((v) => ({ v }), (e) => ({ e })), 15_000, `${label}: commit`);
  await killer;
  if (outcome.v) answers.push(textOf(outcome.v));
  const answered = Boolean(outcome.v && !outcome.v.isError);
  if (failpoint) {
    if (answered) return { label, failpointsBuilt: false };
    const said = `failpoint ${failpoint.split(':')[0]}: SIGKILL`;
    for (const until = Date.now() + 3000; !s.stderr().includes(said) && Date.now() < until;) await sleep(20);
    assert.ok(s.stderr().includes(said), `${label}: died at the failpoint: ${s.stderr().slice(-500)}`);
  }
  await s.closeQuietly();
  // Restart on the same data, reconcile, and count what is there before any retry.
  const s2 = await connect(`kill-${label}-after`, env);
  const rec = await call(s2, 'tmcra_reconcile', {});
  assert.equal(rec.queue_counts.pending + rec.queue_counts.submitted + rec.queue_counts.dead_letter, 0, `${label}: ${JSON.stringify(rec.queue_counts)}`);
  const first = check().message_counts[`a-${t.m}`] ?? 0;
  assert.ok(first <= 1, `${label}: the answer stored ${first} times before the retry`);
  if (answered) assert.equal(first, 1, `${label}: an acknowledged commit is stored without a retry`);
  // The host never saw an answer: it retries exactly as before (a replay, never a conflict).
  await call(s2, 'tmcra_turn_prepare', t.prepare, `${label}: prepare retry`);
  const again = await call(s2, 'tmcra_turn_commit', t.commit, `${label}: commit retry`);
  assert.equal(again.status, 'succeeded', `${label}: retry: ${JSON.stringify(again).slice(0, 300)}`);
  assert.deepEqual(again.content_filter.redacted, kindCounts(t.secrets), `${label}: the retry's receipt`);
  const after = check().message_counts;
  assert.equal(after[`u-${t.m}`], 1, `${label}: the user message is stored once`);
  assert.equal(after[`a-${t.m}`], 1, `${label}: the answer is stored once`);
  const { records } = await recallRecords(s2, `Rotated for ${t.m} new token`, { session_id: `kill-${t.m}` });
  const stored = records.filter((x) => x.message_id === `a-${t.m}`);
  assert.equal(stored.length, 1, `${label}: recalled once`);
  for (const x of t.secrets) assert.ok(stored[0].text.includes(`[REDACTED:${x.kind}]`), `${label}: redacted: ${JSON.stringify(stored[0].text)}`);
  await s2.closeAndCheckExit();
  return { label, before: first, answered, failpointsBuilt: failpoint ? true : undefined };
}

const FAILPOINTS = ['commit.after_insert_before_commit', 'commit.after_commit_before_reply',
  'deliver.before_send', 'deliver.after_accept_before_mark', 'engine.job.before_commit'];

await r.test('[kill] failpoints at each step of a commit of redacted text: stored once, redacted', async () => {
  for (const fp of FAILPOINTS) {
    const res = await killDuringCommit({ label: fp, env: kills.env, failpoint: fp, check: () => storeCheck(killData) });
    if (res.failpointsBuilt === false) { failpointsBuilt = false; break; }
    failpointsBuilt = true;
    killCases.push(`${fp} (stored ${res.before}x before the retry)`);
  }
}, { timeoutMs: 30_000 });

await r.test('[kill] SIGKILL 0-40 ms after the commit was sent: stored once, redacted', async () => {
  for (const ms of [0, 2, 5, 15, 40]) {
    const res = await killDuringCommit({ label: `sigkill+${ms}ms`, env: kills.env, killAfterMs: ms, check: () => storeCheck(killData) });
    killCases.push(`${res.label} (${res.answered ? 'answered' : 'no answer'}, stored ${res.before}x before the retry)`);
  }
}, { timeoutMs: 30_000 });

if (memd) {
  await r.test('[kill, memd] killed after memd accepted the commit, before marking it: stored once in memd, redacted', async () => {
    const k = isolatedEnv('kills-remote');
    const env = remoteEnv({ url: memd.url, key, ca: certs.ca, extra: pickHomeVars(k.env) });
    const fp = failpointsBuilt === false ? null : 'deliver.after_accept_before_mark';
    const res = await killDuringCommit({ label: fp ? `memd ${fp}` : 'memd sigkill+5ms', env, failpoint: fp, killAfterMs: 5, check: () => storeCheck(memdData) });
    killCases.push(`${res.label} (stored ${res.before}x before the retry)`);
    const { hits } = canaries.sweep({ dirs: [k.home] });
    assert.deepEqual(hits, [], 'canaries in the killed remote client\'s files');
  }, { timeoutMs: 20_000 });
}

await r.test('[kill] sweep of the killed processes\' data dir and stderr', async () => {
  const killSessions = sessions.filter((s) => path.basename(s.logPath).includes('kill-'));
  const { hits } = canaries.sweep({ dirs: [kills.home], texts: killSessions.map((s) => [s.logPath, s.stderr()]) });
  assert.deepEqual(hits, [], 'canaries found');
  note(`4. kills (${failpointsBuilt ? 'failpoints built in' : 'no failpoints in this build: timed kills only'}): ${killCases.join('; ')}: each turn once, redacted`);
});

// ===========================================================================
// Stop everything cleanly, sweep again
// ===========================================================================
await r.test('clean stop of tmcra-mcp and tmcra-memd, then the final sweep of everything', async () => {
  if (R) await R.closeAndCheckExit();
  if (memd) {
    const exit = await memd.stop('SIGTERM');
    assert.equal(exit.code, 0, `memd exit: ${JSON.stringify(exit)}`);
  }
  const { hits, read } = canaries.sweep({
    dirs: [embedded.home, remote.home, kills.home, path.join(tmpDir(), 'kills-remote'), memdData],
    files: logs,  // what every tmcra-mcp wrote on stdout (its answers); the client's side is not swept
    texts: [...sessions.map((s) => [`stderr ${path.basename(s.logPath)}`, s.stderr()]),
      ...(memd ? [['memd stderr', memd.stderr()]] : []), ...answers.map((a, i) => [`answer #${i}`, a])],
  });
  assert.deepEqual(hits, [], 'canaries found');
  note(`1. planted secrets (${Object.keys(MAKERS).length} kinds) and private spans: none in ${read.length} files (db, -wal, -shm, outboxes, controls, memd), ${sessions.length + 1} stderr logs or ${answers.length} answers, running and stopped; recalled as [REDACTED:<kind>]`);
});

await r.test('stdout of every tmcra-mcp carried only JSON-RPC', async () => {
  for (const s of sessions) await s.closeQuietly();
  assertAllStdoutPure(logs);
});

console.log('\nsummary:');
for (const line of [...summary].sort()) console.log(`# ${line}`);

await r.finish();
