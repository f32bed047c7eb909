#!/usr/bin/env node
// remote_mcp_oauth.mjs — tmcra-memd's OAuth 2.1 authorization server for /mcp, over real HTTPS
// on 127.0.0.1, driven by the official SDK clients from npm (v1 StreamableHTTPClientTransport
// and the v2 client) through their own auth code: discovery (protected-resource and
// authorization-server metadata), dynamic client registration, PKCE, the consent page (read and
// answered by the test, as a browser would, with a memd key), the code exchange, and the refresh
// of an expired access token.
//
//   node remote_mcp_oauth.mjs <tmcra-mcp> <tmcra-mcp-testserver>   (TMCRA_MEMD: tmcra-memd)
//
// Refused, each by hand: no token (401 naming the resource metadata), an expired, a revoked and
// a foreign-resource token, a token on a memory scope it does not grant, a replayed code (which
// also revokes the grant's tokens), a PKCE verifier that does not match, an unregistered
// redirect URI, a refresh token used again (refused; past 10 s its grant is revoked), a changed
// consent form. Node's fetch
// trusts the test CA only through NODE_EXTRA_CA_CERTS: the script runs itself again with it.
import { spawnSync } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';

import { Runner, assert, parseBins, requireNodeModules, tmpDir, sleep, connectV1 } from './lib.mjs';
import { withTestCa, memdBin, createKey, remoteEnv, startMemd as startMemdOn } from './remote_lib.mjs';

const NAME = 'remote_mcp_oauth.mjs';
requireNodeModules(NAME, ['@modelcontextprotocol/sdk', '@modelcontextprotocol/client']);
const bins = parseBins(NAME);

const certs = withTestCa();

const r = new Runner(NAME, { budgetMs: 240_000 });
const TMP = tmpDir('tmcra-oauth-');
const DATA = path.join(TMP, 'memd');
fs.mkdirSync(DATA, { recursive: true, mode: 0o700 });

const servers = [];
r.onCleanup(async () => {
  for (const s of servers) if (s.proc.exitCode === null && s.proc.signalCode === null) s.proc.kill('SIGKILL');
});

/** `tmcra-memd serve` on DATA with TLS (remote_lib's startMemd), killed at the end if still up. */
async function startMemd({ port = 0, args = [] } = {}) {
  const srv = await startMemdOn({ dataDir: DATA, certs, port, args });
  servers.push(srv);
  return srv;
}

// ---------------------------------------------------------------------------
// The user at the consent page, as a browser would be
// ---------------------------------------------------------------------------
/** The hidden fields of the consent form in `html`. */
function formFields(html) {
  const fields = {};
  for (const m of html.matchAll(/<input type="hidden" name="([^"]+)" value="([^"]*)">/g)) {
    fields[m[1]] = m[2].replace(/&quot;/g, '"').replace(/&#39;/g, "'").replace(/&lt;/g, '<')
      .replace(/&gt;/g, '>').replace(/&amp;/g, '&');
  }
  return fields;
}

/** Opens `authUrl`, signs in with `key` and answers `decision`: the redirect's URL, or the page. */
async function consent(authUrl, key, { decision = 'allow', tamper } = {}) {
  const page = await fetch(authUrl, { redirect: 'manual' });
  const html = await page.text();
  assert.equal(page.status, 200, html);
  const csp = page.headers.get('content-security-policy') ?? '';
  assert.match(csp, /frame-ancestors 'none'/);
  assert.doesNotMatch(csp, /form-action/, 'form-action would block the redirect to the client in browsers');
  const fields = { ...formFields(html), key, decision };
  if (tamper) tamper(fields);
  const answer = await fetch(new URL('/authorize', authUrl), {
    method: 'POST', redirect: 'manual',
    headers: { 'Content-Type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams(fields).toString(),
  });
  if (answer.status !== 302) return { status: answer.status, html: await answer.text() };
  return { status: 302, location: new URL(answer.headers.get('location')) };
}

/** An OAuthClientProvider whose "browser" is consent(): it keeps what the SDK asks it to. */
function provider(key, { scope } = {}) {
  const state = { codes: [] };
  return {
    kept: state,
    get redirectUrl() { return 'http://127.0.0.1:9/callback'; },
    get clientMetadata() {
      return { client_name: 'remote-mcp-oauth test', redirect_uris: ['http://127.0.0.1:9/callback'],
        grant_types: ['authorization_code', 'refresh_token'], response_types: ['code'],
        token_endpoint_auth_method: 'none', ...(scope ? { scope } : {}) };
    },
    clientInformation: () => state.client,
    saveClientInformation: (info) => { state.client = info; },
    tokens: () => state.tokens,
    saveTokens: (tokens) => { state.tokens = tokens; state.saved = (state.saved ?? 0) + 1; },
    saveCodeVerifier: (v) => { state.verifier = v; },
    codeVerifier: () => state.verifier,
    async redirectToAuthorization(url) {
      const res = await consent(url, key);
      assert.equal(res.status, 302, res.html);
      state.codes.push(res.location.searchParams.get('code'));
      state.redirect = res.location;
    },
  };
}

/** An SDK client signed in through the whole flow: {client, transport, provider, call}. */
async function connectOAuth(sdk, url, key, options = {}) {
  const mod = sdk === 'v1'
    ? { ...(await import('@modelcontextprotocol/sdk/client/index.js')),
        ...(await import('@modelcontextprotocol/sdk/client/streamableHttp.js')),
        ...(await import('@modelcontextprotocol/sdk/client/auth.js')) }
    : await import('@modelcontextprotocol/client');
  const auth = provider(key, options);
  const make = () => new mod.StreamableHTTPClientTransport(new URL(`${url}/mcp`), { authProvider: auth });
  let transport = make();
  let client = new mod.Client({ name: `oauth-${sdk}`, version: '0.0.0' }, sdk === 'v1' ? {} : { versionNegotiation: { mode: 'legacy' } });
  try {
    await client.connect(transport);
    assert.fail('the first connect should need authorization');
  } catch (e) {
    assert.ok(auth.kept.codes.length === 1, `the SDK went to the consent page: ${e.message}`);
  }
  // v1 takes the code; v2 the redirect's parameters, and checks `iss` (RFC 9207) among them.
  await (sdk === 'v1' ? transport.finishAuth(auth.kept.codes[0])
    : transport.finishAuth(auth.kept.redirect.searchParams));
  transport = make();
  client = new mod.Client({ name: `oauth-${sdk}`, version: '0.0.0' }, sdk === 'v1' ? {} : { versionNegotiation: { mode: 'legacy' } });
  await client.connect(transport);
  return {
    client, transport, provider: auth,
    call: (params) => (sdk === 'v1' ? client.callTool(params, undefined, { timeout: 60_000 })
      : client.callTool(params, { timeout: 60_000 })),
    close: () => client.close(),
  };
}

async function rawPost(url, pathName, { token, body, form, headers = {} } = {}) {
  const h = { ...headers };
  if (token) h.Authorization = `Bearer ${token}`;
  let payload;
  if (form) { h['Content-Type'] = 'application/x-www-form-urlencoded'; payload = new URLSearchParams(form).toString(); }
  if (body) { h['Content-Type'] = 'application/json'; h.Accept = 'application/json, text/event-stream'; payload = JSON.stringify(body); }
  const res = await fetch(`${url}${pathName}`, { method: 'POST', headers: h, body: payload, redirect: 'manual' });
  const text = await res.text();
  let json;
  try { json = JSON.parse(text); } catch { json = undefined; }
  return { status: res.status, headers: res.headers, text, json };
}
const INIT = { jsonrpc: '2.0', id: 1, method: 'initialize',
  params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'raw', version: '0' } } };

/** A grant made by hand: registration, consent, code; returns {client_id, code, verifier, redirect}. */
async function handGrant(url, key, { scope = '' } = {}) {
  const redirect = 'http://127.0.0.1:9/cb';
  const reg = await rawPost(url, '/register', { body: { redirect_uris: [redirect], client_name: 'by hand' } });
  assert.equal(reg.status, 201, reg.text);
  const verifier = crypto.randomBytes(40).toString('base64url');
  const challenge = crypto.createHash('sha256').update(verifier).digest('base64url');
  const authUrl = new URL(`${url}/authorize`);
  for (const [k, v] of Object.entries({ response_type: 'code', client_id: reg.json.client_id, redirect_uri: redirect,
    code_challenge: challenge, code_challenge_method: 'S256', state: 'st8', resource: `${url}/mcp`, scope })) {
    authUrl.searchParams.set(k, v);
  }
  const res = await consent(authUrl, key);
  assert.equal(res.status, 302, res.html);
  assert.equal(res.location.searchParams.get('state'), 'st8');
  return { client_id: reg.json.client_id, code: res.location.searchParams.get('code'), verifier, redirect, authUrl };
}
const exchange = (url, g, extra = {}) => rawPost(url, '/token', { form: { grant_type: 'authorization_code', code: g.code,
  redirect_uri: g.redirect, client_id: g.client_id, code_verifier: g.verifier, resource: `${url}/mcp`, ...extra } });

// ---------------------------------------------------------------------------
// Tests
// ---------------------------------------------------------------------------
const KEY = createKey(DATA);
let memd = await startMemd({ args: ['--oauth-access-seconds', '3'] });

await r.test('discovery: a 401 names the resource metadata, which names the authorization server', async () => {
  const none = await rawPost(memd.url, '/mcp', { body: INIT });
  assert.equal(none.status, 401);
  const challenge = none.headers.get('www-authenticate');
  const meta = challenge.match(/resource_metadata="([^"]+)"/)?.[1];
  assert.equal(meta, `${memd.url}/.well-known/oauth-protected-resource/mcp`);
  const prm = await (await fetch(meta)).json();
  assert.equal(prm.resource, `${memd.url}/mcp`);
  assert.deepEqual(prm.authorization_servers, [memd.url]);
  const as = await (await fetch(`${memd.url}/.well-known/oauth-authorization-server`)).json();
  assert.equal(as.issuer, memd.url);
  assert.deepEqual(as.code_challenge_methods_supported, ['S256']);
  assert.equal(as.registration_endpoint, `${memd.url}/register`);
});

let v1;
await r.test('v1 and v2 SDK clients sign in through the whole flow and call the tools', async () => {
  v1 = await connectOAuth('v1', memd.url, KEY);
  const v2 = await connectOAuth('v2', memd.url, KEY);
  r.onCleanup(async () => { for (const c of [v1, v2]) try { await c.close(); } catch { /* */ } });
  for (const c of [v1, v2]) {
    assert.match(c.provider.kept.tokens.access_token, /^tmcra_oat_/);
    const { tools } = await c.client.listTools();
    assert.ok(tools.some((t) => t.name === 'tmcra_recall'));
  }
  const ingest = await v1.call({ name: 'tmcra_ingest', arguments: { scope: 'team', session_id: 'o1',
    messages: [{ message_id: 'o1', role: 'user', content: 'The OAuth flow test stores this line about zebras.' }] } });
  assert.ok(!ingest.isError, JSON.stringify(ingest));
  const waited = await v2.call({ name: 'tmcra_wait_job', arguments: { job_id: ingest.structuredContent.job_id, timeout_seconds: 30 } });
  assert.equal(waited.structuredContent.status, 'succeeded');
  const recalled = await v2.call({ name: 'tmcra_recall', arguments: { scope: 'team', session_id: 'o', query: 'zebras OAuth flow' } });
  assert.match(JSON.stringify(recalled.structuredContent), /zebras/);
  // The same recall and job through tmcra-mcp over stdio, on the same store: the same receipts.
  const stdio = await connectV1({ bin: bins.server, label: 'oauth-stdio',
    env: remoteEnv({ url: memd.url, key: KEY, ca: certs.ca, extra: { TMCRA_DATA_DIR: path.join(TMP, 'client') } }) });
  try {
    const viaStdio = await stdio.client.callTool({ name: 'tmcra_recall', arguments: { scope: 'team', session_id: 'o', query: 'zebras OAuth flow' } });
    const masked = (v) => JSON.parse(JSON.stringify(v).replace(/"query_id":"[^"]*"/g, '"query_id":"-"'));
    assert.deepEqual(masked(recalled.structuredContent), masked(viaStdio.structuredContent));
    const jobStdio = await stdio.client.callTool({ name: 'tmcra_wait_job', arguments: { job_id: ingest.structuredContent.job_id, timeout_seconds: 30 } });
    assert.deepEqual(waited.structuredContent, jobStdio.structuredContent);
  } finally {
    await stdio.client.close();
  }
});

await r.test('an expired access token is refused, and the SDK refreshes it (the refresh token rotated)', async () => {
  const old = v1.provider.kept.tokens;
  await sleep(3500);
  const expired = await rawPost(memd.url, '/mcp', { token: old.access_token, body: INIT });
  assert.equal(expired.status, 401);
  assert.match(expired.headers.get('www-authenticate'), /error="invalid_token"/);
  const res = await v1.call({ name: 'tmcra_status', arguments: {} });
  assert.ok(!res.isError);
  const fresh = v1.provider.kept.tokens;
  assert.notEqual(fresh.access_token, old.access_token);
  assert.notEqual(fresh.refresh_token, old.refresh_token, 'the refresh token was rotated');
  // The old refresh token, used again at once (as two refreshes racing): refused, the grant kept.
  const reuseOld = () => rawPost(memd.url, '/token', { form: { grant_type: 'refresh_token',
    refresh_token: old.refresh_token, client_id: v1.provider.kept.client.client_id } });
  const soon = await reuseOld();
  assert.equal(soon.status, 400);
  assert.equal(soon.json.error, 'invalid_grant');
  const still = await rawPost(memd.url, '/mcp', { token: v1.provider.kept.tokens.access_token, body: INIT });
  assert.equal(still.status, 200, 'a reuse within the grace keeps the grant');
  // Later (past the 10 s grace): refused, and the grant's tokens with it.
  await sleep(10_500);
  const later = await reuseOld();
  assert.equal(later.status, 400);
  const after = await rawPost(memd.url, '/mcp', { token: v1.provider.kept.tokens.access_token, body: INIT });
  assert.equal(after.status, 401, 'a reused refresh token revokes its grant');
}, { timeoutMs: 60_000 });

await r.test('refused: a replayed code (revoking its tokens), a wrong PKCE verifier, an unregistered redirect', async () => {
  const g = await handGrant(memd.url, KEY);
  const first = await exchange(memd.url, g);
  assert.equal(first.status, 200, first.text);
  assert.equal(first.headers.get('cache-control'), 'no-store');
  const ok = await rawPost(memd.url, '/mcp', { token: first.json.access_token, body: INIT });
  assert.equal(ok.status, 200);
  const replay = await exchange(memd.url, g);
  assert.equal(replay.status, 400);
  assert.equal(replay.json.error, 'invalid_grant');
  const revoked = await rawPost(memd.url, '/mcp', { token: first.json.access_token, body: INIT });
  assert.equal(revoked.status, 401, 'the replay revoked the tokens of the code');
  const g2 = await handGrant(memd.url, KEY);
  const pkce = await exchange(memd.url, g2, { code_verifier: crypto.randomBytes(40).toString('base64url') });
  assert.equal(pkce.status, 400);
  assert.equal(pkce.json.error, 'invalid_grant');
  const bad = new URL(g2.authUrl);
  bad.searchParams.set('redirect_uri', 'https://attacker.example/cb');
  const page = await fetch(bad, { redirect: 'manual' });
  assert.equal(page.status, 400, 'an unregistered redirect URI is an error page, never a redirect');
  assert.equal(page.headers.get('location'), null);
  // Any other problem is an error page too: nothing is redirected before the user answers.
  for (const [name, value] of [['code_challenge', null], ['scope', 'memory:everything'], ['response_type', 'token']]) {
    const wrong = new URL(g2.authUrl);
    if (value === null) wrong.searchParams.delete(name); else wrong.searchParams.set(name, value);
    const res = await fetch(wrong, { redirect: 'manual' });
    assert.equal(res.status, 400, `${name}: an error page`);
    assert.equal(res.headers.get('location'), null);
  }
  // A loopback redirect URI may name another port (RFC 8252, section 7.3).
  const port = new URL(g2.authUrl);
  port.searchParams.set('redirect_uri', 'http://127.0.0.1:7777/cb');
  const otherPort = await consent(port, KEY);
  assert.equal(otherPort.status, 302);
  assert.equal(otherPort.location.origin, 'http://127.0.0.1:7777');
  const tampered = await consent(g2.authUrl, KEY, { tamper: (f) => { f.redirect_uri = 'http://127.0.0.1:9/other'; } });
  assert.equal(tampered.status, 400, 'a changed consent form is refused');
  const wrongKey = await consent(g2.authUrl, 'tmcra_000000000000000000000000.' + '0'.repeat(64));
  assert.equal(wrongKey.status, 200);
  assert.match(wrongKey.html, /not valid/);
  const denied = await consent(g2.authUrl, KEY, { decision: 'deny' });
  assert.equal(denied.location.searchParams.get('error'), 'access_denied');
});

await r.test('refused: a revoked token; a token on a memory scope it does not grant', async () => {
  const g = await handGrant(memd.url, KEY, { scope: 'memory:read memory:write scope:team' });
  const tokens = (await exchange(memd.url, g)).json;
  assert.equal(tokens.scope, 'memory:read memory:write scope:team');
  const session = await rawPost(memd.url, '/mcp', { token: tokens.access_token, body: INIT });
  const sid = session.headers.get('mcp-session-id');
  const call = (scope) => rawPost(memd.url, '/mcp', { token: tokens.access_token, headers: { 'Mcp-Session-Id': sid },
    body: { jsonrpc: '2.0', id: 2, method: 'tools/call', params: { name: 'tmcra_recall', arguments: { scope, session_id: 's', query: 'zebras' } } } });
  const own = await call('team');
  assert.equal(own.json.result.isError, undefined, own.text.slice(0, 300));
  const other = await call('other');
  assert.equal(other.json.result.isError, true);
  assert.match(other.json.result.content[0].text, /forbidden \(HTTP 403\): the API key is not valid for this scope/);
  const rev = await rawPost(memd.url, '/revoke', { form: { token: tokens.access_token } });
  assert.equal(rev.status, 200);
  const after = await call('team');
  assert.equal(after.status, 401, 'revocation is immediate');
  // A key's tokens end with the key.
  const doomed = createKey(DATA);
  const g2 = await handGrant(memd.url, doomed);
  const t2 = (await exchange(memd.url, g2)).json;
  assert.equal((await rawPost(memd.url, '/mcp', { token: t2.access_token, body: INIT })).status, 200);
  const out = spawnSync(memdBin(), ['keys', 'revoke', doomed.slice(6, 30), '--data-dir', DATA], { encoding: 'utf8' });
  assert.equal(out.status, 0, out.stderr);
  assert.equal((await rawPost(memd.url, '/mcp', { token: t2.access_token, body: INIT })).status, 401);
  // A REST route takes keys only.
  const rest = await fetch(`${memd.url}/v1/jobs/job_x`, { headers: { Authorization: `Bearer ${t2.access_token}` } });
  assert.equal(rest.status, 401);
});

await r.test('refused: a token for another resource (the same store behind another public URL)', async () => {
  const g = await handGrant(memd.url, KEY);
  const tokens = (await exchange(memd.url, g)).json;
  const port = memd.port;
  await memd.stop();
  memd = await startMemd({ port, args: ['--public-url', 'https://memory.example.test'] });
  const res = await rawPost(`https://127.0.0.1:${port}`, '/mcp', { token: tokens.access_token, body: INIT,
    headers: {} });
  // The Host check answers first here (127.0.0.1 is a loopback name, so it passes): the token's
  // resource is https://127.0.0.1:<port>/mcp, this server's is https://memory.example.test/mcp.
  assert.equal(res.status, 401, res.text);
  const meta = await (await fetch(`https://127.0.0.1:${port}/.well-known/oauth-protected-resource`)).json();
  assert.equal(meta.resource, 'https://memory.example.test/mcp');
});

await r.test('registration is bounded: bad metadata refused', async () => {
  const bad = await rawPost(memd.url, '/register', { body: { redirect_uris: ['javascript:alert(1)'] } });
  assert.equal(bad.status, 400);
  const frag = await rawPost(memd.url, '/register', { body: { redirect_uris: ['https://a.example/cb#x'] } });
  assert.equal(frag.status, 400);
  const none = await rawPost(memd.url, '/register', { body: {} });
  assert.equal(none.status, 400);
  const userinfo = await rawPost(memd.url, '/register', { body: { redirect_uris: ['http://localhost:1@evil.example/cb'] } });
  assert.equal(userinfo.status, 400, 'no userinfo in a redirect URI');
});

await r.finish();
