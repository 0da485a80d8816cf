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

WeightEntry vector_entry(std::string name, std::string source, std::int64_t n, std::string role) {
  return {std::move(name), WeightKind::vector, {{std::move(source), n}}, 0, std::move(role)};
}

void attention_entries(const ModelSpec& spec, const std::string& p, const std::string& t,
                       std::vector<WeightEntry>& entries) {
  const std::int64_t h = spec.hidden_size, q = spec.q_width(), kv = spec.kv_width();
  entries.push_back(qkv_entry(spec, p, t));
  if (spec.qkv_bias) {
    entries.push_back({t + "qkv_bias", WeightKind::vector,
                       {{p + "self_attn.q_proj.bias", q}, {p + "self_attn.k_proj.bias", kv},
                        {p + "self_attn.v_proj.bias", kv}},
                       0, "bias", WeightTransform::none, TensorSplit::rows});
  }
  entries.push_back(o_entry(spec, p, t));
  if (spec.o_bias) entries.push_back(vector_entry(t + "o_bias", p + "self_attn.o_proj.bias", h, "bias"));
  if (spec.qk_norm) {
    entries.push_back(vector_entry(t + "q_norm", p + "self_attn.q_norm.weight", spec.head_dim, "norm"));
    entries.push_back(vector_entry(t + "k_norm", p + "self_attn.k_norm.weight", spec.head_dim, "norm"));
  }
}

AttentionWeights attention_weights(const LoadedWeights& weights, const std::string& t) {
  AttentionWeights w;
  w.qkv = weights.at(t + "qkv");
  w.qkv_bias = weights.tensor_or_empty(t + "qkv_bias");
  w.o = weights.at(t + "o");
  w.o_bias = weights.tensor_or_empty(t + "o_bias");
  w.q_norm = weights.tensor_or_empty(t + "q_norm");
  w.k_norm = weights.tensor_or_empty(t + "k_norm");
  w.sinks = weights.tensor_or_empty(t + "sinks");
  return w;
}

void attention_core(helios::Backend& backend, const ModelSpec& spec, std::int32_t layer, const AttentionWeights& w,
                    const helios::Tensor& h, const helios::Tensor& qkv, const helios::Tensor& attn,
                    helios::HistoryCaches& caches, const helios::RotaryParams& rope) {
  helios::KvCache& cache = caches.cache_of(layer);
  project(backend, h, w.qkv, w.qkv_bias.empty() ? nullptr : &w.qkv_bias, qkv);
  const helios::Tensor q = qkv.slice_cols(0, spec.q_width());
  const helios::Tensor k = qkv.slice_cols(spec.q_width(), spec.kv_width());
  const helios::Tensor value = qkv.slice_cols(spec.q_width() + spec.kv_width(), spec.kv_width());
  // [q/k head norm], rotary and the KV store: one kernel on a device backend.
  const helios::QkNormParams qk_norm{w.q_norm, w.k_norm, spec.rms_norm_eps};
  backend.rotary_kv_store(cache, caches.slot_of(layer), q, k, value, spec.head_dim, rope, spec.qk_norm ? &qk_norm : nullptr);
  helios::AttentionParams params;
  params.layer = caches.slot_of(layer);
  params.n_heads = spec.n_heads;
  params.n_kv_heads = spec.n_kv_heads;
  params.head_dim = spec.head_dim;
  params.scale = spec.softmax_scale();
  params.sliding_window = spec.layers[std::size_t(layer)].sliding_window;
  params.sinks = w.sinks;
  backend.attention(cache, q, params, attn);
}

void project_residual_norm(helios::Backend& backend, float eps, const ResidualViews& v, const helios::Tensor& in,
                           const Weight& w, const helios::Tensor& bias, const helios::Tensor& norm_weight) {
  if (w.quant.format != helios::QuantizedWeight::Format::none || !bias.empty()) {
    project(backend, in, w, bias.empty() ? nullptr : &bias, v.delta);
    helios::Tensor residual = v.x;
    backend.rms_norm(v.delta, &residual, norm_weight, eps, v.h);
    return;
  }
  backend.linear_residual_rms_norm(in, w.values, v.delta, v.x, norm_weight, eps, v.h);
}

void swiglu_mlp_up(helios::Backend& backend, const helios::Tensor& h, const Weight& gate_up,
                   const helios::Tensor& gate_up_scratch, const helios::Tensor& act) {
  if (gate_up.quant.format != helios::QuantizedWeight::Format::none) {
    project(backend, h, gate_up, nullptr, gate_up_scratch);
    backend.swiglu(gate_up_scratch, act);
  } else {
    backend.linear_swiglu(h, gate_up.values, gate_up_scratch, act);
  }
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

void moe_kernel_needs(const ModelSpec& spec, helios::KernelNeeds& needs) {
  paged_attention_kernel_needs(spec, needs);
  needs.mixture_of_experts = true;
}

void paged_kv_check(const ModelSpec& spec, const helios::HistoryLayout& layout) {
  const helios::HistoryLayout expected = helios::history_kv_layout(paged_kv_history(spec), 1, 1, helios::DType::bf16);
  bool match = layout.groups.size() == expected.groups.size() && layout.layers.size() == expected.layers.size();
  for (std::size_t g = 0; match && g < layout.groups.size(); ++g) {
    const helios::KvCacheLayout &have = layout.groups[g], &want = expected.groups[g];
    match = have.n_layers == want.n_layers && have.n_kv_heads == want.n_kv_heads && have.head_dim == want.head_dim;
  }
  for (std::size_t l = 0; match && l < layout.layers.size(); ++l) {
    match = layout.layers[l].group == expected.layers[l].group && layout.layers[l].slot == expected.layers[l].slot;
  }
  if (!match) fail(ExitCode::failure, "internal: KV cache layout does not match the model");
}

}  // namespace flare::model
