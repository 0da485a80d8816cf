// Shared building blocks (see blocks.h).
#include "model/blocks.h"

#include "common/error.h"

namespace flare::model {

WeightGroup embedding_group(const ModelSpec& spec, WeightTable& table, WeightTransform norm_transform) {
  const std::int64_t vocab = spec.vocab_size, h = spec.hidden_size;
  WeightGroup group{"weights/embedding", {}};
  group.entries.push_back({"embed", WeightKind::table, {{"model.embed_tokens.weight", vocab}}, h, "embed",
                           WeightTransform::none, TensorSplit::rows});
  group.entries.push_back({"final_norm", WeightKind::vector, {{"model.norm.weight", h}}, 0, "norm", norm_transform});
  if (spec.tie_word_embeddings) {
    table.aliases.emplace("lm_head", "embed");
  } else {
    group.entries.push_back({"lm_head", WeightKind::table, {{"lm_head.weight", vocab}}, h, "lm_head",
                             WeightTransform::none, TensorSplit::rows});
  }
  return group;
}

WeightEntry qkv_entry(const ModelSpec& spec, const std::string& prefix, const std::string& name) {
  const std::int64_t q = spec.q_width(), kv = spec.kv_width();
  return {name + "qkv", WeightKind::projection,
          {{prefix + "self_attn.q_proj.weight", q}, {prefix + "self_attn.k_proj.weight", kv},
           {prefix + "self_attn.v_proj.weight", kv}},
          spec.hidden_size, "qkv", WeightTransform::none, TensorSplit::rows};
}

WeightEntry o_entry(const ModelSpec& spec, const std::string& prefix, const std::string& name) {
  return {name + "o", WeightKind::projection, {{prefix + "self_attn.o_proj.weight", spec.hidden_size}},
          spec.q_width(), "o", WeightTransform::none, TensorSplit::cols};
}

WeightEntry gate_up_entry(const ModelSpec& spec, const std::string& prefix, const std::string& name) {
  const std::int64_t inter = spec.intermediate_size;
  return {name + "gate_up", WeightKind::projection,
          {{prefix + "mlp.gate_proj.weight", inter}, {prefix + "mlp.up_proj.weight", inter}}, spec.hidden_size,
          "gate_up", WeightTransform::none, TensorSplit::rows};
}

WeightEntry down_entry(const ModelSpec& spec, const std::string& prefix, const std::string& name) {
  return {name + "down", WeightKind::projection, {{prefix + "mlp.down_proj.weight", spec.hidden_size}},
          spec.intermediate_size, "down", WeightTransform::none, TensorSplit::cols};
}

std::vector<helios::HistorySpec> paged_kv_history(const ModelSpec& spec) {
  std::vector<helios::HistorySpec> layers;
  for (const LayerSpec& layer : spec.layers) {
    layers.emplace_back(helios::PagedKvSpec{spec.n_kv_heads, spec.head_dim, spec.head_dim, layer.sliding_window});
  }
  return layers;
}

void paged_attention_kernel_needs(const ModelSpec& spec, helios::KernelNeeds& needs) {
  // RopeTable rotates the whole head (its frequencies are head_dim / 2 wide): config.cpp rejects
  // partial rotary. Sliding and global layers differ in their window and rope base only.
  needs.attention.push_back({spec.n_heads, spec.n_kv_heads, spec.head_dim, spec.head_dim / 2});
  needs.fp8_linears = needs.fp8_linears || spec.quantization.fp8;
}

void paged_kv_check(const ModelSpec& spec, const helios::KvCacheLayout& layout) {
  if (layout.n_layers != spec.n_layers || layout.n_kv_heads != spec.n_kv_heads || layout.head_dim != spec.head_dim) {
    fail(ExitCode::failure, "internal: KV cache layout does not match the model");
  }
}

}  // namespace flare::model
