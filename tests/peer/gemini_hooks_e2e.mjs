#!/usr/bin/env node
// gemini_hooks_e2e.mjs — the memory hooks end to end with the real Gemini CLI 0.61.0 (`gemini -p`,
// pinned in package.json) against the loopback fake Gemini API of fake_model.mjs, in a scratch
// HOME, with the hooks installed by the real `tmcra-mcp-setup install --host gemini-cli`:
//   - what setup wrote: Gemini CLI's event names, handler names, timeouts in milliseconds and
//     the fail-open wrapper;
//   - session 1 states a fact with a planted secret, behind another hook's SessionStart context
//     (which Gemini CLI puts before the prompt under -p): stored once, as typed, secret redacted;
//   - session 2 (a new session; an @file in its prompt) gets the fact in the envelope, as Gemini
//     CLI escapes it; its prompt is stored without the file's content; the model's answer quotes
//     the escaped envelope, which is not stored; nothing stored twice;
//   - the session resumed: its first prompt is still in the request (tmcra's SessionStart gives
//     nothing, which Gemini CLI would drop on resume with that prompt) and no memory is given twice;
//   - a turn whose BeforeAgent hook is not installed, its prompt asked before in the session: stored
//     from AfterAgent with its answer, once, also when the same AfterAgent comes again;
//   - fail-open: the tmcra-mcp binary missing, its data directory unusable, a hook stalled past
//     its deadline: the turn completes (exit 0, the answer, no warning), Gemini CLI shows no
//     "Hook system message", and there is one model request (an AfterAgent that failed with exit
//     2 or more would re-prompt the model in a loop);
//   - `tmcra-mcp hook EVENT --host gemini-cli` itself prints exactly one JSON object, exit 0,
//     on bad input, with no event, and when stalled past its deadline too.
// Each `gemini -p` run has a cwd in a git repository with an origin, and one model request.
//
//   node gemini_hooks_e2e.mjs <tmcra-mcp> <tmcra-mcp-testserver>   (TMCRA_SETUP, TMCRA_STORE_CHECK)
import { spawnSync } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';

import { Runner, assert, parseBins, requireNodeModules, run, tmpDir, hostCliEnv, geminiEntryEnv, BIN_DIR } from './lib.mjs';
import { startFakeModel, geminiSetup, runHost, showRun, stringsOf } from './fake_model.mjs';

const NAME = 'gemini_hooks_e2e.mjs';
requireNodeModules(NAME, ['@google/gemini-cli']);
const bins = parseBins(NAME);
const BUILD = path.dirname(bins.server);
const SETUP = process.env.TMCRA_SETUP || path.join(BUILD, 'tmcra-mcp-setup');
const STORE_CHECK = process.env.TMCRA_STORE_CHECK || path.join(BUILD, '..', '..', 'tests', 'support', 'tmcra-store-check');
const GEMINI = path.join(BIN_DIR, 'gemini');
const MODEL = 'gemini-2.5-flash';
const r = new Runner(NAME, { budgetMs: 150_000 });
const ROOT = fs.realpathSync(tmpDir('tmcra-gemini-hooks-'));
const fake = await startFakeModel();
r.onCleanup(() => fake.close());
// The next answer: a text, or a function of the request (an answer that quotes it).
let nextAnswer = 'Noted.';
let lastAnswer = '';
fake.script = (req) => (lastAnswer = typeof nextAnswer === 'function' ? nextAnswer(req) : nextAnswer);
const notes = [];

const MARKER = '[[tmcra:recalled-memory]]';
const SESSION2_PROMPT = 'Which host and port does my build cache server use? See @notes.txt too.';
const FACT = 'cache-7.internal:9040';
const EVENTS = { SessionStart: 10000, BeforeAgent: 10000, AfterAgent: 10000, SessionEnd: 2000 };
const secret = () => `AKIA${crypto.randomBytes(8).toString('hex').toUpperCase().replace(/[^A-Z2-7]/g, 'Q').slice(0, 16)}`;

// ---------------------------------------------------------------------------------------------
// The store
// ---------------------------------------------------------------------------------------------
function storeRecords(dataDir) {
  if (!fs.existsSync(path.join(dataDir, 'memory.db'))) return [];
  const out = spawnSync(STORE_CHECK, ['--records', dataDir], { encoding: 'utf8' });
  assert.equal(out.status, 0, `tmcra-store-check --records: ${out.stderr}`);
  return JSON.parse(out.stdout);
}

// The stored user turn is the prompt as typed, word for word, except that a secret is redacted.
function sameUserTurn(content, t) {
  if (!t.secret) return content === t.user;
  const [pre, post] = t.user.split(t.secret);
  return content.startsWith(pre) && content.endsWith(post) && !content.includes(t.secret);
}

// The stored answer is the answer, word for word, except that a quoted envelope is dropped.
function sameAnswer(content, t) {
  if (!t.quoted) return content === t.assistant;
  return content.startsWith(t.quoted.pre) && content.endsWith(t.quoted.post);
}

/**
 * Each of the world's turns is stored once (prompt as typed, answer; a prompt asked twice is
 * stored twice); no envelope, no secret.
 */
function assertStoredOnce(w, what) {
  const recs = storeRecords(w.dataDir);
  const dump = () => recs.map((x) => `${x.scope_name} ${x.session_id} ${x.role}: ${JSON.stringify(x.content).slice(0, 200)}`).join('\n');
  for (const t of w.turns) {
    const asked = w.turns.filter((u) => u.user === t.user).length;
    const users = recs.filter((x) => x.role === 'user' && sameUserTurn(x.content, t));
    assert.equal(users.length, asked, `${what}: the prompt ${JSON.stringify(t.user.slice(0, 80))} stored ${users.length} times, not ${asked}:\n${dump()}`);
    const answers = recs.filter((x) => x.role === 'assistant' && sameAnswer(x.content, t));
    assert.equal(answers.length, 1, `${what}: the answer ${JSON.stringify(t.assistant.slice(0, 200))} stored ${answers.length} times:\n${dump()}`);
  }
  assert.equal(recs.length, 2 * w.turns.length, `${what}: records beyond the turns:\n${dump()}`);
  for (const x of recs) {
    assert.ok(!x.content.includes(MARKER) && !/untrusted|hook_context|tmcra-memory/i.test(x.content), `${what}: envelope text stored: ${x.content.slice(0, 300)}`);
    assert.ok(!x.content.includes('--- Content from referenced files ---'), `${what}: an @file's content stored: ${x.content.slice(0, 300)}`);
    for (const s of w.secrets) assert.ok(!x.content.includes(s), `${what}: the planted secret was stored`);
  }
  assert.equal(new Set(recs.map((x) => x.scope_name)).size, 1, `${what}: one project scope: ${dump()}`);
  assert.match(recs[0]?.scope_name ?? 'acmeproj-', /^acmeproj-[0-9a-f]{10}$/);
  return recs;
}

// ---------------------------------------------------------------------------------------------
// A world: a scratch HOME, Gemini CLI pointed at the fake, a git repository, the hooks installed
// ---------------------------------------------------------------------------------------------
const git = (cwd, ...args) => {
  const out = spawnSync('git', args, { cwd, encoding: 'utf8', env: { ...process.env, GIT_CONFIG_NOSYSTEM: '1', HOME: cwd } });
  assert.equal(out.status, 0, `git ${args.join(' ')}: ${out.stderr}`);
};

async function makeWorld(label, tmcraCommand = bins.server) {
  const home = path.join(ROOT, label);
  const repo = path.join(home, 'work', 'acmeproj');
  fs.mkdirSync(repo, { recursive: true });
  git(repo, 'init', '-q', '-b', 'main');
  git(repo, 'remote', 'add', 'origin', `https://git.example.invalid/acme/acmeproj-${label}.git`);
  fs.writeFileSync(path.join(repo, 'notes.txt'), 'Release notes: nothing about caches here.\n');
  let env = hostCliEnv(home);
  // With GITHUB_SHA set (GitHub Actions), Gemini CLI gives hooks only an allowlist of variables:
  // TMCRA_DATA_DIR would not reach them (docs/hooks.md).
  delete env.GITHUB_SHA;
  delete env.SURFACE;
  env = geminiSetup(env, fake);
  const res = await run(SETUP, ['install', '--host', 'gemini-cli', '--command', tmcraCommand], { env, cwd: home, timeoutMs: 20_000 });
  assert.equal(res.code, 0, `tmcra-mcp-setup install --host gemini-cli: ${showRun({ ...res })}`);
  return { label, home, repo, env, dataDir: env.TMCRA_DATA_DIR, settings: path.join(home, '.gemini', 'settings.json'),
    tmcraCommand, turns: [], secrets: [], setupOut: res.stdout };
}

const settingsOf = (w) => JSON.parse(fs.readFileSync(w.settings, 'utf8'));
const writeSettings = (w, doc) => fs.writeFileSync(w.settings, `${JSON.stringify(doc, null, 2)}\n`);

/**
 * One `gemini -p` run in the world's repository. answer: a text, or a function of the request.
 * resume: the world's last session. record: the turn is one the store must hold; quoted: what
 * the store holds of the answer is only its text before and after a quote ({pre, post}).
 * Returns {res, out (stdout's JSON), requests, others, answer (the text)}.
 */
async function turn(w, prompt, { answer = `Noted (${crypto.randomBytes(3).toString('hex')}).`, resume = false, env = {}, record = true, secret: planted, quoted } = {}) {
  const args = ['-p', prompt, '--output-format', 'json', '-m', MODEL];
  if (resume) args.push('--resume', w.lastSession);
  nextAnswer = answer;
  lastAnswer = '';
  const before = fake.requests.length;
  const res = await runHost(GEMINI, args, { env: { ...w.env, ...env }, cwd: w.repo, timeoutMs: 60_000 });
  const all = fake.requests.slice(before);
  const text = typeof answer === 'function' ? lastAnswer : answer;
  let out = null;
  try { out = JSON.parse(res.stdout); } catch { /* asserted by the caller */ }
  if (out?.session_id) w.lastSession = out.session_id;
  if (record) w.turns.push({ user: prompt, assistant: text, secret: planted, quoted });
  if (planted) w.secrets.push(planted);
  return { res, out, requests: all.filter((q) => q.api === 'gemini'), others: all.filter((q) => q.api !== 'gemini'), answer: text };
}

/** Exit 0 with the answer, no warning, nothing from a hook on stderr, one model request. */
function assertTurnCompleted(t, what) {
  assert.equal(t.res.code, 0, `${what}: ${showRun(t.res)}`);
  assert.ok(t.out, `${what}: stdout is not JSON: ${showRun(t.res)}`);
  assert.equal(t.out.response, t.answer, `${what}: ${showRun(t.res)}`);
  assert.deepEqual(t.out.warnings ?? [], [], `${what}: warnings (a blocked turn?)`);
  assert.doesNotMatch(t.res.stderr, /Hook system message|failed for event|execution blocked/i, `${what}: a hook spoke: ${showRun(t.res)}`);
  assert.equal(t.requests.length, 1, `${what}: ${t.requests.length} model requests (an AfterAgent loop?)`);
  assert.deepEqual(t.others.map((q) => `${q.method} ${q.url}`), [], `${what}: other requests`);
  assert.match(t.requests[0].url, new RegExp(`^/v1beta/models/${MODEL}:streamGenerateContent`));
}

/** The texts of the last user content of the turn's request (Gemini CLI merges consecutive ones). */
const lastUserParts = (t) => {
  const users = (t.requests.at(-1)?.body?.contents ?? []).filter((c) => c.role === 'user');
  return (users.at(-1)?.parts ?? []).map((p) => p.text).filter((x) => typeof x === 'string');
};
const hookContexts = (t) => stringsOf(t.requests.at(-1)?.body?.contents ?? []).filter((s) => s.startsWith(`<hook_context>${MARKER}`));
const memoryIds = (s) => [...s.matchAll(/memory_id=(rec_[0-9a-f]+)/g)].map((m) => m[1]);

// ---------------------------------------------------------------------------------------------
// 1. Install, remember, recall, resume
// ---------------------------------------------------------------------------------------------
let w;
await r.test('install: Gemini CLI\'s events, names, millisecond timeouts and the fail-open wrapper in settings.json', async () => {
  w = await makeWorld('main');
  const doc = settingsOf(w);
  assert.deepEqual(doc.mcpServers.tmcra, { command: bins.server, args: [], env: geminiEntryEnv(w.env) });
  assert.deepEqual(Object.keys(doc.hooks), Object.keys(EVENTS));
  for (const [event, timeout] of Object.entries(EVENTS)) {
    assert.deepEqual(doc.hooks[event], [{ matcher: '*', hooks: [{ name: `tmcra-${event}`, type: 'command',
      command: `'${bins.server}' hook ${event} --host gemini-cli 2>/dev/null || true`, timeout }] }], event);
  }
  assert.equal(doc.security.auth.selectedType, 'gemini-api-key', 'the fake\'s settings kept');
  assert.match(w.setupOut, /Gemini CLI \(user\) hooks: 4 tmcra-mcp hooks added to /, w.setupOut);
});

if (w) {
  await r.test('session 1 states a fact behind another hook\'s SessionStart context: stored once, as typed, secret redacted', async () => {
    // Another hook's SessionStart context: Gemini CLI puts it before the prompt under -p.
    const doc = settingsOf(w);
    const theirs = { matcher: '*', hooks: [{ name: 'their-brief', type: 'command', timeout: 5000,
      command: `echo '${JSON.stringify({ hookSpecificOutput: { additionalContext: 'THEIR-BRIEF' } })}'` }] };
    doc.hooks.SessionStart.unshift(theirs);
    writeSettings(w, doc);
    const key = secret();
    const t = await turn(w, `My build cache server is at ${FACT} and my AWS key is ${key}; please remember the server.`,
      { answer: `Noted: your build cache server is ${FACT}.`, secret: key });
    assertTurnCompleted(t, 'session 1');
    assert.ok(lastUserParts(t).some((p) => p.startsWith('<hook_context>THEIR-BRIEF</hook_context>\n\nMy build cache server')),
      `the other hook's context is not before the prompt: ${JSON.stringify(lastUserParts(t)).slice(0, 600)}`);
    assert.deepEqual(hookContexts(t), [], 'a first session is given no memory');
    notes.push(`session 1 took ${t.res.ms} ms`);
    doc.hooks.SessionStart.shift();
    writeSettings(w, doc);
    assertStoredOnce(w, 'after session 1');
  }, { timeoutMs: 70_000 });

  await r.test('session 2 (a new session, an @file) gets the fact in the escaped envelope; its prompt stored as typed; '
    + 'the answer quotes the envelope, which is not stored', async () => {
    // The model quotes what it was given, as Gemini CLI gave it (escaped, with the markers).
    const quoted = { pre: 'You gave me:', post: `So it is ${FACT}.` };
    const quote = (req) => {
      const part = lastUserParts({ requests: [req] }).find((p) => p.startsWith(`<hook_context>${MARKER}`)) ?? '';
      return `${quoted.pre}\n${part.slice('<hook_context>'.length, part.lastIndexOf('</hook_context>'))}\n${quoted.post}`;
    };
    const t = await turn(w, SESSION2_PROMPT, { answer: quote, quoted });
    assert.ok(t.answer.includes('&lt;tmcra-memory trust="untrusted"&gt;') && t.answer.includes('[[/tmcra:recalled-memory]]'),
      `the answer does not quote the escaped envelope: ${t.answer.slice(0, 400)}`);
    assertTurnCompleted(t, 'session 2');
    const parts = lastUserParts(t);
    assert.ok(parts.join('\n').includes('Release notes: nothing about caches here.'), `the @file was not read: ${JSON.stringify(parts).slice(0, 800)}`);
    const contexts = hookContexts(t);
    assert.equal(contexts.length, 1, `no envelope in the request:\n${t.requests.at(-1)?.raw.slice(0, 3000)}`);
    const [envelope] = contexts;
    assert.ok(parts.includes(envelope), 'the envelope is a part of the user\'s own content');
    assert.ok(envelope.includes('&lt;tmcra-memory trust="untrusted"&gt;'), envelope.slice(0, 400));
    assert.ok(envelope.indexOf(FACT) > envelope.indexOf(MARKER), `the fact is not inside the envelope: ${envelope.slice(0, 2000)}`);
    assert.ok(envelope.endsWith('[[/tmcra:recalled-memory]]</hook_context>'), envelope.slice(-200));
    assert.ok(!w.secrets.some((s) => envelope.includes(s)), 'the secret is recalled');
    w.session2 = w.lastSession;
    notes.push(`session 2 took ${t.res.ms} ms; envelope ${envelope.length} bytes as the model gets it`);
    const recs = assertStoredOnce(w, 'after session 2');
    assert.equal(new Set(recs.map((x) => x.session_id)).size, 2, 'two sessions');
  }, { timeoutMs: 70_000 });

  await r.test('the session resumed: its first prompt kept, no memory given twice, each turn stored once', async () => {
    const t = await turn(w, 'And which port does the build cache server listen on?', { answer: 'Port 9040.', resume: true });
    assertTurnCompleted(t, 'the resumed turn');
    assert.equal(t.out.session_id, w.session2, 'the same session');
    const texts = stringsOf(t.requests.at(-1).body.contents);
    assert.ok(texts.some((s) => s.startsWith('Which host and port does my build cache server use?')), 'the resumed request lost the first prompt');
    const ids = hookContexts(t).flatMap(memoryIds);
    assert.ok(ids.length >= 1, 'the earlier envelope is kept in the resumed conversation');
    assert.deepEqual(ids.filter((id, i) => ids.indexOf(id) !== i), [], 'a memory given twice in one session');
    assertStoredOnce(w, 'after the resumed turn');
  }, { timeoutMs: 70_000 });

  await r.test('a turn whose BeforeAgent did not run (the prompt asked before in the session) is stored once, with its answer', async () => {
    const doc = settingsOf(w);
    const { BeforeAgent: removed, ...others } = doc.hooks;
    writeSettings(w, { ...doc, hooks: others });
    let t;
    try {
      t = await turn(w, SESSION2_PROMPT, { answer: `Still ${FACT}, as before.`, resume: true });
    } finally {
      writeSettings(w, { ...doc, hooks: { ...others, BeforeAgent: removed } });
    }
    assertTurnCompleted(t, 'BeforeAgent missed');
    assert.ok(!lastUserParts(t).some((p) => p.startsWith(`<hook_context>${MARKER}`)), 'memory given without BeforeAgent');
    assertStoredOnce(w, 'after the turn BeforeAgent missed');
    // The same AfterAgent again (a second installed hook, say): nothing more is stored.
    const payload = { session_id: w.session2, transcript_path: '', cwd: w.repo, hook_event_name: 'AfterAgent',
      timestamp: new Date().toISOString(), prompt: SESSION2_PROMPT, prompt_response: t.answer, stop_hook_active: false };
    const res = await run(bins.server, ['hook', 'AfterAgent', '--host', 'gemini-cli'], { env: w.env, cwd: w.repo, input: JSON.stringify(payload), timeoutMs: 20_000 });
    assert.equal(res.code, 0, showRun(res));
    assert.equal(res.stdout, '{}', showRun(res));
    assertStoredOnce(w, 'after the same AfterAgent again');
  }, { timeoutMs: 70_000 });
}

// ---------------------------------------------------------------------------------------------
// 2. Fail-open
// ---------------------------------------------------------------------------------------------
await r.test('fail-open: the tmcra-mcp binary missing: no blocked turn, no hook message, no AfterAgent loop', async () => {
  // Installed as a hard link (else a copy) named tmcra-mcp, then taken away.
  const bin = path.join(ROOT, 'missing-bin', 'tmcra-mcp');
  fs.mkdirSync(path.dirname(bin), { recursive: true });
  try { fs.linkSync(bins.server, bin); } catch { fs.copyFileSync(bins.server, bin); fs.chmodSync(bin, 0o755); }
  const m = await makeWorld('missing', bin);
  assert.ok(fs.readFileSync(m.settings, 'utf8').includes(`'${bin}' hook AfterAgent`));
  fs.rmSync(bin);
  const t = await turn(m, 'With the binary gone: which port does the cache use?', { record: false });
  assertTurnCompleted(t, 'binary missing');
  notes.push(`binary missing: the turn took ${t.res.ms} ms`);
});

if (w) {
  await r.test('fail-open: the data directory unusable (a file in its path): the turn completes silently, nothing stored', async () => {
    const file = path.join(w.home, 'not-a-directory');
    fs.writeFileSync(file, 'x');
    const before = storeRecords(w.dataDir).length;
    const t = await turn(w, 'With the data directory unusable: what is the cache host?', { record: false, env: { TMCRA_DATA_DIR: path.join(file, 'data') } });
    assertTurnCompleted(t, 'data directory unusable');
    assert.equal(storeRecords(w.dataDir).length, before);
    notes.push(`data directory unusable: the turn took ${t.res.ms} ms`);
  }, { timeoutMs: 70_000 });

  await r.test('fail-open: every hook stalled past its deadline (hook.stall, 300 ms): the turn completes silently', async () => {
    const t = await turn(w, 'With the hooks stalled: what is the cache host?', { record: false,
      env: { TMCRA_FAILPOINTS: 'hook.stall', TMCRA_HOOK_DEADLINE_MS: '300' } });
    assertTurnCompleted(t, 'hooks stalled');
    assertStoredOnce(w, 'after the stalled hooks');
    notes.push(`hooks stalled: the turn took ${t.res.ms} ms`);
  }, { timeoutMs: 70_000 });
}

// ---------------------------------------------------------------------------------------------
// 3. The hook itself: one JSON object on stdout, exit 0, whatever the input
// ---------------------------------------------------------------------------------------------
await r.test('tmcra-mcp hook EVENT --host gemini-cli prints exactly one JSON object, exit 0: on bad input, with no event, stalled past its deadline', async () => {
  const home = path.join(ROOT, 'direct');
  const cwd = path.join(home, 'proj');
  fs.mkdirSync(cwd, { recursive: true });
  const env = hostCliEnv(home);
  const payload = (event, extra = {}) => JSON.stringify({ session_id: 'direct-1', cwd, hook_event_name: event, timestamp: new Date().toISOString(), ...extra });
  const cases = [
    ['bad stdin', 'BeforeAgent', 'this is not json {', {}],
    ['an event Gemini CLI has but the hooks do not take', 'PreCompress', payload('PreCompress', { trigger: 'auto' }), {}],
    ['Claude Code\'s name for the event', 'UserPromptSubmit', payload('UserPromptSubmit', { prompt: 'hello there, what is new?' }), {}],
    ['the data directory unusable', 'AfterAgent', payload('AfterAgent', { prompt: 'q?', prompt_response: 'a.', stop_hook_active: false }),
      { TMCRA_DATA_DIR: '/dev/null/data' }],
    ['a SessionEnd', 'SessionEnd', payload('SessionEnd', { reason: 'exit' }), {}],
    ['stalled past its deadline', 'BeforeAgent', payload('BeforeAgent', { prompt: 'Where is the build cache server?' }),
      { TMCRA_FAILPOINTS: 'hook.stall', TMCRA_HOOK_DEADLINE_MS: '300' }],
    ['no event named', null, payload('BeforeAgent', { prompt: 'hello there, what is new?' }), {}],
  ];
  for (const [label, event, input, extra] of cases) {
    const args = event ? ['hook', event, '--host', 'gemini-cli'] : ['hook', '--host', 'gemini-cli'];
    const res = await run(bins.server, args, { env: { ...env, ...extra }, cwd, input, timeoutMs: 20_000 });
    assert.equal(res.code, 0, `${label}: ${showRun(res)}`);
    assert.equal(res.stdout, '{}', `${label}: stdout ${JSON.stringify(res.stdout.slice(0, 300))}`);
  }
});

for (const n of notes) console.log(`note: ${n}`);
await r.finish();
