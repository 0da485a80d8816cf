#!/usr/bin/env node
// Writes a random-weight Hugging Face checkpoint of a dense decoder shape (a bench/configs config.json:
// LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM, Qwen3ForCausalLM), so a model whose real
// weights are gated or absent can be exported and served "as a user would" for serving measurements
// (docs/serving.md). The tokenizer is the demo model's, widened to the config's vocabulary with
// unreachable filler tokens, so token-id prompts of the full vocabulary detokenize.
//
//   node tools/random-checkpoint.mjs bench/configs/llama-3.1-8b/config.json /data/llama-3.1-8b-random
//
// Weights: BF16 with a random sign and mantissa and an exponent giving magnitudes in [2^-7, 2^-5)
// (a seeded xorshift stream, the same bytes every run); norm weights 1. One model.safetensors,
// written in 64 MiB chunks. Not a model: its outputs are noise; only shapes and bytes are real.
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

const [configPath, outDir] = process.argv.slice(2);
if (!configPath || !outDir) {
  console.error("usage: random-checkpoint.mjs CONFIG_JSON OUT_DIR");
  process.exit(2);
}
const here = path.dirname(fileURLToPath(import.meta.url));
const demo = path.join(here, "..", "assets", "demo-model");
const config = JSON.parse(fs.readFileSync(configPath, "utf8"));
const architecture = config.architectures?.[0];
if (!["LlamaForCausalLM", "MistralForCausalLM", "Qwen2ForCausalLM", "Qwen3ForCausalLM"].includes(architecture)) {
  console.error(`random-checkpoint: ${architecture} is not a dense decoder this tool knows`);
  process.exit(2);
}

// ---- tensor table (Hugging Face names and shapes) ----
const hidden = config.hidden_size, mlp = config.intermediate_size, vocab = config.vocab_size;
const heads = config.num_attention_heads, kvHeads = config.num_key_value_heads ?? heads;
const headDim = config.head_dim ?? hidden / heads;
const qkvBias = architecture === "Qwen2ForCausalLM" || config.attention_bias === true;
const tensors = [{ name: "model.embed_tokens.weight", shape: [vocab, hidden] }];
for (let l = 0; l < config.num_hidden_layers; l++) {
  const p = `model.layers.${l}.`;
  tensors.push({ name: p + "input_layernorm.weight", shape: [hidden], norm: true });
  tensors.push({ name: p + "self_attn.q_proj.weight", shape: [heads * headDim, hidden] });
  tensors.push({ name: p + "self_attn.k_proj.weight", shape: [kvHeads * headDim, hidden] });
  tensors.push({ name: p + "self_attn.v_proj.weight", shape: [kvHeads * headDim, hidden] });
  tensors.push({ name: p + "self_attn.o_proj.weight", shape: [hidden, heads * headDim] });
  if (qkvBias) {
    tensors.push({ name: p + "self_attn.q_proj.bias", shape: [heads * headDim] });
    tensors.push({ name: p + "self_attn.k_proj.bias", shape: [kvHeads * headDim] });
    tensors.push({ name: p + "self_attn.v_proj.bias", shape: [kvHeads * headDim] });
    if (config.attention_bias === true && architecture !== "Qwen2ForCausalLM")
      tensors.push({ name: p + "self_attn.o_proj.bias", shape: [hidden] });
  }
  if (architecture === "Qwen3ForCausalLM") {
    tensors.push({ name: p + "self_attn.q_norm.weight", shape: [headDim], norm: true });
    tensors.push({ name: p + "self_attn.k_norm.weight", shape: [headDim], norm: true });
  }
  tensors.push({ name: p + "post_attention_layernorm.weight", shape: [hidden], norm: true });
  tensors.push({ name: p + "mlp.gate_proj.weight", shape: [mlp, hidden] });
  tensors.push({ name: p + "mlp.up_proj.weight", shape: [mlp, hidden] });
  tensors.push({ name: p + "mlp.down_proj.weight", shape: [hidden, mlp] });
}
tensors.push({ name: "model.norm.weight", shape: [hidden], norm: true });
if (!config.tie_word_embeddings) tensors.push({ name: "lm_head.weight", shape: [vocab, hidden] });

// ---- model.safetensors ----
fs.mkdirSync(outDir, { recursive: true });
const header = { __metadata__: { format: "pt" } };
let offset = 0;
for (const t of tensors) {
  const bytes = 2 * t.shape.reduce((a, b) => a * b, 1);
  header[t.name] = { dtype: "BF16", shape: t.shape, data_offsets: [offset, offset + bytes] };
  t.bytes = bytes;
  offset += bytes;
}
let json = Buffer.from(JSON.stringify(header), "utf8");
json = Buffer.concat([json, Buffer.alloc((8 - (json.length % 8)) % 8, 0x20)]);
const prefix = Buffer.alloc(8);
prefix.writeBigUInt64LE(BigInt(json.length));
const file = path.join(outDir, "model.safetensors");
const fd = fs.openSync(file + ".partial", "w");
fs.writeSync(fd, prefix);
fs.writeSync(fd, json);
// Two BF16 values a word: sign and 7 mantissa bits random, exponent 120 or 121 (2^-7 .. 2^-5).
function fillRandom(words, n, seed) {
  let x = seed | 0;
  for (let i = 0; i < n; i++) {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    words[i] = (x & 0x80ff80ff) | 0x3c003c00;
  }
  return x;
}
let state = 0x9e3779b9 | 0;
const chunkElements = 32 << 20;  // 64 MiB of BF16
const chunk = new Uint16Array(chunkElements);
const words = new Uint32Array(chunk.buffer);
let written = 0;
const started = Date.now();
for (const t of tensors) {
  let left = t.bytes / 2;
  while (left > 0) {
    const n = Math.min(left, chunkElements);
    if (t.norm) {
      chunk.fill(0x3f80, 0, n);  // 1.0
    } else {
      state = fillRandom(words, (n + 1) >> 1, state);
    }
    fs.writeSync(fd, chunk, 0, 2 * n);
    left -= n;
    written += 2 * n;
  }
  if (process.stderr.isTTY) process.stderr.write(`\r${(written / 1e9).toFixed(1)} of ${(offset / 1e9).toFixed(1)} GB`);
}
fs.closeSync(fd);
fs.renameSync(file + ".partial", file);
if (process.stderr.isTTY) process.stderr.write("\n");

// ---- config and tokenizer ----
fs.writeFileSync(path.join(outDir, "config.json"), JSON.stringify(config, null, 2) + "\n");
const tokenizer = JSON.parse(fs.readFileSync(path.join(demo, "tokenizer.json"), "utf8"));
const known = new Set(Object.keys(tokenizer.model.vocab));
for (const t of tokenizer.added_tokens) known.add(t.content);
let next = Math.max(...Object.values(tokenizer.model.vocab), ...tokenizer.added_tokens.map((t) => t.id)) + 1;
if (next > vocab) {
  console.error(`random-checkpoint: the demo tokenizer's ${next} tokens exceed the vocabulary of ${vocab}`);
  process.exit(2);
}
for (; next < vocab; next++) {  // unreachable by merges: only token-id prompts and sampling produce them
  let text = `~f${next}~`;
  while (known.has(text)) text += "~";
  tokenizer.model.vocab[text] = next;
}
fs.writeFileSync(path.join(outDir, "tokenizer.json"), JSON.stringify(tokenizer));
fs.copyFileSync(path.join(demo, "tokenizer_config.json"), path.join(outDir, "tokenizer_config.json"));
console.log(`${outDir}: ${architecture}, ${tensors.length} tensors, ${(offset / 1e9).toFixed(2)} GB in ` +
            `${((Date.now() - started) / 1000).toFixed(0)} s; tokenizer widened to ${vocab} tokens`);
