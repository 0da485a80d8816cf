// The reference encodings for Flare's o200k (gpt-oss) tokenizer, from js-tiktoken: ids for every
// case of tests/data/tokenizers/corpus.json, corpus_random.json and o200k_cases.json (special
// tokens in the text are the harmony specials, as Hugging Face tokenizers match added tokens), and
// the decoded text of each. Written to OUT_DIR/expected.json for tokenizer_o200k_test.cpp.
//   node o200k_reference.mjs OUT_DIR
//
// The pattern js-tiktoken runs is JavaScript's, which differs from tiktoken's own (Rust) regex in
// two ways that matter: JavaScript's \s has U+FEFF and lacks U+0085, where tiktoken's \s is
// Unicode White_Space; and js-tiktoken spells (?i:'s|...) out as ASCII case pairs, where
// tiktoken's case-insensitive match also takes U+017F (long s, whose case fold is s). The
// reference here runs js-tiktoken's BPE with those two points put back to tiktoken's meaning,
// because that is what gpt-oss was trained with; the cases they touch are counted and printed.
import fs from 'node:fs';
import path from 'node:path';
import { createRequire } from 'node:module';
import { fileURLToPath, pathToFileURL } from 'node:url';

import { harmonySpecials, loadO200kRanks } from '../../../tools/o200k-tokenizer.mjs';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../..');
const require = createRequire(path.join(root, 'tests/node/package.json'));
const { Tiktoken } = await import(pathToFileURL(require.resolve('js-tiktoken/lite')).href);

const [outDir] = process.argv.slice(2);
if (!outDir) throw new Error('usage: node o200k_reference.mjs OUT_DIR');
const dataDir = path.join(root, 'tests/data/tokenizers');

// Unicode White_Space, the set Rust's \s (and Oniguruma's) stands for.
const WHITE_SPACE = '\\t\\n\\v\\f\\r \\u0085\\u00a0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000';
function tiktokenPattern(jsPattern) {
  let pattern = jsPattern.replaceAll('\\S', `[^${WHITE_SPACE}]`).replaceAll('[^\\s', `[^${WHITE_SPACE}`)
    .replaceAll('\\s', `[${WHITE_SPACE}]`);
  pattern = pattern.replaceAll("('s|'S|", "('s|'S|'\u017f|");
  if (pattern === jsPattern || !pattern.includes('\u017f')) throw new Error('js-tiktoken pattern changed: update o200k_reference.mjs');
  return pattern;
}

const { ranks, module: base } = await loadO200kRanks();
const specials = Object.fromEntries([...harmonySpecials(199998)].map(([id, content]) => [content, id]));
const reference = new Tiktoken({ ...base, pat_str: tiktokenPattern(base.pat_str), special_tokens: specials });
const plain = new Tiktoken({ ...base, special_tokens: specials });

function caseText(entry) {
  if (entry.hex !== undefined) return new TextDecoder('utf-8', { fatal: false, ignoreBOM: true }).decode(Buffer.from(entry.hex, 'hex'));
  return entry.text;
}

// js-tiktoken's own decode drops a leading U+FEFF (its TextDecoder strips BOMs); tokenizers keep it.
const specialText = Object.fromEntries(Object.entries(specials).map(([content, id]) => [id, content]));
function decode(ids) {
  const bytes = ids.map((id) => (id < ranks.length ? Buffer.from(ranks[id], 'latin1') : Buffer.from(specialText[id], 'utf8')));
  return new TextDecoder('utf-8', { fatal: false, ignoreBOM: true }).decode(Buffer.concat(bytes));
}

let nPatternDifferences = 0;
function record(name, text, hex) {
  const ids = reference.encode(text, 'all');
  if (JSON.stringify(plain.encode(text, 'all')) !== JSON.stringify(ids)) ++nPatternDifferences;
  const decoded = decode(ids);
  if (decoded !== text) throw new Error(`js-tiktoken does not round-trip case ${name}`);
  // hex: the input bytes exactly (corpus entries that are invalid UTF-8 stay invalid).
  return { name, hex: hex ?? Buffer.from(text, 'utf8').toString('hex'), ids, decoded };
}

const cases = [];
for (const file of ['corpus.json', 'o200k_cases.json']) {
  for (const entry of JSON.parse(fs.readFileSync(path.join(dataDir, file), 'utf8'))) cases.push(record(entry.name, caseText(entry), entry.hex));
}
const random = JSON.parse(fs.readFileSync(path.join(dataDir, 'corpus_random.json'), 'utf8'));
random.forEach((text, i) => cases.push(record(`random_${i}`, text)));

fs.mkdirSync(outDir, { recursive: true });
const version = JSON.parse(fs.readFileSync(path.join(root, 'tests/node/node_modules/js-tiktoken/package.json'), 'utf8')).version;
fs.writeFileSync(path.join(outDir, 'expected.json'),
                 JSON.stringify({ generator: `tests/e2e/lib/o200k_reference.mjs (js-tiktoken ${version})`, cases }));
console.log(`o200k reference: ${cases.length} cases (${nPatternDifferences} where JavaScript's \\s or ASCII-only ` +
            `contractions would differ from tiktoken)`);
