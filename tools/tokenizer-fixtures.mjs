// Regenerates the tokenizer exactness fixtures (tests/data/tokenizers/<name>/expected.json) from
// the reference implementation, @huggingface/transformers (tests/node/node_modules), offline.
//
//   node tools/tokenizer-fixtures.mjs            # all tokenizers
//   node tools/tokenizer-fixtures.mjs qwen3      # one
//
// For every case of tests/data/tokenizers/corpus.json it records the ids without and with
// special tokens, and the decoded text with and without skip_special_tokens. Cases given as
// "hex" are invalid UTF-8: the bytes are decoded with TextDecoder (each maximal invalid subpart
// becomes U+FFFD), which is the behaviour the C++ tokenizer implements for byte input.
// It also encodes 300 random texts (tests/data/tokenizers/corpus_random.json, fixed seed) and
// records decodes of pseudo-random id sequences (fixed seed) that mix byte tokens,
// special tokens and ordinary tokens, to pin down decoding of arbitrary model output.
//
// add_special_tokens: transformers (Python) rebuilds the post-processor of the Llama and Gemma
// tokenizer classes from add_bos_token / add_eos_token; the JavaScript package ignores those
// flags. The fixture applies the Python rule (so DeepSeek V3 gets its BOS) and checks that it
// agrees with the JavaScript output wherever the JavaScript post-processor already adds them.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createRequire } from 'node:module';
import { fileURLToPath, pathToFileURL } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const require = createRequire(path.join(root, 'tests/node/package.json'));
const transformers = await import(pathToFileURL(require.resolve('@huggingface/transformers')).href);
const { AutoTokenizer, env } = transformers;

const dataDir = path.join(root, 'tests/data/tokenizers');
const names = process.argv.length > 2 ? process.argv.slice(2) : ['qwen3', 'llama3', 'deepseek_v3', 'gemma3', 'demo'];
const corpus = JSON.parse(fs.readFileSync(path.join(dataDir, 'corpus.json'), 'utf8'));
const BOS_CLASSES = new Set(['LlamaTokenizer', 'LlamaTokenizerFast', 'CodeLlamaTokenizer', 'CodeLlamaTokenizerFast',
  'GemmaTokenizer', 'GemmaTokenizerFast']);

function readMaybeXz(file) {
  if (fs.existsSync(file)) return fs.readFileSync(file);
  if (fs.existsSync(file + '.xz')) return execFileSync('xz', ['-dc', file + '.xz'], { maxBuffer: 1 << 30 });
  return null;
}

function caseText(entry) {
  if (entry.hex !== undefined) return new TextDecoder('utf-8', { fatal: false, ignoreBOM: true }).decode(Buffer.from(entry.hex, 'hex'));
  return entry.text;
}

// Deterministic xorshift32.
function rng(seed) {
  let s = seed >>> 0 || 1;
  return () => { s ^= s << 13; s >>>= 0; s ^= s >>> 17; s ^= s << 5; s >>>= 0; return s / 4294967296; };
}

// Random texts mixing scripts, whitespace, digits, emoji sequences and special-token strings:
// tests/data/tokenizers/corpus_random.json (deterministic, rewritten on every run).
const RANDOM_POOL = [
  'a', 'Z', 'the', ' of', 'Hello', "'s", "'LL", 'don', "n't", '_', '-', '.', ',', '!?', '...', '"', '`', '(', ')', '{', '}',
  '[', ']', '<', '>', '/', '\\', '#', '$', '%', '&', '*', '+', '=', '|', '~', '^', '@', ';', ':',
  '0', '7', '42', '123456', '3.14', '1,000', '\u00b2', '\u00bd', '\u0663', '\u096a', '\u2460',
  ' ', '  ', '   ', '\t', '\n', '\n\n', '\r\n', '\r', ' \n', '\u00a0', '\u3000', '\u2028', '\u200b', '\ufeff', '\u0085', ' \u0085',
  '\u00e9', 'e\u0301', 'A\u030a', '\u212b', '\u00f1', '\u0131', '\u0130', '\u017f', '\u212a', '\u03a3', '\u03c2', '\ufb01', '\uff21',
  '\u4f60\u597d', '\u4e16\u754c', '\u6f22', '\u3053\u3093', '\u30ab\u30bf', '\uc548\ub155', '\u1100\u1161',
  '\u0645\u0631\u062d\u0628\u0627', '\u0928\u092e\u0938\u094d\u0924\u0947', '\u0e2a\u0e27\u0e31\u0e2a', '\u041f\u0440\u0438',
  '\ud83d\ude00', '\ud83d\udc4d\ud83c\udffd', '\ud83d\udc68\u200d\ud83d\udc69\u200d\ud83d\udc67', '\u2764\ufe0f',
  '\ud83c\uddeb\ud83c\uddf7', '1\ufe0f\u20e3', '\ud800\udf48', '\ue000',
  '<|im_start|>', '<|im_end|>', '<|endoftext|>', '<think>', '</think>', '<|begin_of_text|>', '<|eot_id|>',
  '<\uff5cUser\uff5c>', '<\uff5cend\u2581of\u2581sentence\uff5c>', '<bos>', '<eos>', '<start_of_turn>', '<unused5>',
  '<table>', '\t\t', '\u2581', '\u2581\u2581', '<0x41>', '<unk>', '<|im_', 'im_end|>',
];

function randomCorpus() {
  const next = rng(20261129);
  const pool = RANDOM_POOL;
  const texts = [];
  for (let n = 0; n < 300; ++n) {
    const segments = 1 + Math.floor(next() * 40);
    let text = '';
    for (let i = 0; i < segments; ++i) text += pool[Math.floor(next() * pool.length)].repeat(1 + Math.floor(next() * 3));
    texts.push(text);
  }
  return texts;
}
const randomTexts = randomCorpus();
fs.writeFileSync(path.join(dataDir, 'corpus_random.json'), '[\n' + randomTexts.map((t) => JSON.stringify(t)).join(',\n') + '\n]\n');

function decodeBoth(tok, ids) {
  if (ids.length === 0) return ['', ''];
  return [tok.decode(ids, { skip_special_tokens: false }), tok.decode(ids, { skip_special_tokens: true })];
}

async function generate(name) {
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), `tok-${name}-`));
  const modelDir = path.join(tmp, name);
  fs.mkdirSync(modelDir);
  fs.writeFileSync(path.join(modelDir, 'tokenizer.json'), readMaybeXz(path.join(dataDir, name, 'tokenizer.json')));
  const configBytes = readMaybeXz(path.join(dataDir, name, 'tokenizer_config.json'));
  if (configBytes) fs.writeFileSync(path.join(modelDir, 'tokenizer_config.json'), configBytes);
  env.allowRemoteModels = false;
  env.allowLocalModels = true;
  env.localModelPath = tmp + path.sep;
  const tok = await AutoTokenizer.from_pretrained(name);
  const config = configBytes ? JSON.parse(configBytes.toString('utf8')) : {};
  const tokenJson = JSON.parse(fs.readFileSync(path.join(modelDir, 'tokenizer.json'), 'utf8'));
  const vocab = tok._tokenizer.model.vocab;
  const idOf = (t) => (t === null || t === undefined) ? undefined : tok._tokenizer.model.tokens_to_ids.get(typeof t === 'string' ? t : t.content);

  const rebuilds = BOS_CLASSES.has(config.tokenizer_class);
  const withSpecial = (text, plain) => {
    const js = tok.encode(text, { add_special_tokens: true });
    if (!rebuilds) return js;
    const bos = (config.add_bos_token ?? true) && idOf(config.bos_token) !== undefined ? [idOf(config.bos_token)] : [];
    const eos = (config.add_eos_token ?? false) && idOf(config.eos_token) !== undefined ? [idOf(config.eos_token)] : [];
    const python = [...bos, ...plain, ...eos];
    const jsAddsSpecials = JSON.stringify(js) !== JSON.stringify(plain);
    if (jsAddsSpecials && JSON.stringify(js) !== JSON.stringify(python)) {
      throw new Error(`${name}: post-processor disagrees with add_bos_token/add_eos_token`);
    }
    return python;
  };

  const cases = corpus.map((entry) => {
    const text = caseText(entry);
    const ids = tok.encode(text, { add_special_tokens: false });
    const [decoded, decoded_skip] = decodeBoth(tok, ids);
    return { name: entry.name, ids, ids_special: withSpecial(text, ids), decoded, decoded_skip };
  });

  const random_cases = randomTexts.map((text) => {
    const ids = tok.encode(text, { add_special_tokens: false });
    return { ids, decoded: decodeBoth(tok, ids)[0] };
  });

  // Pseudo-random id sequences: byte tokens (<0xNN> or single-byte byte-level tokens), added
  // tokens and ordinary tokens.
  const next = rng(0x5eed + name.length);
  const byteIds = [];
  const added = tokenJson.added_tokens.map((t) => t.id);
  for (let id = 0; id < vocab.length; ++id) {
    const t = vocab[id];
    if (t === undefined) continue;
    if (/^<0x[0-9A-F]{2}>$/.test(t) || [...t].length === 1) byteIds.push(id);
  }
  const decodes = [];
  for (let n = 0; n < 60; ++n) {
    const length = 1 + Math.floor(next() * 12);
    const ids = [];
    for (let i = 0; i < length; ++i) {
      const r = next();
      let id;
      if (r < 0.45 && byteIds.length) id = byteIds[Math.floor(next() * byteIds.length)];
      else if (r < 0.6 && added.length) id = added[Math.floor(next() * added.length)];
      else id = Math.floor(next() * vocab.length);
      if (vocab[id] !== undefined) ids.push(id);
    }
    if (ids.length === 0) continue;
    const [decoded, decoded_skip] = decodeBoth(tok, ids);
    decodes.push({ ids, decoded, decoded_skip });
  }

  const lines = [];
  lines.push('{');
  lines.push(`"tokenizer": ${JSON.stringify(name)},`);
  lines.push(`"generator": "node tools/tokenizer-fixtures.mjs (@huggingface/transformers ${transformers.env.version})",`);
  lines.push('"cases": [');
  lines.push(cases.map((c) => JSON.stringify(c)).join(',\n'));
  lines.push('],');
  lines.push('"random_cases": [');
  lines.push(random_cases.map((c) => JSON.stringify(c)).join(',\n'));
  lines.push('],');
  lines.push('"decodes": [');
  lines.push(decodes.map((c) => JSON.stringify(c)).join(',\n'));
  lines.push(']');
  lines.push('}');
  fs.writeFileSync(path.join(dataDir, name, 'expected.json'), lines.join('\n') + '\n');
  fs.rmSync(tmp, { recursive: true, force: true });
  console.log(`${name}: ${cases.length} cases, ${decodes.length} decodes`);
}

for (const name of names) await generate(name);
