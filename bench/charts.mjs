// Draws the charts of docs/benchmarks.md from bench/results.json: one SVG of grouped horizontal
// bars per entry, values printed on the bars. Plain Node (no packages); the same input gives the
// same bytes, so scripts/check_docs.sh can regenerate them and compare.
//
// Usage: node bench/charts.mjs [--out DIR]   (default: docs/benchmarks)
import { readFileSync, writeFileSync, mkdirSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const outArg = process.argv.indexOf("--out");
const outDir = outArg > 0 ? process.argv[outArg + 1] : join(root, "docs", "benchmarks");
const results = JSON.parse(readFileSync(join(root, "bench", "results.json"), "utf8"));
const colors = ["#9e9e9e", "#1f6feb", "#d9822b", "#2da44e"];

const escape = (s) => String(s).replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");
const format = (v) => (v >= 100 ? v.toFixed(0) : v >= 10 ? v.toFixed(1) : String(+v.toFixed(3)));

function chart(spec) {
  const labelWidth = 150, plotWidth = 420, barHeight = 16, gap = 10, top = 40;
  const n = spec.series.length;
  const groupHeight = n * barHeight + gap;
  const legendTop = top + spec.rows.length * groupHeight + 8;
  const height = legendTop + n * 18 + 10;
  const width = labelWidth + plotWidth + 70;
  const all = spec.rows.flatMap((r) => r.values).filter((v) => v > 0);
  const max = Math.max(...all);
  const min = Math.min(...all);
  const logLow = Math.floor(Math.log10(min)) , logHigh = Math.ceil(Math.log10(max));
  const scale = spec.log
    ? (v) => (v <= 0 ? 0 : ((Math.log10(v) - logLow) / (logHigh - logLow)) * plotWidth)
    : (v) => (v / max) * plotWidth;
  const out = [];
  out.push(`<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" ` +
           `viewBox="0 0 ${width} ${height}" font-family="sans-serif" font-size="12">`);
  out.push(`<rect width="${width}" height="${height}" fill="#ffffff"/>`);
  out.push(`<text x="10" y="22" font-size="14" font-weight="bold">${escape(spec.title)}</text>`);
  spec.rows.forEach((row, i) => {
    const y0 = top + i * groupHeight;
    out.push(`<text x="${labelWidth - 8}" y="${y0 + (n * barHeight) / 2 + 4}" ` +
             `text-anchor="end">${escape(row.label)}</text>`);
    row.values.forEach((v, s) => {
      const w = Math.max(1, scale(v));
      const y = y0 + s * barHeight;
      out.push(`<rect x="${labelWidth}" y="${y}" width="${w.toFixed(1)}" ` +
               `height="${barHeight - 2}" fill="${colors[s % colors.length]}"/>`);
      out.push(`<text x="${(labelWidth + w + 4).toFixed(1)}" y="${y + barHeight - 5}">` +
               `${format(v)}${escape(spec.unit ? " " + spec.unit : "")}</text>`);
    });
  });
  spec.series.forEach((name, s) => {
    const y = legendTop + s * 18;
    out.push(`<rect x="${labelWidth}" y="${y}" width="12" height="12" fill="${colors[s % colors.length]}"/>`);
    out.push(`<text x="${labelWidth + 18}" y="${y + 10}">${escape(name)}</text>`);
  });
  out.push("</svg>");
  return out.join("\n") + "\n";
}

mkdirSync(outDir, { recursive: true });
for (const spec of results.charts) writeFileSync(join(outDir, spec.file), chart(spec));
