// The mixture-of-experts decoder (see moe_decoder.h). Per step: embedding, then per layer
//   h = rms_norm(x); attn = attention(h) Wo; x += attn; h = rms_norm(x)
//   experts layers: logits = h Wrouter (f32); ids, weights = top_k(softmax(logits))
//                   moe = sum_j weights_j * down[ids_j](silu(gate[ids_j] h) * up[ids_j] h)
//   dense layers:   moe = down(silu(gate h) * up h)
//   x += moe; h = next norm(x)
// and the final norm, the rows whose logits are wanted, lm_head -> F32 logits. Router logits are
// F32 (transformers takes the softmax in float32); the experts run as one backend operation that
// reads only the experts some token chose. gpt-oss adds what its weight table holds: attention
// sinks, a router bias, expert biases, MXFP4 experts and the clamped SwiGLU (MoeSpec::swiglu_limit).
#include "model/architectures/moe_decoder.h"

#include <fmt/format.h>

#include "common/error.h"
#include "model/architectures/config_context.h"
#include "model/blocks.h"
#include "model/rope_table.h"

namespace flare::model {
namespace {

using helios::DType;
using helios::Tensor;

struct MoeLayer {
  Tensor input_norm, post_norm;  // f32
  AttentionWeights attention;
  Weight gate_up, down;                  // dense layers
  Weight router;                         // experts layers: [n_experts, hidden]
  Tensor router_bias;                    // [1, n_experts] f32, or empty
  helios::MoeExperts experts;            // experts layers
};

// A [n_tokens, k * cols] buffer as the [n_tokens * k, cols] rows of the (token, slot) pairs.
Tensor pair_rows(Tensor t, std::int64_t k) {
  t.rows *= k;
  t.cols /= k;
  t.stride /= k;
  return t;
}

class MoeDecoder final : public helios::StepProgram {
 public:
  MoeDecoder(const ModelSpec& spec, helios::Backend& backend, const LoadedWeights& weights)
      : spec_(spec), backend_(backend), rope_(spec.rope, spec.head_dim, spec.max_position_embeddings, backend) {
    embed_ = weights.at("embed").values;
    final_norm_ = weights.at("final_norm").values;
    lm_head_ = weights.at("lm_head").values;
    for (std::int32_t layer = 0; layer < spec.n_layers; ++layer) {
      const std::string t = fmt::format("layers.{}.", layer);
      MoeLayer w;
      w.input_norm = weights.at(t + "input_norm").values;
      w.attention = attention_weights(weights, t);
      w.post_norm = weights.at(t + "post_norm").values;
      if (spec.layers[std::size_t(layer)].experts) {
        w.router = weights.at(t + "router");
        w.router_bias = weights.tensor_or_empty(t + "router_bias");
        const Weight& gate_up = weights.at(t + "experts.gate_up");
        const Weight& down = weights.at(t + "experts.down");
        w.experts.gate_up = gate_up.values;
        w.experts.gate_up_quant = gate_up.quant;
        w.experts.down = down.values;
        w.experts.down_quant = down.quant;
        w.experts.gate_up_bias = weights.tensor_or_empty(t + "experts.gate_up_bias");
        w.experts.down_bias = weights.tensor_or_empty(t + "experts.down_bias");
        w.experts.activation =
            spec.moe.swiglu_limit > 0 ? helios::GatedActivation::clamped_silu : helios::GatedActivation::silu;
        w.experts.clamp_limit = spec.moe.swiglu_limit;
      } else {
        w.gate_up = weights.at(t + "gate_up");
        w.down = weights.at(t + "down");
      }
      layers_.push_back(w);
    }
  }

  std::int32_t vocab_size() const override { return spec_.vocab_size; }

  void plan_arena(helios::ArenaPlan& plan) override {
    moe_plan_arena(spec_, backend_.activation_dtype(), plan);
    x_ = plan.slot("x");
    h_ = plan.slot("h");
    qkv_ = plan.slot("qkv");
    attn_ = plan.slot("attn");
    delta_ = plan.slot("delta");
    router_logits_ = plan.slot("router_logits");
    expert_ids_ = plan.slot("expert_ids");
    expert_weights_ = plan.slot("expert_weights");
    pair_gate_up_ = plan.slot("pair_gate_up");
    pair_act_ = plan.slot("pair_act");
    pair_out_ = plan.slot("pair_out");
    if (has_dense_layers()) {
      gate_up_ = plan.slot("gate_up");
      act_ = plan.slot("act");
    }
    logit_in_ = plan.slot("logit_in");
    rope_.bind(plan, "rope");
  }

  void check_cache(const helios::HistoryLayout& layout) const override { paged_kv_check(spec_, layout); }

  helios::StepLaunch upload(const helios::Step& step, helios::ActivationArena& arena) override {
    return {{rope_.upload(step, arena, backend_)}};
  }

  void enqueue(const helios::StepCounts& counts, helios::ActivationArena& arena, helios::HistoryCaches& cache,
               const helios::StepLaunch& launch) override {
    const std::int32_t n = counts.n_tokens;
    const Tensor x = arena.view(x_, n), h = arena.view(h_, n), qkv = arena.view(qkv_, n), attn = arena.view(attn_, n),
                 delta = arena.view(delta_, n);
    const helios::RotaryParams rope = rope_.params(arena, counts.n_rows, launch.values.at(0));
    backend_.embedding(embed_, x);
    backend_.rms_norm(x, nullptr, layers_[0].input_norm, spec_.rms_norm_eps, h);
    for (std::int32_t layer = 0; layer < spec_.n_layers; ++layer) {
      const MoeLayer& w = layers_[std::size_t(layer)];
      attention_core(backend_, spec_, layer, w.attention, h, qkv, attn, cache, rope);
      project_residual_norm(backend_, spec_.rms_norm_eps, {x, h, delta}, attn, w.attention.o, w.attention.o_bias,
                            w.post_norm);  // x += attention; h = norm(x)
      const bool last = layer + 1 == spec_.n_layers;
      const Tensor& next_norm = last ? final_norm_ : layers_[std::size_t(layer) + 1].input_norm;
      if (spec_.layers[std::size_t(layer)].experts) {
        experts_block(arena, n, w, h, delta);
        Tensor residual = x;
        backend_.rms_norm(delta, &residual, next_norm, spec_.rms_norm_eps, h);  // x += moe; h = norm(x)
      } else {
        const Tensor act = arena.view(act_, n);
        swiglu_mlp_up(backend_, h, w.gate_up, arena.view(gate_up_, n), act);
        project_residual_norm(backend_, spec_.rms_norm_eps, {x, h, delta}, act, w.down, Tensor{}, next_norm);  // x += mlp
      }
    }
    if (counts.n_logit_rows == 0) return;
    const Tensor logits = arena.view(helios::k_arena_logits, counts.n_logit_rows);
    const Tensor logit_in = arena.view(logit_in_, counts.n_logit_rows);
    backend_.gather_logit_rows(h, logit_in);
    backend_.linear(logit_in, lm_head_, nullptr, logits);
  }

 private:
  bool has_dense_layers() const {
    for (const LayerSpec& layer : spec_.layers) {
      if (!layer.experts) return true;
    }
    return false;
  }

  // delta = the experts' weighted sum for h.
  void experts_block(const helios::ActivationArena& arena, std::int32_t n, const MoeLayer& w, const Tensor& h,
                     const Tensor& delta) {
    const std::int64_t k = spec_.moe.top_k;
    const Tensor logits = arena.view(router_logits_, n), ids = arena.view(expert_ids_, n),
                 weights = arena.view(expert_weights_, n);
    project(backend_, h, w.router, w.router_bias.empty() ? nullptr : &w.router_bias, logits);
    backend_.router_topk(logits, {spec_.moe.top_k, spec_.moe.renormalize}, ids, weights);
    const helios::MoeScratch scratch{pair_rows(arena.view(pair_gate_up_, n), k), pair_rows(arena.view(pair_act_, n), k),
                                     pair_rows(arena.view(pair_out_, n), k)};
    backend_.moe_experts(h, ids, weights, w.experts, scratch, delta);
  }

  const ModelSpec& spec_;
  helios::Backend& backend_;
  RopeTable rope_;
  Tensor embed_, final_norm_, lm_head_;
  std::vector<MoeLayer> layers_;
  std::int32_t x_ = 0, h_ = 0, qkv_ = 0, attn_ = 0, delta_ = 0, gate_up_ = 0, act_ = 0, logit_in_ = 0;
  std::int32_t router_logits_ = 0, expert_ids_ = 0, expert_weights_ = 0, pair_gate_up_ = 0, pair_act_ = 0,
               pair_out_ = 0;
};

// Experts e of a layer, each matrix's parts in turn: gate_up stacks [gate_e; up_e], down is down_e.
std::vector<WeightSource> expert_sources(const ModelSpec& spec, const std::string& prefix, const ExpertNames& names,
                                         bool gate_up) {
  std::vector<WeightSource> sources;
  const std::int64_t inter = spec.moe.expert_intermediate_size;
  for (std::int32_t e = 0; e < spec.moe.n_experts; ++e) {
    const std::string expert = fmt::format("{}{}experts.{}.", prefix, names.block, e);
    if (gate_up) {
      sources.push_back({fmt::format("{}{}.weight", expert, names.gate), inter});
      sources.push_back({fmt::format("{}{}.weight", expert, names.up), inter});
    } else {
      sources.push_back({fmt::format("{}{}.weight", expert, names.down), spec.hidden_size});
    }
  }
  return sources;
}

}  // namespace

WeightTable moe_weight_table(const ModelSpec& spec, const ExpertNames& names) {
  const std::int64_t h = spec.hidden_size;
  WeightTable table;
  table.groups.push_back(embedding_group(spec, table, WeightTransform::none));
  for (std::int32_t layer = 0; layer < spec.n_layers; ++layer) {
    const std::string p = fmt::format("model.layers.{}.", layer), t = fmt::format("layers.{}.", layer);
    WeightGroup g{fmt::format("weights/layer-{:03}", layer), {}};
    g.entries.push_back(vector_entry(t + "input_norm", p + "input_layernorm.weight", h, "norm"));
    attention_entries(spec, p, t, g.entries);
    g.entries.push_back(vector_entry(t + "post_norm", p + "post_attention_layernorm.weight", h, "norm"));
    if (spec.layers[std::size_t(layer)].experts) {
      // The router stays BF16 (FP8 checkpoints leave it unquantized); expert stacks split by experts.
      g.entries.push_back({t + "router", WeightKind::projection,
                           {{fmt::format("{}{}gate.weight", p, names.block), spec.moe.n_experts}}, h, "router"});
      g.entries.push_back({t + "experts.gate_up", WeightKind::projection, expert_sources(spec, p, names, true), h,
                           "experts.gate_up", WeightTransform::none, TensorSplit::rows, spec.moe.n_experts});
      g.entries.push_back({t + "experts.down", WeightKind::projection, expert_sources(spec, p, names, false),
                           spec.moe.expert_intermediate_size, "experts.down", WeightTransform::none, TensorSplit::cols,
                           spec.moe.n_experts});
    } else {
      g.entries.push_back(gate_up_entry(spec, p, t));
      g.entries.push_back(down_entry(spec, p, t));
    }
    table.groups.push_back(std::move(g));
  }
  return table;
}

std::vector<helios::HistorySpec> moe_history(const ModelSpec& spec) { return paged_kv_history(spec); }

void moe_plan_arena(const ModelSpec& spec, DType act, helios::ArenaPlan& plan) {
  using helios::ArenaRows;
  const std::int64_t k = spec.moe.top_k, inter = spec.moe.expert_intermediate_size;
  plan.add("x", ArenaRows::tokens, spec.hidden_size, act);  // the residual stream
  plan.add("h", ArenaRows::tokens, spec.hidden_size, act);  // its norm, each block's input
  plan.add("qkv", ArenaRows::tokens, spec.q_width() + 2 * spec.kv_width(), act);
  plan.add("attn", ArenaRows::tokens, spec.q_width(), act);
  plan.add("delta", ArenaRows::tokens, spec.hidden_size, act);  // a block's output before the residual add
  plan.add("router_logits", ArenaRows::tokens, spec.moe.n_experts, DType::f32);
  plan.add("expert_ids", ArenaRows::tokens, k, DType::i32);
  plan.add("expert_weights", ArenaRows::tokens, k, DType::f32);
  plan.add("pair_gate_up", ArenaRows::tokens, k * 2 * inter, act);  // per (token, slot) pair
  plan.add("pair_act", ArenaRows::tokens, k * inter, act);
  plan.add("pair_out", ArenaRows::tokens, k * spec.hidden_size, act);
  for (const LayerSpec& layer : spec.layers) {
    if (layer.experts) continue;
    plan.add("gate_up", ArenaRows::tokens, 2 * spec.intermediate_size, act);
    plan.add("act", ArenaRows::tokens, spec.intermediate_size, act);
    break;
  }
  plan.add("logit_in", ArenaRows::logit_rows, spec.hidden_size, act);
  RopeTable::plan(spec.rope, spec.head_dim, "rope", plan);
}

std::unique_ptr<helios::StepProgram> moe_program(const ModelSpec& spec, helios::Backend& backend,
                                                 const LoadedWeights& weights) {
  return std::make_unique<MoeDecoder>(spec, backend, weights);
}

void moe_check(const ConfigContext& config, const ModelSpec& spec, std::string_view experts_field,
               std::string_view top_k_field) {
  if (spec.activation != Activation::silu) config.reject("hidden_act", "the experts' MLP is SwiGLU (silu)");
  if (spec.quantization.mxfp4 && spec.moe.swiglu_limit == 0) {
    config.reject("quantization_config", "MXFP4 weights are read for gpt-oss experts only");
  }
  if (spec.moe.n_experts < 1) config.reject(experts_field, "must be at least 1");
  if (spec.moe.top_k < 1 || spec.moe.top_k > spec.moe.n_experts) {
    config.reject(top_k_field, fmt::format("must be between 1 and the {} experts", spec.moe.n_experts));
  }
}

}  // namespace flare::model
