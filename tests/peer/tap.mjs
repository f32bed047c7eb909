#!/usr/bin/env node
// tap.mjs — transparent stdio wiretap for an MCP stdio server.
//
//   node tap.mjs <logfile> <bin> [args...]
//
// Spawns <bin> [args...] and forwards our stdin -> child stdin, child stdout ->
// our stdout and child stderr -> our stderr, byte for byte. Side files:
//   <logfile>            every byte the child wrote to stdout (raw, for purity checks)
//   <logfile>.stdin      every byte the client wrote to the child's stdin
//   <logfile>.exit.json  {code, signal, forwardedSignals, stdinEnded, ...} when the child exits
// If <logfile> contains "%p" it is replaced by the tap's pid (needed when a client
// spawns the same command line twice, e.g. the v2 SDK's server/discover probe sibling).
//
// EOF propagation: when our stdin ends, the child's stdin is closed. SIGTERM/SIGINT/
// SIGHUP are forwarded to the child. The tap exits when the child has exited and its
// stdout has drained, with the child's exit code (or re-raises the child's signal).
import { spawn } from 'node:child_process';
import fs from 'node:fs';

const [logArg, bin, ...args] = process.argv.slice(2);
if (!logArg || !bin) {
  process.stderr.write('usage: node tap.mjs <logfile> <bin> [args...]\n');
  process.exit(2);
}
const logPath = logArg.replaceAll('%p', String(process.pid));
const outFd = fs.openSync(logPath, 'w');
const inFd = fs.openSync(logPath + '.stdin', 'w');
const t0 = Date.now();
const info = {
  tapPid: process.pid, bin, args, childPid: null, code: null, signal: null,
  forwardedSignals: [], stdinEnded: false, stdinEndedAtMs: null, exitedAtMs: null,
  spawnError: null,
};
const writeInfo = () => {
  try { fs.writeFileSync(logPath + '.exit.json', JSON.stringify(info, null, 2) + '\n'); } catch { /* ignore */ }
};

const child = spawn(bin, args, { stdio: ['pipe', 'pipe', 'pipe'] });
info.childPid = child.pid ?? null;

let childGone = false;
let signalsBeforeSpawn = [];
for (const sig of ['SIGTERM', 'SIGINT', 'SIGHUP']) {
  process.on(sig, () => {
    info.forwardedSignals.push({ signal: sig, atMs: Date.now() - t0 });
    writeInfo();
    if (childGone) return;
    if (child.pid === undefined) { signalsBeforeSpawn.push(sig); return; }
    try { child.kill(sig); } catch { /* ignore */ }
  });
}
child.on('spawn', () => { for (const s of signalsBeforeSpawn) { try { child.kill(s); } catch { /* ignore */ } } });

// stdin: client -> child
process.stdin.on('data', (chunk) => {
  fs.writeSync(inFd, chunk);
  if (!childGone) child.stdin.write(chunk);
});
process.stdin.on('end', () => {
  info.stdinEnded = true;
  info.stdinEndedAtMs = Date.now() - t0;
  writeInfo();
  try { child.stdin.end(); } catch { /* ignore */ }
});
process.stdin.on('error', () => { try { child.stdin.end(); } catch { /* ignore */ } });
child.stdin.on('error', () => { /* EPIPE after child exit: ignore */ });

// stdout: child -> client (+ log)
child.stdout.on('data', (chunk) => {
  fs.writeSync(outFd, chunk);
  try { process.stdout.write(chunk); } catch { /* ignore */ }
});
process.stdout.on('error', () => { /* client went away */ });
// stderr: child -> our stderr, unchanged
child.stderr.on('data', (chunk) => { try { process.stderr.write(chunk); } catch { /* ignore */ } });
process.stderr.on('error', () => { /* ignore */ });

child.on('error', (err) => {
  info.spawnError = String(err && err.message || err);
  childGone = true;
  writeInfo();
  process.stderr.write(`tap: cannot spawn ${bin}: ${info.spawnError}\n`);
  process.exit(127);
});

// 'close' fires after the child exited AND its stdio streams were drained.
child.on('close', (code, signal) => {
  childGone = true;
  info.code = code;
  info.signal = signal;
  info.exitedAtMs = Date.now() - t0;
  writeInfo();
  fs.closeSync(outFd);
  fs.closeSync(inFd);
  const finish = () => {
    if (signal) {
      // Re-raise the child's signal so our parent sees the same termination.
      for (const s of ['SIGTERM', 'SIGINT', 'SIGHUP']) process.removeAllListeners(s);
      try { process.kill(process.pid, signal); } catch { /* ignore */ }
      setTimeout(() => process.exit(128), 200).unref();
    } else {
      process.exit(code ?? 0);
    }
  };
  // Make sure everything we forwarded to stdout has been handed to the OS.
  if (process.stdout.writableLength > 0) {
    process.stdout.once('drain', finish);
    setTimeout(finish, 2000).unref();
  } else {
    finish();
  }
});
