// Every section reference in the repository resolves inside it: a "§N.N" in a comment or a doc
// names a heading of docs/contract.md (the default) or of docs/reliability.md (when that page is
// named earlier on the same line); a reference by name (`docs/memd.md, "Connections"`) names a
// heading of that page; and nothing points at specification files that are not in the
// repository. Prints "doc refs: ok" or each broken reference; exits 1 on any.
//
// Usage: node scripts/check_doc_refs.mjs
import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const sections = (doc) =>
  new Set(
    readFileSync(join(root, "docs", doc), "utf8")
      .split("\n")
      .map((line) => /^#+ §([0-9]+(?:\.[0-9]+)*)\b/.exec(line))
      .filter(Boolean)
      .map((m) => m[1]),
  );
const known = { "contract.md": sections("contract.md"), "reliability.md": sections("reliability.md") };
const outside = /tmcra-contract\.md|reliability-security\.md|\.\.\/shared\//;
const headingsOf = new Map();
const headings = (page, from) => {
  const key = `${dirname(from)}|${page}`;
  if (!headingsOf.has(key)) {
    let text = "";
    const candidates = [join(root, dirname(from), page), join(root, page),
                        join(root, "docs", page.replace(/^docs\//, ""))];
    for (const path of candidates) {
      try {
        text = readFileSync(path, "utf8");
        break;
      } catch {}
    }
    headingsOf.set(key, text.split("\n").filter((l) => l.startsWith("#")).join("\n"));
  }
  return headingsOf.get(key);
};

const files = execFileSync("git", ["ls-files"], { cwd: root, encoding: "utf8" })
  .split("\n")
  .filter((f) => /\.(cc|h|sh|mjs|md|txt)$/.test(f) && f !== "CHANGELOG.md" &&
                 f !== "scripts/check_doc_refs.mjs");
const problems = [];
for (const file of files) {
  const lines = readFileSync(join(root, file), "utf8").split("\n");
  lines.forEach((line, i) => {
    const where = `${file}:${i + 1}`;
    if (outside.test(line)) problems.push(`${where}: names a file outside the repository`);
    for (const m of line.matchAll(/([A-Za-z_\/-]+\.md)`?, "([^"]+)"/g)) {
      if (!headings(m[1], file).includes(m[2])) {
        problems.push(`${where}: ${m[1]} has no heading "${m[2]}"`);
      }
    }
    let doc = "contract.md";
    const tokens = /reliability\.md|contract\.md|§\s?([0-9]+(?:\.[0-9]+)*)/g;
    for (let m; (m = tokens.exec(line)); ) {
      if (m[1] === undefined) {
        doc = m[0];
      } else if (!known[doc].has(m[1])) {
        problems.push(`${where}: §${m[1]} is not a section of docs/${doc}`);
      }
    }
  });
}
for (const p of problems) console.log(`doc refs: ${p}`);
if (problems.length > 0) process.exit(1);
console.log("doc refs: ok");
