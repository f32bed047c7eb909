#!/usr/bin/env node
// console_browser.mjs — `tmcra-mcp console` in Debian's headless Chromium, driven by
// playwright-core (pinned in package.json; no browser download: it launches /usr/bin/chromium).
//
//   node console_browser.mjs <tmcra-mcp> <tmcra-mcp-testserver>
//
// A turn is committed through a real tmcra-mcp (the official SDK client). The browser opens the
// console with its one-time token, sees the turn on its scope's page, finds it by search,
// sees the last recalls, forgets it and sees it gone from search and from the page; replays a
// dead letter; changes a session's mode. Without the token, with a forged cookie, a foreign Host or Origin, a spent
// token, or a POST without the CSRF token, a request gets 401 or 403 and changes nothing.
// Screenshots of the main pages go to $CONSOLE_SCREENSHOTS (default: the temp directory).
import { spawn } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import readline from 'node:readline';
import {
  Runner, assert, parseBins, requireNodeModules, connectV1, serverEnv, callOk, run, tmpDir, sleep,
} from './lib.mjs';

const NAME = 'console_browser.mjs';
requireNodeModules(NAME, ['@modelcontextprotocol/sdk', 'playwright-core']);
const bins = parseBins(NAME);
const r = new Runner(NAME, { budgetMs: 150_000 });
const CHROMIUM = process.env.CHROMIUM ?? '/usr/bin/chromium';
const shots = process.env.CONSOLE_SCREENSHOTS ?? path.join(tmpDir(), 'screenshots');
fs.mkdirSync(shots, { recursive: true });

const env = serverEnv();
const marker = `mk${crypto.randomBytes(6).toString('hex')}`;
const other = `mk${crypto.randomBytes(6).toString('hex')}`;

/** Commits a turn quoting `m` and waits for its delivery. */
async function commitTurn(client, m, session) {
  await callOk(client, 'tmcra_turn_prepare', {
    turn_id: `t-${m}`, session_id: session, user_message_id: `u-${m}`,
    user_content: `Which laptop did we order for ${m}?`,
  });
  await callOk(client, 'tmcra_turn_commit', {
    turn_id: `t-${m}`, assistant_message_id: `a-${m}`,
    assistant_content: `We ordered the 14-inch model for ${m}.`,
  });
  for (let i = 0; i < 100; ++i) {
    const rec = await callOk(client, 'tmcra_reconcile', {});
    if (rec.queue_counts.pending + rec.queue_counts.submitted === 0) return;
    await sleep(100);
  }
}

/** A raw request to the console, with the headers given (Host included). */
function raw(port, { method = 'GET', pathName = '/', headers = {}, body } = {}) {
  return new Promise((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port, method, path: pathName, headers }, (res) => {
      let text = '';
      res.on('data', (d) => { text += d; });
      res.on('end', () => resolve({ status: res.statusCode, text }));
    });
    req.on('error', reject);
    if (body) req.end(body); else req.end();
  });
}

let consoleProc;
let browser;
r.onCleanup(async () => {
  if (browser) await browser.close();
  if (consoleProc && consoleProc.exitCode === null) consoleProc.kill('SIGTERM');
});

await r.test('console: open, see, search, forget, replay, change a mode', async () => {
  const s = await connectV1({ bin: bins.server, label: 'console-writer', env });
  // The older turn's outbox item becomes the dead letter (--dead-letter takes the oldest).
  await commitTurn(s.client, other, 'sess-console');
  await commitTurn(s.client, marker, 'sess-console');
  await s.closeAndCheckExit();
  const dead = await run(process.env.TMCRA_STORE_CHECK,
    ['--dead-letter', path.join(env.TMCRA_DATA_DIR, 'outbox.sqlite3')], { env });
  assert.equal(dead.code, 0, dead.stderr);
  const deadItem = dead.stdout.trim();

  consoleProc = spawn(bins.server, ['console', '--no-open'], { env, stdio: ['ignore', 'pipe', 'pipe'] });
  let err = '';
  consoleProc.stderr.on('data', (d) => { err += d; });
  const url = await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no URL in 15 s: ${err}`)), 15_000);
    readline.createInterface({ input: consoleProc.stdout }).once('line', (line) => {
      clearTimeout(timer);
      resolve(line.trim());
    });
  });
  assert.match(url, /^http:\/\/127\.0\.0\.1:\d+\/\?token=[0-9a-f]{64}$/);
  const port = Number(new URL(url).port);
  r.port = port;
  r.url = url;

  const { chromium } = await import('playwright-core');
  browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox'] });
  const context = await browser.newContext({ viewport: { width: 1200, height: 800 } });
  const page = await context.newPage();
  page.on('dialog', (d) => d.accept());
  await page.goto(url);
  assert.equal(new URL(page.url()).search, '', 'the token left the address bar');
  assert.ok((await page.textContent('h1')).includes('Scopes'));
  await page.screenshot({ path: path.join(shots, 'console-scopes.png'), fullPage: true });
  const cookies = await context.cookies();
  const session = cookies.find((c) => c.name === 'tmcra_console');
  assert.ok(session && session.httpOnly && session.sameSite === 'Strict', JSON.stringify(cookies));
  r.cookie = `tmcra_console=${session.value}`;

  await page.click('a[href="/scope?name=personal"]');
  assert.ok((await page.content()).includes(marker), 'the committed turn is on its scope page');
  await page.screenshot({ path: path.join(shots, 'console-scope.png'), fullPage: true });

  await page.goto(`http://127.0.0.1:${port}/search`);
  await page.fill('input[name=q]', `laptop ${marker}`);
  await page.click('button:has-text("Search")');
  await page.waitForSelector('table');
  assert.ok((await page.content()).includes(marker), 'search finds it');
  await page.screenshot({ path: path.join(shots, 'console-search.png'), fullPage: true });

  await page.goto(`http://127.0.0.1:${port}/recall`);
  assert.ok((await page.content()).includes(`Which laptop did we order for ${marker}?`),
    'the last recalls list the prepared turn\'s query');
  await page.screenshot({ path: path.join(shots, 'console-recalls.png'), fullPage: true });

  await page.goto(`http://127.0.0.1:${port}/forget`);
  await page.fill('input[name=match]', marker);
  await page.click('button:has-text("Forget")');
  await page.waitForSelector('#forget-report');
  assert.match(await page.textContent('#forget-report'), /Forgot 2 records/);
  await page.goto(`http://127.0.0.1:${port}/search?q=${encodeURIComponent(`laptop ${marker}`)}`);
  assert.ok(!(await page.locator('table').innerText()).includes(marker), 'gone from search');
  await page.goto(`http://127.0.0.1:${port}/scope?name=personal`);
  assert.ok(!(await page.content()).includes(marker), 'gone from the page');
  assert.ok((await page.content()).includes(other), 'the other turn stays');

  await page.selectOption('select[name=mode]', 'off');
  await page.click('button:has-text("Set mode")');
  assert.match(await page.textContent('#control-report'), /mode is now .*"mode":"off"/);
  await page.goto(`http://127.0.0.1:${port}/scope?name=personal`);
  assert.match(await page.content(), /controls: .*"mode":"off"/, 'the page shows the mode');

  await page.goto(`http://127.0.0.1:${port}/outbox`);
  assert.ok((await page.content()).includes(deadItem), 'the dead letter is listed');
  await page.screenshot({ path: path.join(shots, 'console-outbox.png'), fullPage: true });
  await page.click('button:has-text("Replay")');
  assert.match(await page.textContent('#replay-report'), /pending again/);
  await context.close();
}, { timeoutMs: 100_000 });

await r.test('console: no token, forged cookie, foreign Host or Origin, no CSRF: refused, no change', async () => {
  assert.ok(r.port, 'the console runs');
  const host = `127.0.0.1:${r.port}`;
  const form = `match=${other}`;
  const post = { 'Content-Type': 'application/x-www-form-urlencoded', Host: host };
  const cases = [
    [{ headers: { Host: host } }, 401],
    [{ headers: { Host: host, Cookie: 'tmcra_console=forged' } }, 401],
    [{ pathName: new URL(r.url).pathname + new URL(r.url).search, headers: { Host: host } }, 401],
    [{ headers: { Host: `evil.example:${r.port}`, Cookie: r.cookie } }, 403],
    [{ headers: { Host: host, Cookie: r.cookie, Origin: 'http://evil.example' } }, 403],
    [{ method: 'POST', pathName: '/forget', headers: { ...post, Cookie: r.cookie }, body: form }, 403],
    [{ method: 'POST', pathName: '/forget', headers: { ...post, Cookie: r.cookie, Origin: 'http://evil.example' }, body: `${form}&csrf=x` }, 403],
    [{ method: 'POST', pathName: '/forget', headers: { ...post }, body: form }, 401],
  ];
  for (const [req, status] of cases) {
    const res = await raw(r.port, req);
    assert.equal(res.status, status, `${JSON.stringify(req)}: ${res.status} ${res.text}`);
    assert.ok(!res.text.includes(other), 'nothing of memory in a refusal');
  }
  const search = await raw(r.port, {
    pathName: `/search?q=${encodeURIComponent(`laptop ${other}`)}`, headers: { Host: host, Cookie: r.cookie },
  });
  assert.equal(search.status, 200);
  assert.ok(search.text.includes(`for ${other}`), 'the other turn is still stored');
});

await r.finish();
