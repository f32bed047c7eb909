#!/usr/bin/env node
// check_server_json.mjs — checks the server.json that make_server_json.mjs writes for the MCP
// Registry against the registry's rules, written down here from its documentation and source
// (modelcontextprotocol/registry) so that no third-party schema file is committed and nothing is
// downloaded. The rules are those of the current released server.json schema, 2025-12-11
// ($schema https://static.modelcontextprotocol.io/schemas/2025-12-11/server.schema.json, JSON
// Schema draft-07; the registry keeps a copy in internal/validators/schemas/2025-12-11.json, and
// docs/reference/server-json/CHANGELOG.md lists it as the newest dated release), plus the extra
// checks the official registry runs when publishing. Where each rule comes from:
//
//   [schema]    the 2025-12-11 schema itself (ServerDetail, Package, Repository, Input, ...)
//   [semantic]  internal/validators/validators.go: the name's parts, versions that are ranges,
//               repository and websiteUrl URLs, no spaces in an identifier, stdio without url
//   [mcpb]      internal/validators/registries/mcpb.go and docs/modelcontextprotocol-io/
//               package-types.mdx ("MCPB Packages"): fileSha256 required, no registryBaseUrl,
//               an https release-asset URL on github.com or gitlab.com that contains "mcp"
//   [official]  docs/reference/server-json/official-registry-requirements.md: only the
//               publisher-provided key of _meta is kept, and it must fit in 4 KiB
//   [ours]      stricter than the registry, for this project's one-bundle file: unknown keys
//               are refused (they would be typos; the schema does not forbid them), there is
//               exactly one package, an mcpb one, with a stdio transport, and no remotes
//
// Not checked here (the registry does it at publish time, over the network): that the bundle's
// URL answers 200, and that the publisher owns the name's namespace (io.github.<user> needs a
// GitHub login as <user>; a domain namespace needs DNS or HTTP proof).
//
//   import { checkServerJson } from './check_server_json.mjs';   // -> [] or a list of problems
//   node check_server_json.mjs <server.json> [<bundle.mcpb>]      # exit 1 on any problem
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export const SCHEMA_VERSION = '2025-12-11';
export const SCHEMA_URL = `https://static.modelcontextprotocol.io/schemas/${SCHEMA_VERSION}/server.schema.json`;
export const PUBLISHER_META_KEY = 'io.modelcontextprotocol.registry/publisher-provided';

const TOP_KEYS = ['$schema', '_meta', 'name', 'title', 'description', 'version', 'websiteUrl',
  'repository', 'icons', 'packages', 'remotes'];
const PACKAGE_KEYS = ['registryType', 'registryBaseUrl', 'identifier', 'version', 'fileSha256',
  'runtimeHint', 'transport', 'runtimeArguments', 'packageArguments', 'environmentVariables'];
const INPUT_KEYS = ['name', 'description', 'isRequired', 'format', 'value', 'isSecret', 'default',
  'placeholder', 'choices', 'variables'];
const INPUT_FORMATS = ['string', 'number', 'boolean', 'filepath'];

const isObject = (v) => v !== null && typeof v === 'object' && !Array.isArray(v);
const isString = (v) => typeof v === 'string';

function parseUrl(s) {
  try {
    return new URL(s);
  } catch {
    return null;
  }
}

// [semantic] A version is one release, not "latest" and not a range: comparators (^ ~ >= <= > <
// =), hyphen ranges ("1.2.3 - 2.0.0"), alternatives ("1.2 || 1.3") or wildcards (1.x, 1.2.*).
const NUM = String.raw`v?\d+(?:\.\d+){0,3}(?:-[0-9A-Za-z.-]+)?`;
const RANGES = [
  new RegExp(String.raw`^\s*(?:\^|~|>=|<=|>|<|=)\s*${NUM}\s*$`),
  new RegExp(String.raw`^\s*${NUM}\s-\s*${NUM}\s*$`),
  new RegExp(String.raw`^\s*${NUM}\s*(?:\|\|\s*${NUM}\s*)+$`),
];
const WILDCARD = /^\s*(?:v?\d+|x|X|\*)(?:\.(?:\d+|x|X|\*)){1,2}(?:-[0-9A-Za-z.-]+)?\s*$/;
export function looksLikeRange(v) {
  const t = v.trim();
  if (t === '') return false;
  if (RANGES.some((re) => re.test(t))) return true;
  return WILDCARD.test(t) && /[xX*]/.test(t);
}

function checkVersion(where, v, problems, { required }) {
  if (v === undefined) {
    if (required) problems.push(`${where}: missing`);
    return;
  }
  if (!isString(v)) return problems.push(`${where}: not a string`);
  if (v.length < 1) problems.push(`${where}: empty`);  // [schema] minLength 1 for a package's; [ours] at the top
  if (v.length > 255) problems.push(`${where}: longer than 255 characters`);  // [schema]
  if (v === 'latest') problems.push(`${where}: "latest" is reserved, name one version`);  // [schema]/[semantic]
  else if (looksLikeRange(v)) problems.push(`${where}: ${JSON.stringify(v)} is a range, not one version`);  // [semantic]
}

function checkHttpsUrl(where, s, problems) {
  const u = isString(s) ? parseUrl(s) : null;
  if (!u) return problems.push(`${where}: not an absolute URL`);
  if (u.protocol !== 'https:') problems.push(`${where}: must use https`);
}

function unknownKeys(where, obj, allowed, problems) {
  for (const k of Object.keys(obj)) {
    if (!allowed.includes(k)) problems.push(`${where}: unknown key ${JSON.stringify(k)}`);  // [ours]
  }
}

// [schema] Input / KeyValueInput: name required; strings, booleans, a format from the list.
function checkInput(where, input, problems, { named }) {
  if (!isObject(input)) return problems.push(`${where}: not an object`);
  unknownKeys(where, input, INPUT_KEYS, problems);
  if (named && (!isString(input.name) || input.name === '')) problems.push(`${where}.name: missing`);
  for (const k of ['description', 'value', 'default', 'placeholder']) {
    if (input[k] !== undefined && !isString(input[k])) problems.push(`${where}.${k}: not a string`);
  }
  for (const k of ['isRequired', 'isSecret']) {
    if (input[k] !== undefined && typeof input[k] !== 'boolean') problems.push(`${where}.${k}: not a boolean`);
  }
  if (input.format !== undefined && !INPUT_FORMATS.includes(input.format)) {
    problems.push(`${where}.format: not one of ${INPUT_FORMATS.join(', ')}`);
  }
  if (input.choices !== undefined && (!Array.isArray(input.choices) || !input.choices.every(isString))) {
    problems.push(`${where}.choices: not a list of strings`);
  }
}

// [semantic] Namespace and name each start and end with a letter or digit; [schema] the whole
// matches ^[a-zA-Z0-9.-]+/[a-zA-Z0-9._-]+$, 3 to 200 characters.
const NAMESPACE = /^[a-zA-Z0-9](?:[a-zA-Z0-9.-]*[a-zA-Z0-9])?$/;
const NAME_PART = /^[a-zA-Z0-9](?:[a-zA-Z0-9._-]*[a-zA-Z0-9])?$/;
function checkName(name, problems) {
  if (name === undefined) return problems.push('name: missing');
  if (!isString(name)) return problems.push('name: not a string');
  if (name.length < 3 || name.length > 200) problems.push('name: must be 3 to 200 characters');
  const slashes = name.split('/').length - 1;
  if (slashes !== 1) return problems.push(`name: ${JSON.stringify(name)} must have exactly one "/" (namespace/name)`);
  const [namespace, part] = name.split('/');
  if (!NAMESPACE.test(namespace)) {
    problems.push(`name: namespace ${JSON.stringify(namespace)} must be letters, digits, dots and hyphens, starting and ending with a letter or digit`);
  } else if (!namespace.includes('.')) {
    // Reverse-DNS: io.github.<user> or a reversed domain (docs: namespacing, authentication).
    problems.push(`name: namespace ${JSON.stringify(namespace)} is not reverse-DNS (e.g. io.github.<user>)`);
  }
  if (!NAME_PART.test(part)) {
    problems.push(`name: ${JSON.stringify(part)} must be letters, digits, dots, underscores and hyphens, starting and ending with a letter or digit`);
  }
}

// [semantic] Repository URLs the registry accepts, by source.
const REPO_URL = {
  github: /^https?:\/\/(www\.)?github\.com\/[\w.-]+\/[\w.-]+\/?$/,
  gitlab: /^https?:\/\/(www\.)?gitlab\.com\/[\w.-]+(\/[\w.-]+)+\/?$/,
};
function checkRepository(repo, problems) {
  if (!isObject(repo)) return problems.push('repository: not an object');
  unknownKeys('repository', repo, ['url', 'source', 'id', 'subfolder'], problems);
  if (!isString(repo.url)) problems.push('repository.url: missing');  // [schema] required
  if (!isString(repo.source)) problems.push('repository.source: missing');  // [schema] required
  if (isString(repo.url) && isString(repo.source)) {
    const re = REPO_URL[repo.source];
    if (!re) problems.push(`repository.source: ${JSON.stringify(repo.source)} is neither github nor gitlab`);
    else if (!re.test(repo.url)) problems.push(`repository.url: ${repo.url} is not a ${repo.source} repository URL`);
  }
  if (repo.id !== undefined && !isString(repo.id)) problems.push('repository.id: not a string');
  if (repo.subfolder !== undefined) {
    const ok = isString(repo.subfolder) && /^[a-zA-Z0-9\-_./]+$/.test(repo.subfolder) &&
      !repo.subfolder.startsWith('/') && !repo.subfolder.endsWith('/') &&
      repo.subfolder.split('/').every((s) => s !== '' && s !== '.' && s !== '..');
    if (!ok) problems.push('repository.subfolder: not a clean relative path');
  }
}

// [mcpb] Where an MCPB bundle may be downloaded from: a release asset on GitHub or GitLab.
const GITHUB_ASSET = /^\/[a-zA-Z0-9](?:[a-zA-Z0-9-]{0,37}[a-zA-Z0-9])?\/[a-zA-Z0-9._-]+\/releases\/download\/[^/]+\/[^/]+$/;
const GITLAB_ASSET = [
  /^\/[a-zA-Z0-9._-]+(?:\/[a-zA-Z0-9._-]+)*\/-\/releases\/[^/]+\/downloads\/[^/]+$/,
  /^\/[a-zA-Z0-9._-]+(?:\/[a-zA-Z0-9._-]+)*\/-\/package_files\/[0-9]+\/download$/,
];
export function checkMcpbUrl(where, s, problems) {
  if (!isString(s) || s === '') return problems.push(`${where}: missing`);
  if (s.includes(' ')) problems.push(`${where}: contains a space`);  // [semantic]
  const u = parseUrl(s);
  if (!u) return problems.push(`${where}: not a URL`);
  if (u.protocol !== 'https:') problems.push(`${where}: must use https`);
  if (!s.toLowerCase().includes('mcp')) problems.push(`${where}: must contain "mcp"`);
  const host = u.host.toLowerCase();
  if (host === 'github.com' || host === 'www.github.com') {
    if (!GITHUB_ASSET.test(u.pathname)) problems.push(`${where}: not a GitHub release asset (/owner/repo/releases/download/tag/file)`);
  } else if (host === 'gitlab.com' || host === 'www.gitlab.com') {
    if (!GITLAB_ASSET.some((re) => re.test(u.pathname))) problems.push(`${where}: not a GitLab release asset`);
  } else {
    problems.push(`${where}: host ${host} is neither github.com nor gitlab.com`);
  }
}

function checkPackage(where, pkg, problems) {
  if (!isObject(pkg)) return problems.push(`${where}: not an object`);
  unknownKeys(where, pkg, PACKAGE_KEYS, problems);
  // [schema] registryType, identifier and transport are required.
  if (pkg.registryType !== 'mcpb') problems.push(`${where}.registryType: must be "mcpb"`);  // [ours]
  checkMcpbUrl(`${where}.identifier`, pkg.identifier, problems);
  // [schema] ^[a-f0-9]{64}$; [mcpb] required for an MCPB package.
  if (pkg.fileSha256 === undefined) problems.push(`${where}.fileSha256: missing (required for mcpb)`);
  else if (!isString(pkg.fileSha256) || !/^[a-f0-9]{64}$/.test(pkg.fileSha256)) {
    problems.push(`${where}.fileSha256: not 64 lowercase hex digits`);
  }
  if (pkg.registryBaseUrl !== undefined) problems.push(`${where}.registryBaseUrl: not allowed for mcpb (the identifier is the URL)`);  // [mcpb]
  checkVersion(`${where}.version`, pkg.version, problems, { required: false });  // optional for mcpb since 2025-10-17
  if (pkg.runtimeHint !== undefined && !isString(pkg.runtimeHint)) problems.push(`${where}.runtimeHint: not a string`);
  // [schema] LocalTransport; [ours] stdio only; [semantic] a stdio transport has no url.
  const t = pkg.transport;
  if (!isObject(t)) problems.push(`${where}.transport: missing`);
  else {
    if (t.type !== 'stdio') problems.push(`${where}.transport.type: must be "stdio"`);
    unknownKeys(`${where}.transport`, t, ['type'], problems);
  }
  for (const k of ['runtimeArguments', 'packageArguments']) {
    if (pkg[k] === undefined) continue;
    if (!Array.isArray(pkg[k])) problems.push(`${where}.${k}: not a list`);
    else problems.push(`${where}.${k}: tmcra-mcp takes no arguments`);  // [ours]
  }
  if (pkg.environmentVariables !== undefined) {
    if (!Array.isArray(pkg.environmentVariables)) problems.push(`${where}.environmentVariables: not a list`);
    else {
      const seen = new Set();
      pkg.environmentVariables.forEach((v, i) => {
        const at = `${where}.environmentVariables[${i}]`;
        checkInput(at, v, problems, { named: true });
        if (isObject(v) && isString(v.name)) {
          if (!/^[A-Z_][A-Z0-9_]*$/.test(v.name)) problems.push(`${at}.name: ${JSON.stringify(v.name)} is not an environment variable name`);  // [ours]
          if (seen.has(v.name)) problems.push(`${at}.name: ${v.name} listed twice`);  // [ours]
          seen.add(v.name);
        }
      });
    }
  }
}

// Every problem found, as "field: what is wrong"; [] when the document passes. With a bundle,
// also that fileSha256 is the SHA-256 of its bytes and the identifier ends in its file name.
export function checkServerJson(doc, { bundle } = {}) {
  const problems = [];
  if (!isObject(doc)) return ['the document is not a JSON object'];
  unknownKeys('(top level)', doc, TOP_KEYS, problems);
  // [schema] $schema is a URI; the registry refuses an empty one and warns of or refuses an
  // older one. We pin the current release.
  if (doc.$schema !== SCHEMA_URL) problems.push(`$schema: must be ${SCHEMA_URL}`);
  checkName(doc.name, problems);
  // [schema] description: required, 1 to 100 characters.
  if (!isString(doc.description)) problems.push('description: missing');
  else if (doc.description.length < 1 || doc.description.length > 100) {
    problems.push(`description: ${doc.description.length} characters, must be 1 to 100`);
  }
  // [schema] title: optional, 1 to 100 characters; [semantic] not only whitespace.
  if (doc.title !== undefined) {
    if (!isString(doc.title) || doc.title.length < 1 || doc.title.length > 100) problems.push('title: must be 1 to 100 characters');
    else if (doc.title.trim() === '') problems.push('title: only whitespace');
  }
  checkVersion('version', doc.version, problems, { required: true });
  if (doc.websiteUrl !== undefined) checkHttpsUrl('websiteUrl', doc.websiteUrl, problems);  // [semantic]
  if (doc.repository !== undefined) checkRepository(doc.repository, problems);
  if (doc.icons !== undefined) problems.push('icons: this file carries none');  // [ours]
  if (doc.remotes !== undefined) problems.push('remotes: tmcra-mcp is a local stdio server');  // [ours]
  if (!Array.isArray(doc.packages) || doc.packages.length !== 1) problems.push('packages: must hold exactly one (the bundle)');  // [ours]
  else checkPackage('packages[0]', doc.packages[0], problems);
  if (doc._meta !== undefined) {
    if (!isObject(doc._meta)) problems.push('_meta: not an object');
    else {
      unknownKeys('_meta', doc._meta, [PUBLISHER_META_KEY], problems);  // [official] others are dropped
      const p = doc._meta[PUBLISHER_META_KEY];
      if (p !== undefined && !isObject(p)) problems.push(`_meta.${PUBLISHER_META_KEY}: not an object`);
      else if (p !== undefined && Buffer.byteLength(JSON.stringify(p)) > 4096) problems.push(`_meta.${PUBLISHER_META_KEY}: over 4 KiB`);
    }
  }
  const pkg = Array.isArray(doc.packages) ? doc.packages[0] : undefined;
  if (bundle !== undefined && isObject(pkg)) {
    const sha = crypto.createHash('sha256').update(fs.readFileSync(bundle)).digest('hex');
    if (pkg.fileSha256 !== sha) problems.push(`packages[0].fileSha256: not the SHA-256 of ${bundle} (${sha})`);
    if (!isString(pkg.identifier) || !pkg.identifier.endsWith(`/${path.basename(bundle)}`)) {
      problems.push(`packages[0].identifier: does not end in /${path.basename(bundle)}`);
    }
  }
  return problems;
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const [file, bundle] = process.argv.slice(2);
  if (!file) {
    console.error('usage: node check_server_json.mjs <server.json> [<bundle.mcpb>]');
    process.exit(2);
  }
  let doc;
  try {
    doc = JSON.parse(fs.readFileSync(file, 'utf8'));
  } catch (e) {
    console.error(`check_server_json: ${file}: ${e.message}`);
    process.exit(1);
  }
  const problems = checkServerJson(doc, { bundle });
  for (const p of problems) console.error(`check_server_json: ${file}: ${p}`);
  if (problems.length) process.exit(1);
  console.error(`check_server_json: ${file}: passes the MCP Registry's ${SCHEMA_VERSION} rules`);
}
