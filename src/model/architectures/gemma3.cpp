// Gemma3ForCausalLM (text): a GQA decoder whose layers alternate sliding-window and global
// attention (`layer_types`, or every `sliding_window_pattern`-th layer global in older configs),
// each kind with its own rope (rope_local_base_freq for local layers, rope_theta and its scaling for
// global ones), q/k norms, four norms a layer (input, post-attention, pre- and post-feed-forward),
// GeGLU (tanh GELU), embeddings scaled by sqrt(hidden), a softmax scale of
// query_pre_attn_scalar^-1/2 and optional final logit soft-capping. Its RMSNorms scale by
// (1 + weight): preparation stores 1 + w, so the runtime's norm is the usual one. Per step:
//   x = embed(tokens) * sqrt(hidden); h = norm(x)
//   per layer: attn = attention(rope(q_norm(h Wq)), rope(k_norm(h Wk)), h Wv) Wo
//              x += post_attn_norm(attn); h = pre_ff_norm(x)
//              x += post_ff_norm(geglu(h Wgu) Wdown); h = next layer's input norm (or final norm)(x)
//   logits = softcap(h Wlm_head)
#include <cmath>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "common/error.h"
#include "model/architecture.h"
#include "model/architectures/config_context.h"
#include "model/blocks.h"
#include "model/rope_table.h"

namespace flare::model {
namespace {

using helios::DType;
using helios::Tensor;

// --- config ---

bool layer_is_sliding(const ConfigContext& config, std::int32_t layer) {
  if (config.has("layer_types")) {
    const auto& type = config.json.at("layer_types").at(std::size_t(layer));
    return type == "sliding_attention";
  }
  const std::int32_t pattern = config.get_positive_int("sliding_window_pattern", 6);
  return (layer + 1) % pattern != 0;
}

void configure(const ConfigContext& config, ModelSpec& spec) {
  if (spec.activation != Activation::gelu_tanh) {
    config.reject("hidden_activation", "Gemma 3's MLP is GeGLU (gelu_pytorch_tanh)");
  }
  if (config.get_bool("attention_bias", false)) config.reject("attention_bias", "Gemma 3 attention biases are not supported");
  if (spec.quantization.mxfp4) config.reject("quantization_config", "MXFP4 weights are read for gpt-oss experts only");
  if (config.has("attn_logit_softcapping")) config.reject("attn_logit_softcapping", "attention soft-capping is not supported");
  if (config.get_bool("use_bidirectional_attention", false)) {
    config.reject("use_bidirectional_attention", "bidirectional attention is not supported");
  }
  require_full_attention_layers(config, "sliding_attention");
  if (config.has("layer_types") && config.json.at("layer_types").size() != std::size_t(spec.n_layers)) {
    config.reject("layer_types", fmt::format("must name {} layers", spec.n_layers));
  }
  const std::int32_t window = config.get_positive_int("sliding_window", 4096);
  for (std::int32_t layer = 0; layer < spec.n_layers; ++layer) {
    spec.layers[std::size_t(layer)].sliding_window = layer_is_sliding(config, layer) ? window : 0;
  }
  // Global layers: rope_theta and rope_scaling (read by config.cpp), or rope_parameters by layer
  // type (transformers 5). Local layers: rope_local_base_freq, without scaling.
  RopeSpec local;
  local.theta = config.get_number("rope_local_base_freq", 10000.0);
  if (config.has("rope_parameters") && config.json.at("rope_parameters").contains("full_attention")) {
    const auto& by_type = config.json.at("rope_parameters");
    const std::string origin = fmt::format("{}: rope_parameters", config.origin);
    spec.rope = RopeSpec{};
    spec.rope.theta = config.get_number("rope_theta", 1e6);
    rope_parse(by_type.at("full_attention"), origin + ".full_attention", spec.rope);
    if (by_type.contains("sliding_attention")) rope_parse(by_type.at("sliding_attention"), origin + ".sliding_attention", local);
  }
  if (!(spec.rope.theta > 1.0)) config.reject("rope_theta", "must be > 1");
  if (!(local.theta > 1.0)) config.reject("rope_local_base_freq", "must be > 1");
  spec.sliding_rope = local;
  spec.attention_scale = float(1.0 / std::sqrt(config.get_number("query_pre_attn_scalar", spec.head_dim)));
  if (!(spec.attention_scale > 0) || !std::isfinite(spec.attention_scale)) {
    config.reject("query_pre_attn_scalar", "must be a positive number");
  }
  spec.final_logit_softcap = float(config.get_number("final_logit_softcapping", 0.0));
  if (spec.final_logit_softcap < 0) config.reject("final_logit_softcapping", "must be positive");
  spec.qk_norm = true;
}

// --- weights ---

WeightEntry norm_entry(std::string name, std::string source, std::int64_t n) {
  return {std::move(name), WeightKind::vector, {{std::move(source), n}}, 0, "norm", WeightTransform::plus_one};
}

WeightTable weight_table(const ModelSpec& spec) {
  const std::int64_t h = spec.hidden_size;
  WeightTable table;
  table.groups.push_back(embedding_group(spec, table, WeightTransform::plus_one));
  for (std::int32_t layer = 0; layer < spec.n_layers; ++layer) {
    const std::string p = fmt::format("model.layers.{}.", layer), t = fmt::format("layers.{}.", layer);
    WeightGroup g{fmt::format("weights/layer-{:03}", layer), {}};
    g.entries.push_back(norm_entry(t + "input_norm", p + "input_layernorm.weight", h));
    g.entries.push_back(qkv_entry(spec, p, t));
    g.entries.push_back(o_entry(spec, p, t));
    g.entries.push_back(norm_entry(t + "q_norm", p + "self_attn.q_norm.weight", spec.head_dim));
    g.entries.push_back(norm_entry(t + "k_norm", p + "self_attn.k_norm.weight", spec.head_dim));
    g.entries.push_back(norm_entry(t + "post_attention_norm", p + "post_attention_layernorm.weight", h));
    g.entries.push_back(norm_entry(t + "pre_ff_norm", p + "pre_feedforward_layernorm.weight", h));
    g.entries.push_back(gate_up_entry(spec, p, t));
    g.entries.push_back(down_entry(spec, p, t));
    g.entries.push_back(norm_entry(t + "post_ff_norm", p + "post_feedforward_layernorm.weight", h));
    table.groups.push_back(std::move(g));
  }
  return table;
}

void plan_arena(const ModelSpec& spec, DType act, helios::ArenaPlan& plan) {
  using helios::ArenaRows;
  plan.add("x", ArenaRows::tokens, spec.hidden_size, act);  // the residual stream
  plan.add("h", ArenaRows::tokens, spec.hidden_size, act);  // its norm, each block's input
  plan.add("qkv", ArenaRows::tokens, spec.q_width() + 2 * spec.kv_width(), act);
  plan.add("attn", ArenaRows::tokens, spec.q_width(), act);
  plan.add("delta", ArenaRows::tokens, spec.hidden_size, act);       // a block's output
  plan.add("delta_norm", ArenaRows::tokens, spec.hidden_size, act);  // ... after its post-norm
  plan.add("gate_up", ArenaRows::tokens, 2 * spec.intermediate_size, act);
  plan.add("act", ArenaRows::tokens, spec.intermediate_size, act);
  plan.add("logit_in", ArenaRows::logit_rows, spec.hidden_size, act);
  RopeTable::plan(spec.rope, spec.head_dim, "rope_global", plan);
  RopeTable::plan(*spec.sliding_rope, spec.head_dim, "rope_local", plan);
}

// --- forward ---

struct Gemma3Layer {
  Tensor input_norm, q_norm, k_norm, post_attention_norm, pre_ff_norm, post_ff_norm;  // f32, 1 + w
  Weight qkv, o, gate_up, down;
  bool sliding = false;
};

class Gemma3 final : public helios::StepProgram {
 public:
  Gemma3(const ModelSpec& spec, helios::Backend& backend, const LoadedWeights& weights)
      : spec_(spec),
        backend_(backend),
        global_rope_(spec.rope, spec.head_dim, spec.max_position_embeddings, backend),
        local_rope_(*spec.sliding_rope, spec.head_dim, spec.max_position_embeddings, backend) {
    embed_ = weights.at("embed").values;
    final_norm_ = weights.at("final_norm").values;
    lm_head_ = weights.at("lm_head").values;
    for (std::int32_t layer = 0; layer < spec.n_layers; ++layer) {
      const std::string t = fmt::format("layers.{}.", layer);
      Gemma3Layer w;
      w.input_norm = weights.at(t + "input_norm").values;
      w.q_norm = weights.at(t + "q_norm").values;
      w.k_norm = weights.at(t + "k_norm").values;
      w.post_attention_norm = weights.at(t + "post_attention_norm").values;
      w.pre_ff_norm = weights.at(t + "pre_ff_norm").values;
      w.post_ff_norm = weights.at(t + "post_ff_norm").values;
      w.qkv = weights.at(t + "qkv");
      w.o = weights.at(t + "o");
      w.gate_up = weights.at(t + "gate_up");
      w.down = weights.at(t + "down");
      w.sliding = spec.layers[std::size_t(layer)].sliding_window > 0;
      layers_.push_back(w);
    }
  }

  std::int32_t vocab_size() const override { return spec_.vocab_size; }

  void plan_arena(helios::ArenaPlan& plan) override {
    model::plan_arena(spec_, backend_.activation_dtype(), plan);
    for (auto [slot, name] : {std::pair{&x_, "x"}, {&h_, "h"}, {&qkv_, "qkv"}, {&attn_, "attn"}, {&delta_, "delta"},
                              {&delta_norm_, "delta_norm"}, {&gate_up_, "gate_up"}, {&act_, "act"},
                              {&logit_in_, "logit_in"}}) {
      *slot = plan.slot(name);
    }
    global_rope_.bind(plan, "rope_global");
    local_rope_.bind(plan, "rope_local");
  }

  void check_cache(const helios::HistoryLayout& layout) const override { paged_kv_check(spec_, layout); }

  helios::StepLaunch upload(const helios::Step& step, helios::ActivationArena& arena) override {
    return {{global_rope_.upload(step, arena, backend_), local_rope_.upload(step, arena, backend_)}};
  }

  void enqueue(const helios::StepCounts& counts, helios::ActivationArena& arena, helios::HistoryCaches& cache,
               const helios::StepLaunch& launch) override {
    const std::int32_t n = counts.n_tokens;
    const Views v{arena.view(x_, n),     arena.view(h_, n),          arena.view(qkv_, n),
                  arena.view(attn_, n),  arena.view(delta_, n),      arena.view(delta_norm_, n),
                  arena.view(gate_up_, n), arena.view(act_, n)};
    const helios::RotaryParams global = global_rope_.params(arena, counts.n_rows, launch.values.at(0));
    const helios::RotaryParams local = local_rope_.params(arena, counts.n_rows, launch.values.at(1));
    backend_.embedding(embed_, v.x);
    backend_.scale(v.x, std::sqrt(float(spec_.hidden_size)));
    backend_.rms_norm(v.x, nullptr, layers_[0].input_norm, spec_.rms_norm_eps, v.h);
    for (std::int32_t layer = 0; layer < spec_.n_layers; ++layer) {
      const Gemma3Layer& w = layers_[std::size_t(layer)];
      attention_block(v, layer, cache, w.sliding ? local : global);
      const bool last = layer + 1 == spec_.n_layers;
      // x += post_ff_norm(mlp); h = the next norm of x.
      project(backend_, v.h, w.gate_up, nullptr, v.gate_up);
      backend_.geglu(v.gate_up, v.act);
      project(backend_, v.act, w.down, nullptr, v.delta);
      residual_add_norm(v, w.post_ff_norm, last ? final_norm_ : layers_[std::size_t(layer) + 1].input_norm);
    }
    if (counts.n_logit_rows == 0) return;
    const Tensor logits = arena.view(helios::k_arena_logits, counts.n_logit_rows);
    const Tensor logit_in = arena.view(logit_in_, counts.n_logit_rows);
    backend_.gather_logit_rows(v.h, logit_in);
    backend_.linear(logit_in, lm_head_, nullptr, logits);
    if (spec_.final_logit_softcap > 0) backend_.soft_cap(logits, spec_.final_logit_softcap);
  }

 private:
  struct Views {
    Tensor x, h, qkv, attn, delta, delta_norm, gate_up, act;  // [n_tokens, ...]
  };

  // delta_norm = post_norm(delta); x += delta_norm; h = next_norm(x).
  void residual_add_norm(const Views& v, const Tensor& post_norm, const Tensor& next_norm) {
    backend_.rms_norm(v.delta, nullptr, post_norm, spec_.rms_norm_eps, v.delta_norm);
    Tensor residual = v.x;
    backend_.rms_norm(v.delta_norm, &residual, next_norm, spec_.rms_norm_eps, v.h);
  }

  void attention_block(const Views& v, std::int32_t layer, helios::HistoryCaches& cache, const helios::RotaryParams& rope) {
    const Gemma3Layer& w = layers_[std::size_t(layer)];
    project(backend_, v.h, w.qkv, nullptr, v.qkv);
    const Tensor q = v.qkv.slice_cols(0, spec_.q_width());
    const Tensor k = v.qkv.slice_cols(spec_.q_width(), spec_.kv_width());
    const Tensor value = v.qkv.slice_cols(spec_.q_width() + spec_.kv_width(), spec_.kv_width());
    const helios::QkNormParams qk_norm{w.q_norm, w.k_norm, spec_.rms_norm_eps};
    backend_.rotary_kv_store(cache.cache_of(layer), cache.slot_of(layer), q, k, value, spec_.head_dim, rope, &qk_norm);
    helios::AttentionParams params;
    params.layer = cache.slot_of(layer);
    params.n_heads = spec_.n_heads;
    params.n_kv_heads = spec_.n_kv_heads;
    params.head_dim = spec_.head_dim;
    params.scale = spec_.softmax_scale();
    params.sliding_window = spec_.layers[std::size_t(layer)].sliding_window;
    backend_.attention(cache.cache_of(layer), q, params, v.attn);
    project(backend_, v.attn, w.o, nullptr, v.delta);
    residual_add_norm(v, w.post_attention_norm, w.pre_ff_norm);  // x += post_attn_norm(o); h = pre_ff_norm(x)
  }

  const ModelSpec& spec_;
  helios::Backend& backend_;
  RopeTable global_rope_, local_rope_;
  Tensor embed_, final_norm_, lm_head_;
  std::vector<Gemma3Layer> layers_;
  std::int32_t x_ = 0, h_ = 0, qkv_ = 0, attn_ = 0, delta_ = 0, delta_norm_ = 0, gate_up_ = 0, act_ = 0, logit_in_ = 0;
};

std::unique_ptr<helios::StepProgram> program(const ModelSpec& spec, helios::Backend& backend,
                                             const LoadedWeights& weights) {
  return std::make_unique<Gemma3>(spec, backend, weights);
}

}  // namespace

extern const Architecture k_gemma3{"Gemma3ForCausalLM", configure, weight_table, paged_kv_history, plan_arena,
                                 program, paged_attention_kernel_needs};

}  // namespace flare::model
