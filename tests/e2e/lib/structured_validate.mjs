// Validates constrained texts with independent checkers: JSON Schema with ajv (draft 2020-12,
// ajv-formats for date-time, date, time, uuid and email), regular expressions with JavaScript's
// RegExp (a full match, "u" flag), GBNF cases with the equivalent regular expression or check the
// corpus names. Reads JSON lines {kind, name, text, ...} (tests/unit/grammar/corpus_walk_test.cpp)
// and the corpus in tests/data/structured. Exits 1 listing every text that does not validate.
// Usage: node structured_validate.mjs WALKS.jsonl
import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const modules = join(here, "..", "..", "node", "node_modules");
const { default: Ajv2020 } = await import(join(modules, "ajv", "dist", "2020.js"));
const { default: addFormats } = await import(join(modules, "ajv-formats", "dist", "index.js"));
const data = join(here, "..", "..", "data", "structured");

export function makeAjv() {
  const ajv = new Ajv2020({ strict: false, allErrors: true, unicodeRegExp: true });
  addFormats(ajv);
  return ajv;
}

// The independent check of each GBNF case: JSON, arithmetic, or a regular expression.
function gbnfCheck(entry) {
  if (entry.regex) return (text) => new RegExp(`^(?:${entry.regex})$`, "u").test(text);
  if (entry.check === "json") return (text) => {
    try { return Array.isArray(JSON.parse(text)); } catch { return false; }
  };
  if (entry.check === "arithmetic") return (text) => {
    // Balanced parentheses around numbers of 1-3 digits and binary operators only.
    const token = /^(?:\d{1,3}|[-+*/()])/u;
    let depth = 0, expectOperand = true, rest = text;
    while (rest.length > 0) {
      const m = token.exec(rest);
      if (!m) return false;
      const t = m[0];
      rest = rest.slice(t.length);
      if (t === "(") { if (!expectOperand) return false; depth += 1; }
      else if (t === ")") { if (expectOperand || depth === 0) return false; depth -= 1; }
      else if (/\d/u.test(t)) { if (!expectOperand) return false; expectOperand = false; }
      else { if (expectOperand) return false; expectOperand = true; }
    }
    return depth === 0 && !expectOperand;
  };
  throw new Error(`gbnf case ${entry.name} has no check`);
}

export function checkers() {
  const ajv = makeAjv();
  const out = { schema: new Map(), regex: new Map(), gbnf: new Map() };
  for (const e of JSON.parse(readFileSync(join(data, "schemas.json"), "utf8"))) {
    const validate = ajv.compile(e.schema);
    out.schema.set(e.name, (text) => {
      let value;
      try { value = JSON.parse(text); } catch { return false; }
      return validate(value) ? true : ajv.errorsText(validate.errors);
    });
  }
  for (const e of JSON.parse(readFileSync(join(data, "regexes.json"), "utf8"))) {
    const re = new RegExp(`^(?:${e.pattern.replace(/^\^/u, "").replace(/\$$/u, "")})$`, "u");
    out.regex.set(e.name, (text) => re.test(text));
  }
  for (const e of JSON.parse(readFileSync(join(data, "gbnf.json"), "utf8"))) out.gbnf.set(e.name, gbnfCheck(e));
  return out;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const check = checkers();
  const lines = readFileSync(process.argv[2], "utf8").split("\n").filter((l) => l.length > 0);
  const counts = { schema: 0, regex: 0, gbnf: 0 };
  const bad = [];
  for (const line of lines) {
    const walk = JSON.parse(line);
    const fn = check[walk.kind]?.get(walk.name);
    if (!fn) { bad.push(`${walk.kind} ${walk.name}: not in the corpus`); continue; }
    counts[walk.kind] += 1;
    const verdict = fn(walk.text);
    if (verdict !== true) bad.push(`${walk.kind} ${walk.name} (${walk.vocabulary}, t${walk.temperature}): ${JSON.stringify(walk.text)} ${verdict || ""}`);
  }
  console.log(`validated ${lines.length} texts: ${counts.schema} schema, ${counts.regex} regex, ${counts.gbnf} gbnf; ${bad.length} invalid`);
  for (const b of bad) console.log(`INVALID ${b}`);
  if (lines.length === 0 || counts.schema === 0 || bad.length > 0) process.exit(1);
}
