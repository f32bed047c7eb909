#!/usr/bin/env node
// run_all.js — run every peer test script in sequence (convenience for `npm test`).
//
//   node run_all.js <tmcra-mcp> <tmcra-mcp-testserver>
import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { HERE } from './lib.mjs';

const SCRIPTS = ['sdk_v1.mjs', 'sdk_v2_auto.mjs', 'elicitation.mjs', 'cancel.mjs', 'inspector.mjs', 'claude_code.mjs'];
const bins = process.argv.slice(2);
if (bins.length !== 2) {
  console.error('usage: node run_all.js <tmcra-mcp> <tmcra-mcp-testserver>');
  process.exit(2);
}
let passed = 0;
let failed = 0;
const bad = [];
for (const s of SCRIPTS) {
  console.log(`\n=== ${s} ===`);
  const res = spawnSync(process.execPath, [path.join(HERE, s), ...bins], { cwd: HERE, encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] });
  process.stdout.write(res.stdout ?? '');
  const m = /^(\d+) passed, (\d+) failed$/m.exec(res.stdout ?? '');
  if (m) { passed += Number(m[1]); failed += Number(m[2]); } else { failed += 1; }
  if (res.status !== 0) bad.push(s);
}
console.log(`\nscripts failing: ${bad.length ? bad.join(', ') : 'none'}`);
console.log(`${passed} passed, ${failed} failed`);
process.exit(bad.length || failed ? 1 : 0);
