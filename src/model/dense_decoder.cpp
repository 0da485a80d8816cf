// The dense decoder forward pass, written once for every dense family (Llama, Qwen2, Qwen3,
// Mistral) against the backend interface. Per step: embedding, then per layer
//   h = rms_norm(x)                      (fused with the residual add of the previous block)
//   qkv = h Wqkv (+b); [q/k head norm]; rotary; store k, v in pages; attention; o = attn Wo (+b)
//   h = rms_norm(x += o); gate_up = h Wgu; act = silu(gate) * up; mlp = act Wdown
// and finally x += mlp, rms_norm, the rows whose logits are wanted, lm_head -> F32 logits.
// A projection, the residual add after it and the next norm are one backend operation
// (project_residual_norm), so a device backend may fuse the GEMM's reduction into the norm.
// Intermediate tensors are named fields of Scratch so any of them can be dumped when debugging.
#include <algorithm>
#include <cmath>

#include "common/error.h"
#include "model/model.h"
#include "model/rope.h"

namespace flare::model {

using helios::DType;
using helios::Tensor;

struct Model::Scratch {
  std::int32_t capacity_tokens = 0, capacity_logits = 0, capacity_rows = 0, capacity_blocks = 0;
  std::unique_ptr<helios::Buffer> x, h, qkv, attn, delta, gate_up, act, logit_in, logits, rope;
  Tensor x_t, h_t, qkv_t, attn_t, delta_t, gate_up_t, act_t;  // [n_tokens, ...] views of capacity
};

std::unique_ptr<Model> Model::load(const std::filesystem::path& dir, helios::Backend& backend) {
  ModelSpec spec = model_spec_load(dir);
  Weights weights = weights_load(spec, dir, backend);
  return std::make_unique<Model>(std::move(spec), backend, std::move(weights));
}

Model::Model(ModelSpec spec, helios::Backend& backend, Weights weights)
    : spec_(std::move(spec)), backend_(backend), weights_(std::move(weights)), scratch_(std::make_shared<Scratch>()) {
  if (!rope_depends_on_length(spec_.rope)) {
    const RopeFrequencies freq = rope_frequencies(spec_, 0);
    rope_static_ = backend_.allocate(freq.inv_freq.size() * sizeof(float));
    backend_.upload(*rope_static_, 0, freq.inv_freq.data(), freq.inv_freq.size() * sizeof(float));
    rope_attention_factor_ = freq.attention_factor;
  }
}

helios::KvCacheLayout Model::kv_cache_layout(std::int32_t n_pages, std::int32_t page_size, DType dtype) const {
  return helios::KvCacheLayout{spec_.n_layers, n_pages, page_size, spec_.n_kv_heads, spec_.head_dim, dtype};
}

void Model::reserve(std::int32_t n_tokens, std::int32_t n_logit_rows, std::int32_t n_rows, std::int32_t n_blocks) {
  Scratch& s = *scratch_;
  const DType act = backend_.activation_dtype();
  const std::size_t e = helios::dtype_size_bytes(act);
  auto grow = [&](std::unique_ptr<helios::Buffer>& buffer, std::size_t bytes) {
    if (buffer && buffer->size_bytes() >= bytes) return;
    buffer = backend_.allocate(bytes);
    ++scratch_generation_;
  };
  if (n_tokens > s.capacity_tokens || n_rows > s.capacity_rows || n_blocks > s.capacity_blocks) {
    s.capacity_blocks = std::max(n_blocks, s.capacity_blocks);
    // Moving the step arrays changes the backend's graph generation, which the graphs check.
    backend_.reserve_step(std::max(n_tokens, s.capacity_tokens), std::max(n_rows, s.capacity_rows), s.capacity_blocks);
  }
  if (n_tokens > s.capacity_tokens) {
    const std::size_t t = std::size_t(n_tokens);
    grow(s.x, t * std::size_t(spec_.hidden_size) * e);
    grow(s.h, t * std::size_t(spec_.hidden_size) * e);
    grow(s.qkv, t * std::size_t(spec_.q_width() + 2 * spec_.kv_width()) * e);
    grow(s.attn, t * std::size_t(spec_.q_width()) * e);
    grow(s.delta, t * std::size_t(spec_.hidden_size) * e);
    grow(s.gate_up, t * std::size_t(2 * spec_.intermediate_size) * e);
    grow(s.act, t * std::size_t(spec_.intermediate_size) * e);
    s.capacity_tokens = n_tokens;
  }
  if (n_logit_rows > s.capacity_logits) {
    grow(s.logit_in, std::size_t(n_logit_rows) * std::size_t(spec_.hidden_size) * e);
    grow(s.logits, std::size_t(n_logit_rows) * std::size_t(spec_.vocab_size) * sizeof(float));
    s.capacity_logits = n_logit_rows;
  }
  if (n_rows > s.capacity_rows) {
    grow(s.rope, std::size_t(n_rows) * std::size_t(spec_.head_dim / 2) * sizeof(float));
    s.capacity_rows = n_rows;
  }
}

void Model::bind_scratch(std::int32_t n_tokens) {
  Scratch& s = *scratch_;
  const DType act = backend_.activation_dtype();
  const std::int64_t n = n_tokens;
  s.x_t = Tensor::of(*s.x, act, n, spec_.hidden_size);
  s.h_t = Tensor::of(*s.h, act, n, spec_.hidden_size);
  s.qkv_t = Tensor::of(*s.qkv, act, n, spec_.q_width() + 2 * spec_.kv_width());
  s.attn_t = Tensor::of(*s.attn, act, n, spec_.q_width());
  s.delta_t = Tensor::of(*s.delta, act, n, spec_.hidden_size);
  s.gate_up_t = Tensor::of(*s.gate_up, act, n, 2 * spec_.intermediate_size);
  s.act_t = Tensor::of(*s.act, act, n, spec_.intermediate_size);
}

helios::RotaryParams Model::rotary_for(const helios::Step& step) {
  const std::int64_t half = spec_.head_dim / 2;
  if (rope_static_) return {Tensor::of(*rope_static_, DType::f32, 1, half), rope_attention_factor_};
  // Dynamic NTK: each row's frequencies follow its length after this step (as transformers does
  // when it generates: the length is the last position + 1).
  std::vector<float> table;
  float attention_factor = 1.0f;
  for (const auto& row : step.rows) {
    const RopeFrequencies f = rope_frequencies(spec_, std::int64_t(row.start_position) + row.n_tokens);
    table.insert(table.end(), f.inv_freq.begin(), f.inv_freq.end());
    attention_factor = f.attention_factor;
  }
  backend_.upload_step_input(*scratch_->rope, 0, table.data(), table.size() * sizeof(float));
  return {Tensor::of(*scratch_->rope, DType::f32, step.n_rows(), half), attention_factor};
}

void Model::project(const Tensor& x, const Tensor& weight, const helios::WeightScales& scales, const Tensor* bias,
                    Tensor out) {
  if (weight.dtype == DType::f8_e4m3) {
    backend_.linear_fp8(x, weight, scales, bias, out);
  } else {
    backend_.linear(x, weight, bias, out);
  }
}

void Model::project_residual_norm(const Tensor& x, const Tensor& weight, const helios::WeightScales& scales,
                                  const Tensor& bias, const Tensor& norm_weight) {
  Scratch& s = *scratch_;
  if (weight.dtype == DType::f8_e4m3 || !bias.empty()) {
    project(x, weight, scales, bias.empty() ? nullptr : &bias, s.delta_t);
    backend_.rms_norm(s.delta_t, &s.x_t, norm_weight, spec_.rms_norm_eps, s.h_t);
    return;
  }
  backend_.linear_residual_rms_norm(x, weight, s.delta_t, s.x_t, norm_weight, spec_.rms_norm_eps, s.h_t);
}

void Model::attention_block(std::int32_t layer, helios::KvCache& cache, const helios::RotaryParams& rope) {
  Scratch& s = *scratch_;
  const LayerWeights& w = weights_.layers[std::size_t(layer)];
  project(s.h_t, w.qkv, w.qkv_scales, w.qkv_bias.empty() ? nullptr : &w.qkv_bias, s.qkv_t);
  Tensor q = s.qkv_t.slice_cols(0, spec_.q_width());
  Tensor k = s.qkv_t.slice_cols(spec_.q_width(), spec_.kv_width());
  Tensor v = s.qkv_t.slice_cols(spec_.q_width() + spec_.kv_width(), spec_.kv_width());
  // [q/k head norm], rotary and the KV store: one kernel on a device backend.
  const helios::QkNormParams qk_norm{w.q_norm, w.k_norm, spec_.rms_norm_eps};
  backend_.rotary_kv_store(cache, layer, q, k, v, spec_.head_dim, rope, spec_.qk_norm ? &qk_norm : nullptr);
  helios::AttentionParams params;
  params.layer = layer;
  params.n_heads = spec_.n_heads;
  params.n_kv_heads = spec_.n_kv_heads;
  params.head_dim = spec_.head_dim;
  params.scale = 1.0f / std::sqrt(float(spec_.head_dim));
  params.sliding_window = spec_.sliding_window;
  backend_.attention(cache, q, params, s.attn_t);
  project_residual_norm(s.attn_t, w.o, w.o_scales, w.o_bias, w.post_norm);  // x += attention; h = norm(x)
}

void Model::mlp_block(std::int32_t layer, const Tensor& next_norm) {
  Scratch& s = *scratch_;
  const LayerWeights& w = weights_.layers[std::size_t(layer)];
  if (w.gate_up.dtype == DType::f8_e4m3) {
    project(s.h_t, w.gate_up, w.gate_up_scales, nullptr, s.gate_up_t);
    backend_.swiglu(s.gate_up_t, s.act_t);
  } else {
    backend_.linear_swiglu(s.h_t, w.gate_up, s.gate_up_t, s.act_t);
  }
  project_residual_norm(s.act_t, w.down, w.down_scales, Tensor{}, next_norm);  // x += mlp; h = norm(x)
}

std::vector<float> Model::forward(const helios::Step& step, helios::KvCache& cache) {
  forward_logits(step, cache);
  std::vector<float> logits(std::size_t(step.n_logit_rows()) * std::size_t(spec_.vocab_size));
  if (!logits.empty()) backend_.download(*scratch_->logits, 0, logits.data(), logits.size() * sizeof(float));
  return logits;
}

void Model::download_logits(std::int32_t first_row, std::int32_t n_rows, std::span<float> out) {
  const std::size_t vocab = std::size_t(spec_.vocab_size), n = std::size_t(n_rows) * vocab;
  if (first_row < 0 || n_rows < 0 || first_row + n_rows > scratch_->capacity_logits || out.size() != n) {
    fail(ExitCode::failure, "internal: downloading logits rows {}..{} into {} floats", first_row, first_row + n_rows,
         out.size());
  }
  if (n > 0) backend_.download(*scratch_->logits, std::size_t(first_row) * vocab * sizeof(float), out.data(), n * sizeof(float));
}

Tensor Model::forward_logits(const helios::Step& step, helios::KvCache& cache) {
  if (cache.layout.n_layers != spec_.n_layers || cache.layout.n_kv_heads != spec_.n_kv_heads ||
      cache.layout.head_dim != spec_.head_dim) {
    fail(ExitCode::failure, "internal: KV cache layout does not match the model");
  }
  const std::int32_t n = step.n_tokens();
  const std::int32_t n_logits = step.n_logit_rows();
  reserve(std::max(n, 1), std::max(n_logits, 1), std::max(step.n_rows(), 1), std::int32_t(step.block_tables.size()));
  if (n == 0) return Tensor::of(*scratch_->logits, DType::f32, 0, spec_.vocab_size);
  const CapturedStep* graph = graph_for(step, cache);  // before the uploads: a recapture makes its own
  const helios::RotaryParams rope = upload_step(step, cache);
  if (graph && graph->attention_factor == rope.attention_factor) {
    backend_.replay(*graph->graph);
    ++n_graph_replays_;
  } else {
    enqueue_step(n_logits, cache, rope);
  }
  return Tensor::of(*scratch_->logits, DType::f32, n_logits, spec_.vocab_size);
}

helios::RotaryParams Model::upload_step(const helios::Step& step, const helios::KvCache& cache) {
  // Graph replays skip the embedding's host-side check of the token ids, so check them here.
  for (const std::int32_t token : step.tokens) {
    if (token < 0 || token >= spec_.vocab_size) fail_input("token id {} outside the vocabulary 0..{}", token, spec_.vocab_size - 1);
  }
  bind_scratch(step.n_tokens());
  backend_.begin_step(step, cache);
  return rotary_for(step);
}

void Model::enqueue_step(std::int32_t n_logits, helios::KvCache& cache, const helios::RotaryParams& rope) {
  Scratch& s = *scratch_;
  backend_.embedding(weights_.embed, s.x_t);
  backend_.rms_norm(s.x_t, nullptr, weights_.layers[0].input_norm, spec_.rms_norm_eps, s.h_t);
  for (std::int32_t layer = 0; layer < spec_.n_layers; ++layer) {
    attention_block(layer, cache, rope);
    // The MLP's residual add goes with the norm after it: the next layer's input norm, or the final one.
    const bool last = layer + 1 == spec_.n_layers;
    mlp_block(layer, last ? weights_.final_norm : weights_.layers[std::size_t(layer) + 1].input_norm);
  }
  if (n_logits == 0) return;
  const Tensor logits_t = Tensor::of(*s.logits, DType::f32, n_logits, spec_.vocab_size);
  const Tensor logit_in = Tensor::of(*s.logit_in, backend_.activation_dtype(), n_logits, spec_.hidden_size);
  backend_.gather_logit_rows(s.h_t, logit_in);
  backend_.linear(logit_in, weights_.lm_head, nullptr, logits_t);
}

}  // namespace flare::model
