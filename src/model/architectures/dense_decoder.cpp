// The dense decoder (Llama, Qwen2, Qwen3, Mistral): its weight table, its history, and its forward
// program. Per step: embedding, then per layer
//   h = rms_norm(x)                      (fused with the residual add of the previous block)
//   qkv = h Wqkv (+b); [q/k head norm]; rotary; store k, v in pages; attention; o = attn Wo (+b)
//   h = rms_norm(x += o); gate_up = h Wgu; act = silu(gate) * up; mlp = act Wdown
// and finally x += mlp, rms_norm, the rows whose logits are wanted, lm_head -> F32 logits.
// A projection, the residual add after it and the next norm are one backend operation
// (project_residual_norm), so a device backend may fuse the GEMM's reduction into the norm.
// Intermediate tensors are named arena buffers so any of them can be dumped when debugging.
#include "model/architectures/dense_decoder.h"

#include <fmt/format.h>

#include "common/error.h"
#include "model/architectures/config_context.h"
#include "model/blocks.h"
#include "model/rope_table.h"

namespace flare::model {
namespace {

using helios::DType;
using helios::Tensor;

struct DenseLayer {
  Tensor input_norm, post_norm;  // f32
  AttentionWeights attention;
  Weight gate_up, down;
};

class DenseDecoder final : public helios::StepProgram {
 public:
  DenseDecoder(const ModelSpec& spec, helios::Backend& backend, const LoadedWeights& weights)
      : spec_(spec), backend_(backend), rope_(spec.rope, spec.head_dim, spec.max_position_embeddings, backend) {
    embed_ = weights.at("embed").values;
    final_norm_ = weights.at("final_norm").values;
    lm_head_ = weights.at("lm_head").values;
    for (std::int32_t layer = 0; layer < spec.n_layers; ++layer) {
      const std::string t = fmt::format("layers.{}.", layer);
      DenseLayer w;
      w.input_norm = weights.at(t + "input_norm").values;
      w.attention = attention_weights(weights, t);
      w.post_norm = weights.at(t + "post_norm").values;
      w.gate_up = weights.at(t + "gate_up");
      w.down = weights.at(t + "down");
      layers_.push_back(w);
    }
  }

  std::int32_t vocab_size() const override { return spec_.vocab_size; }

  void plan_arena(helios::ArenaPlan& plan) override {
    dense_plan_arena(spec_, backend_.activation_dtype(), plan);
    x_ = plan.slot("x");
    h_ = plan.slot("h");
    qkv_ = plan.slot("qkv");
    attn_ = plan.slot("attn");
    delta_ = plan.slot("delta");
    gate_up_ = plan.slot("gate_up");
    act_ = plan.slot("act");
    logit_in_ = plan.slot("logit_in");
    rope_.bind(plan, "rope");
  }

  void check_cache(const helios::HistoryLayout& layout) const override { paged_kv_check(spec_, layout); }

  helios::StepLaunch upload(const helios::Step& step, helios::ActivationArena& arena) override {
    return {{rope_.upload(step, arena, backend_)}};
  }

  void enqueue(const helios::StepCounts& counts, helios::ActivationArena& arena, helios::HistoryCaches& cache,
               const helios::StepLaunch& launch) override {
    Views v = bind(arena, counts.n_tokens);
    const helios::RotaryParams rope = rope_.params(arena, counts.n_rows, launch.values.at(0));
    backend_.embedding(embed_, v.x);
    backend_.rms_norm(v.x, nullptr, layers_[0].input_norm, spec_.rms_norm_eps, v.h);
    for (std::int32_t layer = 0; layer < spec_.n_layers; ++layer) {
      attention_block(v, layer, cache, rope);
      // The MLP's residual add goes with the norm after it: the next layer's input norm, or the final one.
      const bool last = layer + 1 == spec_.n_layers;
      mlp_block(v, layer, last ? final_norm_ : layers_[std::size_t(layer) + 1].input_norm);
    }
    if (counts.n_logit_rows == 0) return;
    const Tensor logits = arena.view(helios::k_arena_logits, counts.n_logit_rows);
    const Tensor logit_in = arena.view(logit_in_, counts.n_logit_rows);
    backend_.gather_logit_rows(v.h, logit_in);
    backend_.linear(logit_in, lm_head_, nullptr, logits);
  }

 private:
  struct Views {
    Tensor x, h, qkv, attn, delta, gate_up, act;  // [n_tokens, ...]
  };

  Views bind(const helios::ActivationArena& arena, std::int32_t n) const {
    return {arena.view(x_, n),     arena.view(h_, n),       arena.view(qkv_, n), arena.view(attn_, n),
            arena.view(delta_, n), arena.view(gate_up_, n), arena.view(act_, n)};
  }

  void project(const Tensor& x, const Weight& w, const Tensor* bias, Tensor out) {
    model::project(backend_, x, w, bias, out);
  }

  // x @ weight^T (+ bias), then x += it and h = rms_norm(x) * norm_weight (blocks.h).
  void project_residual_norm(const Views& v, const Tensor& in, const Weight& w, const Tensor& bias,
                             const Tensor& norm_weight) {
    model::project_residual_norm(backend_, spec_.rms_norm_eps, {v.x, v.h, v.delta}, in, w, bias, norm_weight);
  }

  void attention_block(const Views& v, std::int32_t layer, helios::HistoryCaches& cache, const helios::RotaryParams& rope) {
    const DenseLayer& w = layers_[std::size_t(layer)];
    attention_core(backend_, spec_, layer, w.attention, v.h, v.qkv, v.attn, cache, rope);
    project_residual_norm(v, v.attn, w.attention.o, w.attention.o_bias, w.post_norm);  // x += attention; h = norm(x)
  }

  // Ends with the residual add and `next_norm`, the norm of whatever reads x next.
  void mlp_block(const Views& v, std::int32_t layer, const Tensor& next_norm) {
    const DenseLayer& w = layers_[std::size_t(layer)];
    swiglu_mlp_up(backend_, v.h, w.gate_up, v.gate_up, v.act);
    project_residual_norm(v, v.act, w.down, Tensor{}, next_norm);  // x += mlp; h = norm(x)
  }

  const ModelSpec& spec_;
  helios::Backend& backend_;
  RopeTable rope_;
  Tensor embed_, final_norm_, lm_head_;
  std::vector<DenseLayer> layers_;
  std::int32_t x_ = 0, h_ = 0, qkv_ = 0, attn_ = 0, delta_ = 0, gate_up_ = 0, act_ = 0, logit_in_ = 0;
};

}  // namespace

WeightTable dense_weight_table(const ModelSpec& spec) {
  const std::int64_t h = spec.hidden_size;
  WeightTable table;
  table.groups.push_back(embedding_group(spec, table, WeightTransform::none));
  for (std::int32_t layer = 0; layer < spec.n_layers; ++layer) {
    const std::string p = fmt::format("model.layers.{}.", layer), t = fmt::format("layers.{}.", layer);
    WeightGroup g{fmt::format("weights/layer-{:03}", layer), {}};
    g.entries.push_back(vector_entry(t + "input_norm", p + "input_layernorm.weight", h, "norm"));
    attention_entries(spec, p, t, g.entries);
    g.entries.push_back(vector_entry(t + "post_norm", p + "post_attention_layernorm.weight", h, "norm"));
    g.entries.push_back(gate_up_entry(spec, p, t));
    g.entries.push_back(down_entry(spec, p, t));
    table.groups.push_back(std::move(g));
  }
  return table;
}

std::vector<helios::HistorySpec> dense_history(const ModelSpec& spec) { return paged_kv_history(spec); }

void dense_plan_arena(const ModelSpec& spec, DType act, helios::ArenaPlan& plan) {
  using helios::ArenaRows;
  plan.add("x", ArenaRows::tokens, spec.hidden_size, act);  // the residual stream
  plan.add("h", ArenaRows::tokens, spec.hidden_size, act);  // its norm, each block's input
  plan.add("qkv", ArenaRows::tokens, spec.q_width() + 2 * spec.kv_width(), act);
  plan.add("attn", ArenaRows::tokens, spec.q_width(), act);
  plan.add("delta", ArenaRows::tokens, spec.hidden_size, act);  // a block's output before the residual add
  plan.add("gate_up", ArenaRows::tokens, 2 * spec.intermediate_size, act);
  plan.add("act", ArenaRows::tokens, spec.intermediate_size, act);
  plan.add("logit_in", ArenaRows::logit_rows, spec.hidden_size, act);
  RopeTable::plan(spec.rope, spec.head_dim, "rope", plan);
}

std::unique_ptr<helios::StepProgram> dense_program(const ModelSpec& spec, helios::Backend& backend,
                                                   const LoadedWeights& weights) {
  return std::make_unique<DenseDecoder>(spec, backend, weights);
}

void dense_check(const ConfigContext& config, const ModelSpec& spec) {
  if (spec.activation != Activation::silu) config.reject("hidden_act", "the dense decoder's MLP is SwiGLU (silu)");
  if (spec.quantization.mxfp4) config.reject("quantization_config", "MXFP4 weights are read for gpt-oss experts only");
}

}  // namespace flare::model
