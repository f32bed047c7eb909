#!/usr/bin/env node
// check_stdout.mjs — verify tap.mjs stdout logs: every line must be one JSON-RPC 2.0
// message object (newline-terminated, UTF-8, no banners or blank lines).
//
//   node check_stdout.mjs <logfile> [<logfile>...]
// Exit 0 when every file is pure; 1 otherwise (each problem is printed).
import { checkStdoutLog } from './lib.mjs';

const files = process.argv.slice(2);
if (files.length === 0) {
  console.error('usage: node check_stdout.mjs <tap stdout log> [...]');
  process.exit(2);
}
let bad = 0;
for (const f of files) {
  const { messages, problems } = checkStdoutLog(f);
  for (const p of problems) console.log(`${f}: ${p}`);
  console.log(`${f}: ${messages.length} JSON-RPC messages, ${problems.length} problems`);
  if (problems.length) bad += 1;
}
process.exit(bad ? 1 : 0);
