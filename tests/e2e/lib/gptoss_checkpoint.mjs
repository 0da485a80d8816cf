// Writes a tiny random-weight gpt-oss checkpoint (GptOssForCausalLM, model_type gpt_oss) in the
// Hub's layout, for the o200k tokenizer the caller copies beside it: config.json with the keys of
// openai/gpt-oss-20b's (top-level rope_theta and yarn rope_scaling, layer_types alternating sliding
// and full attention, num_local_experts, experts_per_token, swiglu_limit, quantization_config
// mxfp4 with its modules_to_not_convert) at tiny sizes, generation_config.json like that model's
// (eos <|return|>, <|endoftext|> and <|call|>), and model.safetensors: BF16 attention (with biases
// and sinks), router and norms from a fixed seed, and the experts as MXFP4 in the Hub's tensors,
// gate_up_proj_blocks / _scales and down_proj_blocks / _scales (U8: two E2M1 codes a byte, one
// E8M0 scale a 32-value block) with BF16 biases. The embedding and output head are [201088, 32]
// (12.3 MiB each), so the checkpoint is made at test time, never committed.
//   node gptoss_checkpoint.mjs OUT_DIR
import fs from "node:fs";
import path from "node:path";

import { bf16Tensors, writeSafetensors } from "./bf16_checkpoint.mjs";

const [outDir] = process.argv.slice(2);
if (!outDir) throw new Error("usage: node gptoss_checkpoint.mjs OUT_DIR");

const vocab = 201088;  // gpt-oss's: o200k's ranks and the harmony specials
const hidden = 32;
const nHeads = 2;
const nKvHeads = 1;
const headDim = 64;
const nLayers = 2;
const nExperts = 4;
const expertsPerToken = 2;
const intermediate = 32;  // per expert; MXFP4 blocks are 32 values
const slidingWindow = 16;

const config = {
  architectures: ["GptOssForCausalLM"],
  attention_bias: true,
  attention_dropout: 0.0,
  eos_token_id: 200002,
  experts_per_token: expertsPerToken,
  head_dim: headDim,
  hidden_act: "silu",
  hidden_size: hidden,
  initial_context_length: 128,
  initializer_range: 0.02,
  intermediate_size: intermediate,
  layer_types: Array.from({ length: nLayers }, (_, i) => (i % 2 === 0 ? "sliding_attention" : "full_attention")),
  max_position_embeddings: 4096,
  model_type: "gpt_oss",
  num_attention_heads: nHeads,
  num_experts_per_tok: expertsPerToken,
  num_hidden_layers: nLayers,
  num_key_value_heads: nKvHeads,
  num_local_experts: nExperts,
  output_router_logits: false,
  pad_token_id: 199999,
  quantization_config: {
    modules_to_not_convert: ["model.layers.*.self_attn", "model.layers.*.mlp.router", "model.embed_tokens", "lm_head"],
    quant_method: "mxfp4",
  },
  rms_norm_eps: 1e-5,
  rope_scaling: {
    beta_fast: 32.0, beta_slow: 1.0, factor: 32.0, original_max_position_embeddings: 128, rope_type: "yarn", truncate: false,
  },
  rope_theta: 150000,
  router_aux_loss_coef: 0.9,
  sliding_window: slidingWindow,
  swiglu_limit: 7.0,
  tie_word_embeddings: false,
  transformers_version: "4.55.0",
  use_cache: true,
  vocab_size: vocab,
};
const generationConfig = {
  bos_token_id: 199998,
  do_sample: true,
  eos_token_id: [200002, 199999, 200012],
  pad_token_id: 199999,
  transformers_version: "4.55.0",
};

const tensor = bf16Tensors(0x67707473);  // the same bytes on every run

// U8 tensors from their own seeded xorshift32: MXFP4 codes are any byte (two E2M1 values of
// magnitude up to 6); scales sit near 2^-4 (E8M0 bias 127) so expert outputs stay moderate.
let state = 0x6d786670;
const nextByte = () => {
  state ^= state << 13; state >>>= 0; state ^= state >>> 17; state ^= state << 5; state >>>= 0;
  return state & 0xff;
};
const u8 = (name, shape, draw) => {
  const n = shape.reduce((a, b) => a * b, 1);
  const bytes = Buffer.alloc(n);
  for (let i = 0; i < n; ++i) bytes[i] = draw();
  return { name, dtype: "U8", shape, bytes };
};
const mxfp4 = (prefix, rows, cols) => [
  u8(`${prefix}_blocks`, [nExperts, rows, cols / 32, 16], nextByte),
  u8(`${prefix}_scales`, [nExperts, rows, cols / 32], () => 122 + (nextByte() % 3)),
];

const tensors = [tensor("model.embed_tokens.weight", [vocab, hidden], 0.5)];
const norm = (name, dim) => tensor(name, [dim], 0.1, 1.0);
for (let i = 0; i < nLayers; ++i) {
  const p = `model.layers.${i}.`;
  tensors.push(
    norm(p + "input_layernorm.weight", hidden),
    tensor(p + "self_attn.q_proj.weight", [nHeads * headDim, hidden], 0.08),
    tensor(p + "self_attn.q_proj.bias", [nHeads * headDim], 0.02),
    tensor(p + "self_attn.k_proj.weight", [nKvHeads * headDim, hidden], 0.08),
    tensor(p + "self_attn.k_proj.bias", [nKvHeads * headDim], 0.02),
    tensor(p + "self_attn.v_proj.weight", [nKvHeads * headDim, hidden], 0.08),
    tensor(p + "self_attn.v_proj.bias", [nKvHeads * headDim], 0.02),
    tensor(p + "self_attn.o_proj.weight", [hidden, nHeads * headDim], 0.08),
    tensor(p + "self_attn.o_proj.bias", [hidden], 0.02),
    tensor(p + "self_attn.sinks", [nHeads], 0.5),
    norm(p + "post_attention_layernorm.weight", hidden),
    // The router is drawn wide so each token's choice of experts is clear-cut.
    tensor(p + "mlp.router.weight", [nExperts, hidden], 0.5),
    tensor(p + "mlp.router.bias", [nExperts], 0.1),
    // gate_up rows interleave gate and up (as the Hub stores them); Flare deinterleaves at export.
    ...mxfp4(p + "mlp.experts.gate_up_proj", 2 * intermediate, hidden),
    tensor(p + "mlp.experts.gate_up_proj_bias", [nExperts, 2 * intermediate], 0.02),
    ...mxfp4(p + "mlp.experts.down_proj", hidden, intermediate),
    tensor(p + "mlp.experts.down_proj_bias", [nExperts, hidden], 0.02),
  );
}
tensors.push(norm("model.norm.weight", hidden), tensor("lm_head.weight", [vocab, hidden], 0.5));

fs.mkdirSync(outDir, { recursive: true });
writeSafetensors(path.join(outDir, "model.safetensors"), tensors);
fs.writeFileSync(path.join(outDir, "config.json"), JSON.stringify(config, null, 2) + "\n");
fs.writeFileSync(path.join(outDir, "generation_config.json"), JSON.stringify(generationConfig, null, 2) + "\n");
