// Writes a tiny random-weight Qwen3-MoE checkpoint (Qwen3MoeForCausalLM, model_type qwen3_moe) for
// the real Qwen3 tokenizer: config.json in the Hub's style (the keys and shape of
// Qwen/Qwen3-30B-A3B's config: num_experts, num_experts_per_tok, moe_intermediate_size,
// decoder_sparse_step, mlp_only_layers, norm_topk_prob, top-level rope_theta, untied output head,
// with tiny sizes), a generation_config.json like that model's (eos <|im_end|> and <|endoftext|>)
// and model.safetensors with BF16 weights from a fixed seed, in the checkpoint's own tensor names.
// Three layers: experts, a dense MLP (mlp_only_layers [1]), experts; 8 experts, 2 a token. The
// routers are drawn wider than the other weights so each token's choice of experts is clear-cut
// and differs from token to token. The embedding and the output head are [151936, hidden] (9.3 MiB
// each at hidden 32), so they are made at test time, never committed; the tokenizer files are
// copied beside them by the caller.
//   node qwen3moe_checkpoint.mjs OUT_DIR
import fs from "node:fs";
import path from "node:path";

import { bf16Tensors, writeSafetensors } from "./bf16_checkpoint.mjs";

const [outDir] = process.argv.slice(2);
if (!outDir) throw new Error("usage: node qwen3moe_checkpoint.mjs OUT_DIR");

const vocab = 151936;  // Qwen/Qwen3-30B-A3B's; the tokenizer's 151669 tokens fit below it
const hidden = 32;
const intermediate = 64;  // the dense layer's MLP
const nHeads = 2;
const nKvHeads = 1;
const headDim = 64;
const nLayers = 3;
const nExperts = 8;
const expertsPerToken = 2;
const expertIntermediate = 32;
const mlpOnlyLayers = [1];  // a dense layer between two expert layers

const config = {
  architectures: ["Qwen3MoeForCausalLM"],
  attention_bias: false,
  attention_dropout: 0.0,
  bos_token_id: 151643,
  decoder_sparse_step: 1,
  eos_token_id: 151645,
  head_dim: headDim,
  hidden_act: "silu",
  hidden_size: hidden,
  initializer_range: 0.02,
  intermediate_size: intermediate,
  max_position_embeddings: 40960,
  max_window_layers: nLayers,
  mlp_only_layers: mlpOnlyLayers,
  model_type: "qwen3_moe",
  moe_intermediate_size: expertIntermediate,
  norm_topk_prob: true,
  num_attention_heads: nHeads,
  num_experts: nExperts,
  num_experts_per_tok: expertsPerToken,
  num_hidden_layers: nLayers,
  num_key_value_heads: nKvHeads,
  output_router_logits: false,
  rms_norm_eps: 1e-6,
  rope_scaling: null,
  rope_theta: 1000000.0,
  router_aux_loss_coef: 0.001,
  sliding_window: null,
  tie_word_embeddings: false,
  torch_dtype: "bfloat16",
  transformers_version: "4.51.0",
  use_cache: true,
  use_sliding_window: false,
  vocab_size: vocab,
};
const generationConfig = {
  bos_token_id: 151643,
  do_sample: true,
  eos_token_id: [151645, 151643],
  pad_token_id: 151643,
  temperature: 0.6,
  top_k: 20,
  top_p: 0.95,
  transformers_version: "4.51.0",
};

const tensor = bf16Tensors(0x71776e33);  // the same bytes on every run

const tensors = [tensor("model.embed_tokens.weight", [vocab, hidden], 0.5)];
// Qwen's RMSNorms scale by w: weights around 1.
const norm = (name, dim) => tensor(name, [dim], 0.1, 1.0);
for (let i = 0; i < nLayers; ++i) {
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
  );
  if (mlpOnlyLayers.includes(i)) {
    tensors.push(
      tensor(p + "mlp.gate_proj.weight", [intermediate, hidden], 0.08),
      tensor(p + "mlp.up_proj.weight", [intermediate, hidden], 0.08),
      tensor(p + "mlp.down_proj.weight", [hidden, intermediate], 0.08),
    );
  } else {
    tensors.push(tensor(p + "mlp.gate.weight", [nExperts, hidden], 0.5));
    for (let e = 0; e < nExperts; ++e) {
      const q = `${p}mlp.experts.${e}.`;
      tensors.push(
        tensor(q + "gate_proj.weight", [expertIntermediate, hidden], 0.08),
        tensor(q + "up_proj.weight", [expertIntermediate, hidden], 0.08),
        tensor(q + "down_proj.weight", [hidden, expertIntermediate], 0.08),
      );
    }
  }
}
tensors.push(norm("model.norm.weight", hidden), tensor("lm_head.weight", [vocab, hidden], 0.5));

fs.mkdirSync(outDir, { recursive: true });
writeSafetensors(path.join(outDir, "model.safetensors"), tensors);
fs.writeFileSync(path.join(outDir, "config.json"), JSON.stringify(config, null, 2) + "\n");
fs.writeFileSync(path.join(outDir, "generation_config.json"), JSON.stringify(generationConfig, null, 2) + "\n");
