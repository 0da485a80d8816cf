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
// It also records decodes of pseudo-random id sequences (fixed seed) that mix byte tokens,
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
  lines.push('"decodes": [');
  lines.push(decodes.map((c) => JSON.stringify(c)).join(',\n'));
  lines.push(']');
  lines.push('}');
  fs.writeFileSync(path.join(dataDir, name, 'expected.json'), lines.join('\n') + '\n');
  fs.rmSync(tmp, { recursive: true, force: true });
  console.log(`${name}: ${cases.length} cases, ${decodes.length} decodes`);
}

for (const name of names) await generate(name);
