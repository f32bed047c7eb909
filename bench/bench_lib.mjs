// Helpers shared by the Node benchmark drivers (lifecycle_latency.mjs, remote_latency.mjs).
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';

export function withTimeout(promise, ms, what) {
  let timer;
  const timeout = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} timed out after ${ms} ms`)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

export function summarize(samples) {
  const s = [...samples].sort((a, b) => a - b);
  const n = s.length;
  if (n === 0) return { n: 0 };
  const rank = (p) => s[Math.min(n - 1, Math.max(0, Math.ceil((p / 100) * n) - 1))];
  const median = n % 2 ? s[(n - 1) / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
  const mean = s.reduce((acc, v) => acc + v, 0) / n;
  return { n, p50: median, p90: rank(90), p99: rank(99), min: s[0], max: s[n - 1], mean };
}

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

export function runOr(cmd, args, fallback = null) {
  try {
    return execFileSync(cmd, args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'], timeout: 10_000 }).trim();
  } catch {
    return fallback;
  }
}

export function readFileOr(p, fallback = '') {
  try { return fs.readFileSync(p, 'utf8'); } catch { return fallback; }
}

export const f = (v, d = 2) => (v == null || Number.isNaN(v) ? 'n/a' : v.toFixed(d));

export function verdict(value, target, lowerIsBetter = true) {
  if (value == null || Number.isNaN(value)) return 'n/a';
  const met = lowerIsBetter ? value <= target : value >= target;
  if (met) return 'met';
  return lowerIsBetter ? `MISSED: ${f(value / target)}× the target`
    : `MISSED: ${f((value / target) * 100, 0)} % of the target`;
}
