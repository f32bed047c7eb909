#!/usr/bin/env node
// make_server_json.mjs — writes the MCP Registry's server.json for a packed bundle: one package
// of registryType "mcpb" whose identifier is the bundle's download URL (the release URL prefix
// and the bundle's file name) and whose fileSha256 is the SHA-256 of the bundle's bytes. The
// version, title and environment variables come from the bundle's manifest.json, whose version
// was asked of the binary (make_manifest.mjs). The result is checked with check_server_json.mjs
// (the registry's 2025-12-11 rules) before it is written; any problem is an error.
//
//   node make_server_json.mjs --manifest M --bundle B --out server.json
//        [--registry-name NAME] [--release-url PREFIX] [--repository URL] [--website-url URL]
//
// NAME is the server's registry name, reverse-DNS with one slash: io.github.<user>/tmcra-mcp
// (published after `mcp-publisher login github` as <user>) or <reversed domain>/tmcra-mcp.
// PREFIX is where the release's assets are downloaded from, e.g.
// https://github.com/<owner>/<repo>/releases/download/v0.1.0/ (the registry takes GitHub and
// GitLab release assets only). Both default to placeholders, with a warning: the project has
// no public release yet. The repository defaults to the one the release URL names.
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { SCHEMA_URL, checkServerJson } from './check_server_json.mjs';

export const PLACEHOLDER_NAME = 'io.github.OWNER/tmcra-mcp';
export const placeholderReleaseUrl = (version) => `https://github.com/OWNER/tmcra-mcp/releases/download/v${version}/`;
// At most 100 characters (the schema's limit); the manifest's own description is longer.
const DESCRIPTION = 'Durable memory for AI agents: recall before answering, commit each turn, no write lost.';

const { values: opt } = parseArgs({
  options: {
    manifest: { type: 'string' },
    bundle: { type: 'string' },
    out: { type: 'string' },
    'registry-name': { type: 'string' },
    'release-url': { type: 'string' },
    repository: { type: 'string' },
    'website-url': { type: 'string' },
  },
});
if (!opt.manifest || !opt.bundle || !opt.out) {
  console.error('usage: node make_server_json.mjs --manifest M --bundle B --out server.json ' +
    '[--registry-name NAME] [--release-url PREFIX] [--repository URL] [--website-url URL]');
  process.exit(2);
}

const manifest = JSON.parse(fs.readFileSync(opt.manifest, 'utf8'));
const version = manifest.version;
const name = opt['registry-name'] || PLACEHOLDER_NAME;
let prefix = opt['release-url'] || placeholderReleaseUrl(version);
if (!prefix.endsWith('/')) prefix += '/';
for (const [what, value, flag] of [['registry name', name, '--registry-name'], ['release URL', prefix, '--release-url']]) {
  if (value.includes('OWNER')) console.error(`make_server_json: the ${what} is a placeholder (${value}): set ${flag} before publishing`);
}

// The repository the release URL belongs to (GitHub: /owner/repo/releases/...; GitLab: the
// project path before /-/), unless one is given.
function repositoryOf(url) {
  const u = new URL(url);
  const host = u.host.toLowerCase();
  if (host === 'github.com' || host === 'www.github.com') {
    const m = /^\/([^/]+)\/([^/]+)\/releases\//.exec(u.pathname);
    return m ? { url: `https://github.com/${m[1]}/${m[2]}`, source: 'github' } : undefined;
  }
  if (host === 'gitlab.com' || host === 'www.gitlab.com') {
    const m = /^\/(.+?)\/-\//.exec(u.pathname);
    return m ? { url: `https://gitlab.com/${m[1]}`, source: 'gitlab' } : undefined;
  }
  return undefined;
}
const repository = opt.repository
  ? { url: opt.repository.replace(/\/$/, ''), source: new URL(opt.repository).host.replace(/^www\./, '').split('.')[0] }
  : repositoryOf(prefix);

// The settings form's fields, as the environment variables the manifest passes them in.
const formats = { directory: 'filepath', file: 'filepath', number: 'number', boolean: 'boolean' };
const environmentVariables = Object.entries(manifest.server.mcp_config.env ?? {}).map(([envName, value]) => {
  const key = /^\$\{user_config\.([A-Za-z0-9_]+)\}$/.exec(value)?.[1];
  const field = key ? manifest.user_config?.[key] : undefined;
  if (!field) throw new Error(`manifest: ${envName}=${value} names no user_config field`);
  return {
    name: envName,
    description: field.description,
    isRequired: field.required === true,
    isSecret: field.sensitive === true,
    format: formats[field.type] ?? 'string',
    ...(field.default !== undefined && field.default !== '' ? { default: String(field.default) } : {}),
  };
});

const serverJson = {
  $schema: SCHEMA_URL,
  name,
  title: manifest.display_name,
  description: DESCRIPTION,
  version,
  ...(repository ? { repository } : {}),
  ...(opt['website-url'] ? { websiteUrl: opt['website-url'] } : {}),
  packages: [{
    registryType: 'mcpb',
    identifier: prefix + path.basename(opt.bundle),
    version,
    fileSha256: crypto.createHash('sha256').update(fs.readFileSync(opt.bundle)).digest('hex'),
    transport: { type: 'stdio' },
    environmentVariables,
  }],
};

const problems = checkServerJson(serverJson, { bundle: opt.bundle });
if (problems.length) {
  for (const p of problems) console.error(`make_server_json: ${p}`);
  process.exit(1);
}
fs.writeFileSync(opt.out, `${JSON.stringify(serverJson, null, 2)}\n`);
console.error(`make_server_json: ${opt.out}: ${name} ${version}, ${serverJson.packages[0].identifier}`);
