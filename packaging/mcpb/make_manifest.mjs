#!/usr/bin/env node
// make_manifest.mjs — writes the MCPB manifest for a built tmcra-mcp: its version and its tools
// are asked of the binary itself (initialize, tools/list), so the bundle cannot list a tool the
// server lacks or carry another version than the one inside it; the platforms it declares, and
// the CPU, glibc and libraries its description names, are read from the binary's ELF headers
// (elf_info.mjs), not from the machine that packs it.
//
//   node make_manifest.mjs <tmcra-mcp> <manifest.json>
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import readline from 'node:readline';
import { debianPackage, inspectBinary } from './elf_info.mjs';

const [bin, out] = process.argv.slice(2);
if (!bin || !out) {
  console.error('usage: node make_manifest.mjs <tmcra-mcp> <manifest.json>');
  process.exit(2);
}

// Ask the server in a throw-away home, with none of the caller's TMCRA settings: it runs its
// embedded default and touches nothing of the user's.
async function ask(binary) {
  const home = fs.mkdtempSync(path.join(os.tmpdir(), 'tmcra-mcpb-'));
  const env = { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: home, TMCRA_DATA_DIR: path.join(home, 'data'), TMCRA_LOG_LEVEL: 'warn' };
  const child = spawn(binary, [], { env, stdio: ['pipe', 'pipe', 'inherit'] });
  const lines = readline.createInterface({ input: child.stdout });
  const waiting = new Map();
  const failAll = (error) => {
    for (const settle of waiting.values()) settle({ error });
    waiting.clear();
  };
  const exited = new Promise((resolve) => child.on('exit', resolve));
  child.on('exit', (code, signal) => failAll({ message: `${binary} exited (${signal ?? code})` }));
  child.on('error', (e) => failAll({ message: `${binary}: ${e.message}` }));
  lines.on('line', (line) => {
    let msg;
    try {
      msg = JSON.parse(line);
    } catch {
      failAll({ message: `not JSON on stdout: ${line.slice(0, 200)}` });
      return;
    }
    waiting.get(msg.id)?.(msg);
  });
  const call = (id, method, params) => new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${method}: no answer in 20 s`)), 20_000);
    waiting.set(id, (msg) => {
      clearTimeout(timer);
      waiting.delete(id);
      if (msg.error) reject(new Error(`${method}: ${JSON.stringify(msg.error)}`));
      else resolve(msg.result);
    });
    child.stdin.write(`${JSON.stringify({ jsonrpc: '2.0', id, method, params })}\n`);
  });
  try {
    const init = await call(1, 'initialize', {
      protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'tmcra-mcpb', version: '0' },
    });
    child.stdin.write(`${JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' })}\n`);
    const tools = [];
    let cursor;
    let id = 2;
    const seen = new Set();
    do {
      const page = await call(id++, 'tools/list', cursor ? { cursor } : {});
      tools.push(...page.tools);
      cursor = page.nextCursor;
      if (cursor && seen.has(cursor)) throw new Error(`tools/list repeats the cursor ${cursor}`);
      seen.add(cursor);
    } while (cursor);
    return { info: init.serverInfo, tools };
  } finally {
    child.stdin.end();
    let timer;
    await Promise.race([exited, new Promise((resolve) => {
      timer = setTimeout(() => { child.kill('SIGKILL'); resolve(); }, 5000);
    })]);
    clearTimeout(timer);
    fs.rmSync(home, { recursive: true, force: true });
  }
}

// What the binary needs, in words for the description. Every library it names must be one that
// Debian 12 ships under that soname (debianPackage fails otherwise), which is what makes "built
// on Debian 12" a checked claim: a build elsewhere names other sonames (libfmt.so.10, ...).
const elf = inspectBinary(path.resolve(bin));
const cpu = `${elf.cpu} (${elf.debianArch})`;
const glibc = elf.glibc ? `glibc ${elf.glibc} or newer` : 'glibc';
const byPackage = new Map();
for (const soname of elf.needed) {
  const pkg = debianPackage(soname);
  byPackage.set(pkg, [...(byPackage.get(pkg) ?? []), soname]);
}
// libstdc++6 also has a floor of its own: the newest GLIBCXX_ symbol version referenced.
if (elf.glibcxx && byPackage.has('libstdc++6')) byPackage.get('libstdc++6').push(`GLIBCXX_${elf.glibcxx}`);
const libraries = [...byPackage].map(([pkg, names]) => `${pkg} (${names.join(', ')})`);
const listed = libraries.length > 1 ? `${libraries.slice(0, -1).join(', ')} and ${libraries.at(-1)}` : libraries[0];
const requirements = [
  `The server inside is a Linux ${cpu} executable built on Debian 12 (bookworm).`,
  `It needs ${glibc} and these libraries as Debian 12 packages them: ${listed}.`,
  ...(elf.loadsLibcurl
    ? [`A remote memory also needs ${debianPackage(elf.libcurlSoname)} (${elf.libcurlSoname}), loaded only then.`]
    : []),
].join(' ');

const { info, tools } = await ask(path.resolve(bin));
const manifest = {
  manifest_version: '0.3',
  name: 'tmcra-mcp',
  display_name: 'TMCRA memory',
  version: info.version,
  description: 'Durable memory for AI agents: recall before answering, commit each turn; every write ' +
    `goes through a local outbox. For ${cpu} Linux only: built on Debian 12, needs ${glibc}.`,
  long_description: [
    'tmcra-mcp is a native memory server. With no account it keeps memory in a local SQLite file',
    '(the memory folder below); with a Memory API key it talks HTTPS to TMCRA\'s hosted Memory API',
    'or a team\'s tmcra-memd. Every write is kept in a local outbox until the memory has it, so',
    'nothing the app was told is saved is lost or written twice.',
    requirements,
  ].join(' '),
  author: { name: 'The tmcra-mcp authors' },
  license: 'Apache-2.0',
  keywords: ['memory', 'mcp', 'sqlite', 'agents'],
  server: {
    type: 'binary',
    entry_point: 'server/tmcra-mcp',
    mcp_config: {
      command: '${__dirname}/server/tmcra-mcp',
      args: [],
      // Empty values are unset for tmcra-mcp, so the optional fields' empty defaults mean
      // "embedded memory" and "the default endpoint". The key goes through env, never args.
      env: {
        TMCRA_DATA_DIR: '${user_config.data_dir}',
        TMCRA_API_KEY: '${user_config.api_key}',
        TMCRA_BASE_URL: '${user_config.base_url}',
        TMCRA_LOG_LEVEL: '${user_config.log_level}',
      },
    },
  },
  tools: tools.map((t) => ({ name: t.name, description: t.description })),
  tools_generated: false,
  compatibility: { platforms: [elf.platform] },
  user_config: {
    // No "${HOME}/..." default: hosts expand ${HOME} before they put the defaults in, so it
    // would stay literal (modelcontextprotocol/mcpb#251). Empty is tmcra-mcp's own default.
    data_dir: {
      type: 'directory',
      title: 'Memory folder',
      description: 'Where local memory is kept when no Memory API key is set. Empty: ~/.local/share/tmcra.',
      default: '',
      required: false,
    },
    api_key: {
      type: 'string',
      title: 'Memory API key',
      description: 'Leave empty for local memory. A key (tmcra_…) selects the remote Memory API.',
      sensitive: true,
      default: '',
      required: false,
    },
    base_url: {
      type: 'string',
      title: 'Memory API URL',
      description: 'HTTPS origin of the Memory API, e.g. a team\'s tmcra-memd. Empty: https://api.tmcra.com.',
      default: '',
      required: false,
    },
    log_level: {
      type: 'string',
      title: 'Log level',
      description: 'trace, debug, info, warn, error, critical or off (logs go to the app\'s MCP log).',
      default: 'info',
      required: false,
    },
  },
};
fs.writeFileSync(out, `${JSON.stringify(manifest, null, 2)}\n`);
console.error(`make_manifest: ${out}: tmcra-mcp ${info.version}, ${tools.length} tools, ` +
  `${elf.platform} ${elf.cpu}, ${glibc}, ${elf.needed.length} libraries`);
