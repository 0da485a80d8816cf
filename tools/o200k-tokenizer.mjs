// Builds the gpt-oss tokenizer (o200k_harmony) in the Hugging Face tokenizer.json format from the
// o200k_base ranks that js-tiktoken ships (tests/node/node_modules), offline. gpt-oss checkpoints
// on the Hub carry a ~27 MB tokenizer.json of this shape; it is too large to commit, so tests make
// it here from the npm package instead.
//
//   node tools/o200k-tokenizer.mjs OUT_DIR     # writes OUT_DIR/tokenizer.json, tokenizer_config.json
//
// What it writes, and why:
//   model         byte-level BPE; the vocabulary is every rank, its bytes in the GPT-2 alphabet.
//                 Merges come from the ranks the way transformers converts tiktoken files: for
//                 each token, every split into two pieces that are themselves tokens, ordered by
//                 the merged token's rank (then by the pieces' ranks). With that order, "apply the
//                 lowest merge" is tiktoken's "merge the adjacent pair of lowest rank", and
//                 ignore_merges takes a piece that is one token whole, as tiktoken does.
//   pre_tokenizer the o200k pattern as tiktoken writes it (inline (?i:...) contractions, which
//                 js-tiktoken has to spell out), Isolated, then ByteLevel without its own regex.
//   added_tokens  the harmony specials of o200k_harmony: <|startoftext|> 199998, <|endoftext|>
//                 199999, <|return|> 200002, <|constrain|> 200003, <|channel|> 200005, <|start|>
//                 200006, <|end|> 200007, <|message|> 200008, <|call|> 200012, <|endofprompt|>
//                 200018 (o200k_base's), and <|reserved_N|> for every other id up to 201087.
//   tokenizer_config.json  bos <|startoftext|>, eos <|return|>, pad <|endoftext|> (gpt-oss's),
//                 and no chat template: Flare renders gpt-oss prompts natively (src/text/harmony.h).
import fs from 'node:fs';
import path from 'node:path';
import { createRequire } from 'node:module';
import { fileURLToPath, pathToFileURL } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const require = createRequire(path.join(root, 'tests/node/package.json'));

export const O200K_PATTERN = [
  "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?",
  "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?",
  '\\p{N}{1,3}',
  ' ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*',
  '\\s*[\\r\\n]+',
  '\\s+(?!\\S)',
  '\\s+',
].join('|');

export const VOCAB_SIZE = 201088;  // gpt-oss's vocab_size: ranks, then the specials up to 201087

const NAMED_SPECIALS = {
  199998: '<|startoftext|>', 199999: '<|endoftext|>', 200002: '<|return|>', 200003: '<|constrain|>',
  200005: '<|channel|>', 200006: '<|start|>', 200007: '<|end|>', 200008: '<|message|>', 200012: '<|call|>',
  200018: '<|endofprompt|>',
};

// id -> content of every special token (o200k_harmony).
export function harmonySpecials(firstSpecial) {
  const specials = new Map();
  for (let id = firstSpecial; id < VOCAB_SIZE; ++id) specials.set(id, NAMED_SPECIALS[id] ?? `<|reserved_${id}|>`);
  return specials;
}

// The ranks js-tiktoken ships: "! OFFSET tok tok ..." records of base64 tokens with consecutive
// ranks. Returns the tokens' bytes as latin1 strings (one char per byte), indexed by rank.
export async function loadO200kRanks() {
  const module = await import(pathToFileURL(require.resolve('js-tiktoken/ranks/o200k_base')).href);
  const ranks = [];
  for (const record of module.default.bpe_ranks.split('\n')) {
    if (!record) continue;
    const [, offsetText, ...tokens] = record.split(' ');
    const offset = Number.parseInt(offsetText, 10);
    tokens.forEach((token, i) => { ranks[offset + i] = Buffer.from(token, 'base64').toString('latin1'); });
  }
  for (let rank = 0; rank < ranks.length; ++rank) {
    if (ranks[rank] === undefined) throw new Error(`o200k_base has no token of rank ${rank}`);
  }
  return { ranks, module: module.default };
}

// GPT-2's byte-level alphabet: printable bytes stand for themselves, the rest map to 256 + n.
function byteAlphabet() {
  const printable = (b) => (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
  const table = new Array(256);
  let next = 256;
  for (let b = 0; b < 256; ++b) table[b] = String.fromCodePoint(printable(b) ? b : next++);
  return table;
}

export function buildTokenizerJson(ranks) {
  const alphabet = byteAlphabet();
  const visible = (bytes) => { let s = ''; for (let i = 0; i < bytes.length; ++i) s += alphabet[bytes.charCodeAt(i)]; return s; };
  const rankOf = new Map(ranks.map((bytes, rank) => [bytes, rank]));
  const vocab = {};
  const merges = [];
  ranks.forEach((bytes, rank) => {
    vocab[visible(bytes)] = rank;
    if (bytes.length < 2) return;
    const splits = [];
    for (let i = 1; i < bytes.length; ++i) {
      const left = rankOf.get(bytes.slice(0, i));
      const right = rankOf.get(bytes.slice(i));
      if (left !== undefined && right !== undefined) splits.push([left, right]);
    }
    splits.sort((a, b) => a[0] - b[0] || a[1] - b[1]);
    for (const [left, right] of splits) merges.push([visible(ranks[left]), visible(ranks[right])]);
  });
  const addedTokens = [...harmonySpecials(ranks.length)].map(([id, content]) => ({
    id, content, single_word: false, lstrip: false, rstrip: false, normalized: false, special: true,
  }));
  return {
    version: '1.0',
    truncation: null,
    padding: null,
    added_tokens: addedTokens,
    normalizer: null,
    pre_tokenizer: {
      type: 'Sequence',
      pretokenizers: [
        { type: 'Split', pattern: { Regex: O200K_PATTERN }, behavior: 'Isolated', invert: false },
        { type: 'ByteLevel', add_prefix_space: false, trim_offsets: true, use_regex: false },
      ],
    },
    post_processor: { type: 'ByteLevel', add_prefix_space: true, trim_offsets: false, use_regex: true },
    decoder: { type: 'ByteLevel', add_prefix_space: true, trim_offsets: true, use_regex: true },
    model: {
      type: 'BPE', dropout: null, unk_token: null, continuing_subword_prefix: '', end_of_word_suffix: '',
      fuse_unk: false, byte_fallback: false, ignore_merges: true, vocab, merges,
    },
  };
}

export const TOKENIZER_CONFIG = {
  bos_token: '<|startoftext|>',
  eos_token: '<|return|>',
  pad_token: '<|endoftext|>',
  clean_up_tokenization_spaces: false,
  tokenizer_class: 'PreTrainedTokenizerFast',
  model_input_names: ['input_ids', 'attention_mask'],
};

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const [outDir] = process.argv.slice(2);
  if (!outDir) {
    console.error('usage: node tools/o200k-tokenizer.mjs OUT_DIR');
    process.exit(2);
  }
  const { ranks } = await loadO200kRanks();
  const tokenizer = buildTokenizerJson(ranks);
  fs.mkdirSync(outDir, { recursive: true });
  // Written as one string: JSON.stringify of the whole object stays well under V8's string limit.
  fs.writeFileSync(path.join(outDir, 'tokenizer.json'), JSON.stringify(tokenizer));
  fs.writeFileSync(path.join(outDir, 'tokenizer_config.json'), JSON.stringify(TOKENIZER_CONFIG, null, 2) + '\n');
  console.log(`o200k tokenizer: ${ranks.length} ranks, ${tokenizer.model.merges.length} merges, ` +
              `${tokenizer.added_tokens.length} specials -> ${outDir}`);
}
