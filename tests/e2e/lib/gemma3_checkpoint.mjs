// Writes a tiny random-weight Gemma 3 checkpoint (Gemma3ForCausalLM, model_type gemma3_text) for
// the real Gemma 3 tokenizer: config.json as transformers 5 writes it (layer_types, rope_parameters
// keyed by layer type, the shape of google/gemma-3-1b-it's config with tiny sizes), a
// generation_config.json like the instruction-tuned model's (eos <eos> and <end_of_turn>) and
// model.safetensors with BF16 weights from a fixed seed, in the checkpoint's own tensor names.
// The embedding is [262144, hidden] (16 MiB at hidden 32), so it is made at test time, never
// committed; the tokenizer files are copied beside it by the caller.
//   node gemma3_checkpoint.mjs OUT_DIR
import fs from "node:fs";
import path from "node:path";

import { bf16Tensors, writeSafetensors } from "./bf16_checkpoint.mjs";

const [outDir] = process.argv.slice(2);
if (!outDir) throw new Error("usage: node gemma3_checkpoint.mjs OUT_DIR");

const vocab = 262144;  // google/gemma-3-1b-it's; the tokenizer also has <image_soft_token> = 262144
const hidden = 32;
const intermediate = 64;
const nHeads = 2;
const nKvHeads = 1;
const headDim = 256;
// Two sliding layers then a global one; a window of 16 positions, so chat prompts exceed it.
const layerTypes = ["sliding_attention", "sliding_attention", "full_attention"];

const config = {
  _sliding_window_pattern: 6,
  architectures: ["Gemma3ForCausalLM"],
  attention_bias: false,
  attention_dropout: 0.0,
  attn_logit_softcapping: null,
  bos_token_id: 2,
  dtype: "bfloat16",
  eos_token_id: [1, 106],
  final_logit_softcapping: null,
  head_dim: headDim,
  hidden_activation: "gelu_pytorch_tanh",
  hidden_size: hidden,
  initializer_range: 0.02,
  intermediate_size: intermediate,
  layer_types: layerTypes,
  max_position_embeddings: 32768,
  model_type: "gemma3_text",
  num_attention_heads: nHeads,
  num_hidden_layers: layerTypes.length,
  num_key_value_heads: nKvHeads,
  pad_token_id: 0,
  query_pre_attn_scalar: headDim,
  rms_norm_eps: 1e-6,
  rope_parameters: {
    full_attention: { factor: 8.0, rope_theta: 1000000.0, rope_type: "linear" },
    sliding_attention: { rope_theta: 10000.0, rope_type: "default" },
  },
  sliding_window: 16,
  tie_word_embeddings: true,
  transformers_version: "5.17.0",
  use_bidirectional_attention: false,
  use_cache: true,
  vocab_size: vocab,
};
const generationConfig = {
  bos_token_id: 2,
  cache_implementation: "hybrid",
  do_sample: true,
  eos_token_id: [1, 106],
  pad_token_id: 0,
  top_k: 64,
  top_p: 0.95,
  transformers_version: "5.17.0",
};

const tensor = bf16Tensors(0x6e6d6133);  // the same bytes on every run

const tensors = [tensor("model.embed_tokens.weight", [vocab, hidden], 0.5)];
// Gemma's RMSNorms scale by (1 + w): weights around 0.
const norm = (name, dim) => tensor(name, [dim], 0.2);
for (let i = 0; i < layerTypes.length; ++i) {
  const p = `model.layers.${i}.`;
  tensors.push(
    norm(p + "input_layernorm.weight", hidden),
    tensor(p + "self_attn.q_proj.weight", [nHeads * headDim, hidden], 0.08),
    tensor(p + "self_attn.k_proj.weight", [nKvHeads * headDim, hidden], 0.08),
    tensor(p + "self_attn.v_proj.weight", [nKvHeads * headDim, hidden], 0.08),
    tensor(p + "self_attn.o_proj.weight", [hidden, nHeads * headDim], 0.08),
    norm(p + "self_attn.q_norm.weight", headDim),
    norm(p + "self_attn.k_norm.weight", headDim),
    norm(p + "post_attention_layernorm.weight", hidden),
    norm(p + "pre_feedforward_layernorm.weight", hidden),
    tensor(p + "mlp.gate_proj.weight", [intermediate, hidden], 0.08),
    tensor(p + "mlp.up_proj.weight", [intermediate, hidden], 0.08),
    tensor(p + "mlp.down_proj.weight", [hidden, intermediate], 0.08),
    norm(p + "post_feedforward_layernorm.weight", hidden),
  );
}
tensors.push(norm("model.norm.weight", hidden));

fs.mkdirSync(outDir, { recursive: true });
writeSafetensors(path.join(outDir, "model.safetensors"), tensors);
fs.writeFileSync(path.join(outDir, "config.json"), JSON.stringify(config, null, 2) + "\n");
fs.writeFileSync(path.join(outDir, "generation_config.json"), JSON.stringify(generationConfig, null, 2) + "\n");
