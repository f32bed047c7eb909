#!/usr/bin/env node
// fake_model.mjs — a loopback fake model API for running the real hosts (Claude Code, Codex,
// Gemini CLI) non-interactively, and, run as a script, the check that the pinned Claude Code and
// Codex complete a turn against it and send their hooks what docs/hooks.md says.
//
//   import { startFakeModel } from './fake_model.mjs';
//   const fake = await startFakeModel();            // 127.0.0.1:<ephemeral port>
//   fake.url                                          // http://127.0.0.1:<port>
//   fake.requests                                     // every request, in order (see below)
//   fake.script = (req) => 'an answer';               // how it answers (default: "Noted.")
//   await fake.close();
//
// Three APIs, all streamed as server-sent events:
//   - Anthropic Messages, for Claude Code: POST /v1/messages (Claude Code adds ?beta=true):
//     message_start, then content_block_start / content_block_delta / content_block_stop for
//     each block, then message_delta (stop_reason) and message_stop. A request without
//     "stream": true gets the same message as one JSON object.
//   - OpenAI Responses, for Codex: POST /v1/responses: response.created, then
//     response.output_item.added and response.output_item.done for each item, then
//     response.completed with usage.
//   - Gemini (generativelanguage v1beta), for Gemini CLI (GOOGLE_GEMINI_BASE_URL):
//     POST /v1beta/models/<model>:streamGenerateContent?alt=sse: one `data:` event holding the
//     whole candidate (text and functionCall parts), then the stream ends; :generateContent
//     gets the same candidate as one JSON object (a request asking for JSON is answered with
//     the fields Gemini CLI's model router and next-speaker check read).
// Anything else is recorded too and answered 404 (Anthropic's error shape).
//
// A recorded request is {api: 'anthropic'|'openai'|'gemini'|'other', method, url, headers, body
// (parsed JSON, or null), raw (the body's text), at (ms)}. The script gets it and answers with
//   - a string: one text block / one assistant message / one text part holding it;
//   - {blocks: [...]}: {type:'text', text} or {type:'tool_use', name, input, id?}
//     (Anthropic; stop_reason tool_use when there is one) / {type:'text', text} or
//     {type:'function_call', name, arguments (object or string), namespace?, call_id?} (OpenAI,
//     and Gemini: a functionCall part with `arguments` as its args);
//   - {status, error}: an HTTP error with that status (for retries and failures).
//
//   node fake_model.mjs <tmcra-mcp> <tmcra-mcp-testserver>
// runs `claude -p` and `codex exec` (the pins in package.json) in a scratch HOME against the fake
// with a stub hook that saves its stdin and answers additionalContext, and checks the facts of
// docs/hooks.md ("What the hosts send"). It needs neither tmcra-mcp nor a network.
import { spawn } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export const DEFAULT_ANSWER = 'Noted.';

function sse(res, event, data) {
  res.write(`event: ${event}\ndata: ${JSON.stringify(data)}\n\n`);
}

function normalize(answer, api) {
  if (answer === undefined || answer === null) answer = DEFAULT_ANSWER;
  if (typeof answer === 'string') return { blocks: [{ type: 'text', text: answer }] };
  if (answer.status) return answer;
  if (!Array.isArray(answer.blocks)) throw new Error(`fake model (${api}): bad script answer ${JSON.stringify(answer)}`);
  return answer;
}

let counter = 0;
const nextId = (pre) => `${pre}_${Date.now().toString(36)}${(counter += 1)}`;

function answerAnthropic(req, res, answer) {
  const body = req.body ?? {};
  const model = body.model ?? 'claude-fake';
  const content = answer.blocks.map((b) => (b.type === 'tool_use'
    ? { type: 'tool_use', id: b.id ?? nextId('toolu'), name: b.name, input: b.input ?? {} }
    : { type: 'text', text: String(b.text ?? '') }));
  const stopReason = content.some((b) => b.type === 'tool_use') ? 'tool_use' : 'end_turn';
  const usage = { input_tokens: 100, output_tokens: 10, cache_creation_input_tokens: 0, cache_read_input_tokens: 0 };
  const id = nextId('msg');
  if (body.stream !== true) {
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ id, type: 'message', role: 'assistant', model, content, stop_reason: stopReason,
      stop_sequence: null, usage }));
    return;
  }
  res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache', connection: 'keep-alive' });
  sse(res, 'message_start', { type: 'message_start', message: { id, type: 'message', role: 'assistant', model,
    content: [], stop_reason: null, stop_sequence: null, usage: { ...usage, output_tokens: 1 } } });
  content.forEach((b, index) => {
    if (b.type === 'tool_use') {
      sse(res, 'content_block_start', { type: 'content_block_start', index, content_block: { type: 'tool_use', id: b.id, name: b.name, input: {} } });
      sse(res, 'content_block_delta', { type: 'content_block_delta', index, delta: { type: 'input_json_delta', partial_json: JSON.stringify(b.input) } });
    } else {
      sse(res, 'content_block_start', { type: 'content_block_start', index, content_block: { type: 'text', text: '' } });
      sse(res, 'content_block_delta', { type: 'content_block_delta', index, delta: { type: 'text_delta', text: b.text } });
    }
    sse(res, 'content_block_stop', { type: 'content_block_stop', index });
  });
  sse(res, 'message_delta', { type: 'message_delta', delta: { stop_reason: stopReason, stop_sequence: null }, usage: { output_tokens: 10 } });
  sse(res, 'message_stop', { type: 'message_stop' });
  res.end();
}

function answerOpenAI(req, res, answer) {
  const body = req.body ?? {};
  const model = body.model ?? 'gpt-fake';
  const items = answer.blocks.map((b) => {
    if (b.type === 'function_call') {
      const item = { type: 'function_call', id: nextId('fc'), call_id: b.call_id ?? nextId('call'), name: b.name,
        arguments: typeof b.arguments === 'string' ? b.arguments : JSON.stringify(b.arguments ?? {}), status: 'completed' };
      if (b.namespace) item.namespace = b.namespace;
      return item;
    }
    return { type: 'message', id: nextId('msg'), role: 'assistant', status: 'completed',
      content: [{ type: 'output_text', text: String(b.text ?? ''), annotations: [] }] };
  });
  const id = nextId('resp');
  const usage = { input_tokens: 100, input_tokens_details: { cached_tokens: 0 }, output_tokens: 10,
    output_tokens_details: { reasoning_tokens: 0 }, total_tokens: 110 };
  const base = { id, object: 'response', created_at: Math.floor(Date.now() / 1000), model };
  res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache', connection: 'keep-alive' });
  let seq = 0;
  const ev = (type, data) => sse(res, type, { type, sequence_number: (seq += 1) - 1, ...data });
  ev('response.created', { response: { ...base, status: 'in_progress', output: [] } });
  items.forEach((item, i) => {
    const added = item.type === 'message' ? { ...item, status: 'in_progress', content: [] } : { ...item, status: 'in_progress' };
    ev('response.output_item.added', { output_index: i, item: added });
    if (item.type === 'message') {
      ev('response.output_text.delta', { output_index: i, item_id: item.id, content_index: 0, delta: item.content[0].text });
    }
    ev('response.output_item.done', { output_index: i, item });
  });
  ev('response.completed', { response: { ...base, status: 'completed', output: items, usage } });
  res.end();
}

function answerGemini(req, res, answer, stream) {
  const model = /models\/([^:]+):/.exec(req.url)?.[1] ?? 'gemini-fake';
  const parts = answer.blocks.map((b) => (b.type === 'function_call'
    ? { functionCall: { name: b.name, args: typeof b.arguments === 'string' ? JSON.parse(b.arguments) : (b.arguments ?? {}) } }
    : { text: String(b.text ?? '') }));
  const config = req.body?.generationConfig ?? {};
  if (!stream && (config.responseJsonSchema || config.responseSchema || config.responseMimeType === 'application/json')) {
    parts.splice(0, parts.length, { text: JSON.stringify({ complexity_reasoning: 'fake', complexity_score: 10, reasoning: 'fake', next_speaker: 'user' }) });
  }
  const body = { candidates: [{ content: { role: 'model', parts }, finishReason: 'STOP', index: 0 }],
    usageMetadata: { promptTokenCount: 100, candidatesTokenCount: 10, totalTokenCount: 110 }, modelVersion: model, responseId: nextId('resp') };
  if (!stream) {
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify(body));
    return;
  }
  res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
  res.write(`data: ${JSON.stringify(body)}\r\n\r\n`);
  res.end();
}

/** The error body of each API for an HTTP error `status` with `message`. */
function errorBody(api, status, message) {
  if (api === 'anthropic') return { type: 'error', error: { type: 'api_error', message } };
  if (api === 'gemini') return { error: { code: status, message, status: status >= 500 ? 'INTERNAL' : 'INVALID_ARGUMENT' } };
  return { error: { type: 'server_error', message } };
}

/**
 * Starts the fake on 127.0.0.1:0. Options: script (req) => answer, as described above.
 * Returns {url, port, requests, script (settable), modelRequests(api?), close()}.
 */
export async function startFakeModel({ script } = {}) {
  const fake = {
    requests: [],
    script: script ?? (() => DEFAULT_ANSWER),
    /** The requests for a model turn (Messages or Responses), optionally of one api. */
    modelRequests(api) { return this.requests.filter((r) => r.api !== 'other' && (!api || r.api === api)); },
  };
  const server = http.createServer((req, res) => {
    const chunks = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => {
      const raw = Buffer.concat(chunks).toString('utf8');
      let body = null;
      try { body = raw ? JSON.parse(raw) : null; } catch { /* recorded as raw */ }
      const url = new URL(req.url, 'http://127.0.0.1');
      let api = 'other';
      const gemini = /^\/v1beta\/models\/[^:/]+:(streamGenerateContent|generateContent)$/.exec(url.pathname);
      if (req.method === 'POST' && url.pathname === '/v1/messages') api = 'anthropic';
      else if (req.method === 'POST' && url.pathname === '/v1/responses') api = 'openai';
      else if (req.method === 'POST' && gemini) api = 'gemini';
      const rec = { api, method: req.method, url: req.url, headers: req.headers, body, raw, at: Date.now() };
      fake.requests.push(rec);
      if (api === 'other') {
        res.writeHead(404, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ type: 'error', error: { type: 'not_found_error', message: `fake model: no ${req.method} ${url.pathname}` } }));
        return;
      }
      let answer;
      try {
        answer = normalize(fake.script(rec), api);
      } catch (e) {
        answer = { status: 500, error: String(e?.message ?? e) };
      }
      if (answer.status) {
        res.writeHead(answer.status, { 'content-type': 'application/json' });
        res.end(JSON.stringify(errorBody(api, answer.status, answer.error ?? 'fake error')));
        return;
      }
      if (api === 'anthropic') answerAnthropic(rec, res, answer);
      else if (api === 'gemini') answerGemini(rec, res, answer, gemini[1] === 'streamGenerateContent');
      else answerOpenAI(rec, res, answer);
    });
  });
  await new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', resolve);
  });
  fake.port = server.address().port;
  fake.url = `http://127.0.0.1:${fake.port}`;
  fake.close = () => new Promise((resolve) => {
    server.closeAllConnections?.();
    server.close(() => resolve());
  });
  return fake;
}

/** Every string in a JSON value (object keys excluded), depth first. */
export function stringsOf(value, out = []) {
  if (typeof value === 'string') out.push(value);
  else if (Array.isArray(value)) value.forEach((v) => stringsOf(v, out));
  else if (value && typeof value === 'object') Object.values(value).forEach((v) => stringsOf(v, out));
  return out;
}

/** The text the user typed last in a recorded request (the last user turn's text). */
export function lastUserText(rec) {
  const b = rec.body ?? {};
  if (rec.api === 'anthropic') {
    const users = (b.messages ?? []).filter((m) => m.role === 'user');
    const last = users[users.length - 1];
    if (!last) return '';
    return typeof last.content === 'string' ? last.content : stringsOf(last.content.filter((c) => c.type === 'text')).join('\n');
  }
  if (rec.api === 'gemini') {
    // Gemini CLI merges consecutive user contents; a hook's context is a part of its own.
    const users = (b.contents ?? []).filter((c) => c.role === 'user');
    const last = users[users.length - 1];
    return (last?.parts ?? []).map((p) => p.text).filter((t) => typeof t === 'string' && !t.startsWith('<hook_context>')
      && !t.startsWith('<session_context>')).join('\n');
  }
  const input = Array.isArray(b.input) ? b.input : [];
  const users = input.filter((m) => m.role === 'user');
  const last = users[users.length - 1];
  return last ? stringsOf(last.content).join('\n') : '';
}

// -------------------------------------------------------------------------------------------
// The hosts: environment and config for a run against the fake (shared with hooks_e2e.mjs)
// -------------------------------------------------------------------------------------------
/** Environment of `claude -p` against the fake, on top of a hostCliEnv(home). */
export function claudeEnv(baseEnv, fake) {
  return { ...baseEnv, ANTHROPIC_BASE_URL: fake.url, ANTHROPIC_API_KEY: 'dummy' };
}

/** Writes $CODEX_HOME/config.toml (default ~/.codex) pointing Codex at the fake; returns env. */
export function codexSetup(baseEnv, fake, { codexHome = path.join(baseEnv.HOME, '.codex'), extraToml = '' } = {}) {
  fs.mkdirSync(codexHome, { recursive: true, mode: 0o700 });
  const file = path.join(codexHome, 'config.toml');
  const prev = fs.existsSync(file) ? fs.readFileSync(file, 'utf8') : '';
  // Top-level keys must come before any table: put ours first and keep what was there.
  const ours = ['model = "gpt-fake"', 'model_provider = "fake"', 'approval_policy = "never"', ''].join('\n');
  const provider = ['', '[model_providers.fake]', 'name = "fake"', `base_url = "${fake.url}/v1"`, 'wire_api = "responses"',
    'env_key = "FAKE_API_KEY"', 'request_max_retries = 0', 'stream_max_retries = 0', ''].join('\n');
  const kept = prev.replace(/^model = "gpt-fake"\nmodel_provider = "fake"\napproval_policy = "never"\n/, '')
    .replace(/\n\[model_providers\.fake\]\n[^[]*/, '\n');
  fs.writeFileSync(file, ours + kept + provider + extraToml);
  return { ...baseEnv, FAKE_API_KEY: 'dummy', CODEX_HOME: codexHome };
}

/**
 * Writes $HOME/.gemini/settings.json for Gemini CLI against the fake (an API key, no usage
 * statistics), keeping what is there (tmcra-mcp-setup's entry and hooks); returns the env:
 * GOOGLE_GEMINI_BASE_URL at the fake, the workspace trusted (else a headless run exits 55 and
 * runs no hook), TMPDIR in the scratch HOME (API errors are written there).
 */
export function geminiSetup(baseEnv, fake) {
  const dir = path.join(baseEnv.HOME, '.gemini');
  fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
  const file = path.join(dir, 'settings.json');
  const prev = fs.existsSync(file) ? JSON.parse(fs.readFileSync(file, 'utf8')) : {};
  const settings = { ...prev, security: { ...prev.security, auth: { selectedType: 'gemini-api-key' } },
    privacy: { ...prev.privacy, usageStatisticsEnabled: false }, general: { enableAutoUpdate: false, ...prev.general } };
  fs.writeFileSync(file, `${JSON.stringify(settings, null, 2)}\n`);
  const tmp = path.join(baseEnv.HOME, 'tmp');
  fs.mkdirSync(tmp, { recursive: true });
  return { ...baseEnv, GEMINI_API_KEY: 'dummy', GOOGLE_GEMINI_BASE_URL: fake.url, GEMINI_CLI_TRUST_WORKSPACE: 'true', TMPDIR: tmp };
}

/** Spawn a host CLI; resolves {code, signal, stdout, stderr, ms}. stdin is closed at once. */
export function runHost(cmd, args, { env, cwd, timeoutMs = 60_000 } = {}) {
  return new Promise((resolve, reject) => {
    const t = Date.now();
    const p = spawn(cmd, args, { env, cwd, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
    let stdout = '';
    let stderr = '';
    p.stdout.on('data', (d) => { stdout += d; });
    p.stderr.on('data', (d) => { stderr += d; });
    const timer = setTimeout(() => {
      try { process.kill(-p.pid, 'SIGKILL'); } catch { p.kill('SIGKILL'); }
      reject(new Error(`${path.basename(cmd)} ${args.join(' ').slice(0, 200)}: timed out after ${timeoutMs} ms\nstdout: ${stdout.slice(-3000)}\nstderr: ${stderr.slice(-3000)}`));
    }, timeoutMs);
    p.on('error', (e) => { clearTimeout(timer); reject(e); });
    p.on('close', (code, signal) => { clearTimeout(timer); resolve({ code, signal, stdout, stderr, ms: Date.now() - t }); });
  });
}

export const showRun = (res) => `exit ${res.code}${res.signal ? ` (${res.signal})` : ''} in ${res.ms} ms\nstdout: ${res.stdout.slice(-3000)}\nstderr: ${res.stderr.slice(-4000)}`;

// -------------------------------------------------------------------------------------------
// Run as a script: the pinned hosts against the fake, with a stub hook
// -------------------------------------------------------------------------------------------
async function selfTest() {
  const lib = await import('./lib.mjs');
  const { Runner, assert, requireNodeModules, tmpDir, hostCliEnv, claudeCommand, BIN_DIR } = lib;
  const NAME = 'fake_model.mjs';
  requireNodeModules(NAME, ['@anthropic-ai/claude-code', '@openai/codex']);
  const r = new Runner(NAME, { budgetMs: 150_000 });
  const root = tmpDir('tmcra-fake-model-');
  const fake = await startFakeModel();
  r.onCleanup(() => fake.close());
  r.onCleanup(() => fs.writeFileSync(path.join(root, 'requests.json'), JSON.stringify(fake.requests, null, 1)));
  const CLAUDE = claudeCommand();
  const CODEX = path.join(BIN_DIR, 'codex');
  const tag = crypto.randomBytes(4).toString('hex');

  // The stub hook: saves its stdin and environment to <dir>/<event>-<n>.json; for
  // SessionStart and UserPromptSubmit it answers hookSpecificOutput.additionalContext.
  const stubDir = path.join(root, 'stub');
  fs.mkdirSync(stubDir, { recursive: true });
  const stub = path.join(stubDir, 'hook.mjs');
  fs.writeFileSync(stub, `#!/usr/bin/env node
import fs from 'node:fs';
const [dir, event] = process.argv.slice(2);
let input = '';
process.stdin.on('data', (d) => { input += d; });
process.stdin.on('end', () => {
  const n = fs.readdirSync(dir).filter((f) => f.startsWith(event + '-')).length;
  const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => /^(CLAUDE|CODEX)/.test(k)));
  fs.writeFileSync(dir + '/' + event + '-' + n + '.json', JSON.stringify({ input, env, cwd: process.cwd() }));
  if (event === 'SessionStart' || event === 'UserPromptSubmit') {
    process.stdout.write(JSON.stringify({ hookSpecificOutput: { hookEventName: event,
      additionalContext: 'STUB-CONTEXT-' + event + '-${tag}' } }));
  }
});
`, { mode: 0o755 });
  const EVENTS = {
    'claude-code': ['SessionStart', 'UserPromptSubmit', 'Stop', 'StopFailure', 'SubagentStop', 'PreCompact', 'SessionEnd'],
    codex: ['SessionStart', 'UserPromptSubmit', 'Stop', 'SubagentStop', 'PreCompact', 'SessionEnd', 'Interrupt'],
  };
  const hooksJson = (host, dir) => ({ hooks: Object.fromEntries(EVENTS[host].map((e) => [e, [{ hooks: [{ type: 'command',
    command: `'${process.execPath}' '${stub}' '${dir}' ${e}`, timeout: e === 'SessionEnd' || e === 'Interrupt' ? 2 : 10 }] }]])) });
  const saved = (dir) => fs.readdirSync(dir).sort().map((f) => ({ file: f, ...JSON.parse(fs.readFileSync(path.join(dir, f), 'utf8')) }))
    .map((x) => ({ ...x, event: x.file.split('-')[0], json: JSON.parse(x.input) }));
  const facts = [];

  for (const host of ['claude-code', 'codex']) {
    const home = path.join(root, `${host}-home`);
    const project = path.join(home, 'project');
    const dir = path.join(stubDir, host);
    fs.mkdirSync(project, { recursive: true });
    fs.mkdirSync(dir);
    let env = hostCliEnv(home);
    let cmd;
    let args;
    const prompt = `What is the capital of France? (${host} ${tag})`;
    if (host === 'claude-code') {
      fs.mkdirSync(path.join(home, '.claude'), { recursive: true });
      fs.writeFileSync(path.join(home, '.claude', 'settings.json'), JSON.stringify(hooksJson(host, dir), null, 2));
      env = claudeEnv(env, fake);
      cmd = CLAUDE.cmd;
      args = [...CLAUDE.pre, '-p', prompt, '--output-format', 'json'];
    } else {
      env = codexSetup(env, fake);
      fs.writeFileSync(path.join(home, '.codex', 'hooks.json'), JSON.stringify(hooksJson(host, dir), null, 2));
      cmd = CODEX;
      args = ['exec', '--skip-git-repo-check', '--dangerously-bypass-hook-trust', prompt];
    }
    const before = fake.requests.length;
    fake.script = () => `Paris. (${tag})`;
    let res;
    await r.test(`${host}: one turn against the fake exits 0 and prints the answer`, async () => {
      res = await runHost(cmd, args, { env, cwd: project, timeoutMs: 60_000 });
      assert.equal(res.code, 0, showRun(res));
      assert.ok(res.stdout.includes(`Paris. (${tag})`), showRun(res));
      if (host === 'claude-code') assert.equal(JSON.parse(res.stdout).result, `Paris. (${tag})`);
      facts.push(`${host}: a turn took ${res.ms} ms`);
    }, { timeoutMs: 70_000 });
    if (!res || res.code !== 0) continue;
    const mine = fake.requests.slice(before);
    await r.test(`${host}: the requests reaching the fake`, async () => {
      const model = mine.filter((q) => q.api !== 'other');
      assert.ok(model.length >= 1, JSON.stringify(mine.map((q) => `${q.method} ${q.url}`)));
      const others = mine.filter((q) => q.api === 'other').map((q) => `${q.method} ${q.url}`);
      if (host === 'claude-code') {
        for (const q of model) {
          assert.equal(q.url, '/v1/messages?beta=true');
          assert.equal(q.body.stream, true);
        }
      } else {
        for (const q of model) {
          assert.equal(q.url, '/v1/responses');
          assert.equal(q.body.stream, true);
        }
      }
      facts.push(`${host}: ${model.length} model request(s) (${[...new Set(model.map((q) => q.url))].join(', ')}, model ${model[0].body.model}); other requests: ${others.length ? others.join(', ') : 'none'}`);
    });
    await r.test(`${host}: the hooks ran with the documented stdin`, async () => {
      const runs = saved(dir);
      const events = runs.map((x) => x.event);
      facts.push(`${host}: hooks that ran: ${events.join(', ')}`);
      for (const e of ['SessionStart', 'UserPromptSubmit', 'Stop', 'SessionEnd']) assert.ok(events.includes(e), `${e} did not run: ${events}`);
      for (const x of runs) {
        assert.equal(x.json.hook_event_name, x.event);
        assert.equal(typeof x.json.session_id, 'string');
        assert.equal(fs.realpathSync(x.json.cwd), fs.realpathSync(project), `${x.event} cwd`);
        assert.equal(fs.realpathSync(x.cwd), fs.realpathSync(project), `${x.event} process cwd`);
        facts.push(`${host} ${x.event} stdin keys: ${Object.keys(x.json).sort().join(',')}${host === 'claude-code' ? `; env: ${Object.keys(x.env).sort().join(',')}` : ''}`);
      }
      const ids = new Set(runs.map((x) => x.json.session_id));
      assert.equal(ids.size, 1, `one session id: ${[...ids]}`);
      const ups = runs.find((x) => x.event === 'UserPromptSubmit').json;
      assert.equal(ups.prompt, prompt);
      const stop = runs.find((x) => x.event === 'Stop').json;
      assert.equal(stop.last_assistant_message, `Paris. (${tag})`);
      assert.equal(stop.stop_hook_active, false);
      const end = runs.find((x) => x.event === 'SessionEnd').json;
      facts.push(`${host} SessionEnd reason: ${end.reason}; SessionStart source: ${runs.find((x) => x.event === 'SessionStart').json.source}`);
      if (host === 'codex') {
        assert.equal(typeof ups.turn_id, 'string');
        assert.equal(stop.turn_id, ups.turn_id, 'Stop and UserPromptSubmit carry the same turn_id');
        assert.equal(end.reason, 'other');
      } else {
        assert.equal(end.reason, 'other');
        assert.match(ups.transcript_path, /\.claude\/projects\/.*\.jsonl$/);
      }
    });
    await r.test(`${host}: additionalContext of SessionStart and UserPromptSubmit reaches the model`, async () => {
      const q = mine.filter((x) => x.api !== 'other').pop();
      for (const e of ['SessionStart', 'UserPromptSubmit']) {
        const want = `STUB-CONTEXT-${e}-${tag}`;
        const found = stringsOf(q.body).filter((s) => s.includes(want));
        assert.ok(found.length >= 1, `${e}'s context not in the request: ${q.raw.slice(0, 3000)}`);
        const where = host === 'claude-code'
          ? (q.body.messages ?? []).map((m, i) => (stringsOf(m).some((s) => s.includes(want)) ? `messages[${i}] role ${m.role}` : null)).filter(Boolean)
          : (q.body.input ?? []).map((m, i) => (stringsOf(m).some((s) => s.includes(want)) ? `input[${i}] role ${m.role}` : null)).filter(Boolean);
        const at = found[0].indexOf(want);
        const shown = `${at > 60 ? '…' : ''}${found[0].slice(Math.max(0, at - 60), at + want.length)}${at + want.length < found[0].length ? '…' : ''}`;
        facts.push(`${host}: ${e} additionalContext arrives in ${where.join(', ') || 'system'} as ${JSON.stringify(shown)}`);
        if (host === 'codex') {
          assert.ok(found.includes(want), `Codex adds the context word for word: ${JSON.stringify(found)}`);
        }
      }
    });
    await r.test(`${host}: a UserPromptSubmit hook past its timeout (1 s) is killed, the turn goes on without its output`, async () => {
      const slowDir = path.join(stubDir, `${host}-slow`);
      fs.mkdirSync(slowDir);
      const cfg = hooksJson(host, slowDir);
      cfg.hooks.UserPromptSubmit[0].hooks[0] = { type: 'command', command: `sleep 8; echo LATE-${tag}`, timeout: 1 };
      const file = host === 'claude-code' ? path.join(home, '.claude', 'settings.json') : path.join(home, '.codex', 'hooks.json');
      fs.writeFileSync(file, JSON.stringify(cfg, null, 2));
      const n = fake.requests.length;
      const slow = await runHost(cmd, args, { env, cwd: project, timeoutMs: 60_000 });
      assert.equal(slow.code, 0, showRun(slow));
      assert.ok(slow.stdout.includes(`Paris. (${tag})`), showRun(slow));
      assert.ok(slow.ms < 7000, `the turn waited for the stalled hook: ${slow.ms} ms`);
      const q = fake.requests.slice(n).filter((x) => x.api !== 'other');
      assert.equal(q.length, 1);
      assert.ok(!q[0].raw.includes(`LATE-${tag}`));
      assert.ok(q[0].raw.includes(`STUB-CONTEXT-SessionStart-${tag}`), 'the other hooks still ran');
      facts.push(`${host}: with a stalled UserPromptSubmit hook (timeout 1 s) the turn took ${slow.ms} ms (${res.ms} ms without)`);
      if (host === 'codex') {
        // Without --dangerously-bypass-hook-trust and without a trusted_hash: no hook runs, silently.
        const untrusted = path.join(stubDir, 'codex-untrusted');
        fs.mkdirSync(untrusted);
        fs.writeFileSync(file, JSON.stringify(hooksJson(host, untrusted), null, 2));
        const m = fake.requests.length;
        const plain = await runHost(cmd, args.filter((a) => a !== '--dangerously-bypass-hook-trust'), { env, cwd: project });
        assert.equal(plain.code, 0, showRun(plain));
        assert.deepEqual(fs.readdirSync(untrusted), [], 'an untrusted hook ran');
        assert.ok(!fake.requests.slice(m).some((x) => x.raw.includes('STUB-CONTEXT')));
        assert.ok(!/hook/i.test(plain.stderr), `Codex said something about the skipped hooks: ${plain.stderr}`);
        facts.push('codex: untrusted hooks are skipped without a word on stderr');
      }
    }, { timeoutMs: 70_000 });
  }
  for (const f of facts) console.log(`note: ${f}`);
  await r.finish();
}

if (process.argv[1] && fs.realpathSync(process.argv[1]) === fileURLToPath(import.meta.url)) {
  await selfTest();
}
