#include "bench/cuda/random_weights.h"

#include <algorithm>

namespace flare::bench::cuda {
namespace {

using helios::DType;

constexpr float k_matrix_scale = 0.02f, k_norm_spread = 0.05f;

struct Builder {
  helios::Backend& backend;
  DeviceFill& fill;
  model::Weights& weights;
  std::uint64_t seed;
  DType matrices;
  std::int64_t max_fp8_cols = 0;

  helios::Tensor make(DType dtype, std::int64_t rows, std::int64_t cols, float scale, float offset) {
    auto buffer = backend.allocate(std::size_t(rows * cols) * helios::dtype_size_bytes(dtype));
    const helios::Tensor t = helios::Tensor::of(*buffer, dtype, rows, cols);
    fill.tensor(t, seed++, scale, offset);
    weights.buffers.push_back(std::move(buffer));
    return t;
  }
  helios::Tensor matrix(std::int64_t rows, std::int64_t cols) { return make(DType::bf16, rows, cols, k_matrix_scale, 0); }
  // A projection matrix: FP8 with 128 x 128 block scales where asked for and the backend takes it.
  helios::Tensor projection(std::int64_t rows, std::int64_t cols, helios::WeightScales& scales) {
    if (matrices != DType::f8_e4m3 || !backend.supports_fp8_weights(rows, cols, 128, 128)) return matrix(rows, cols);
    scales.block_rows = scales.block_cols = 128;
    scales.scales = make(DType::f32, (rows + 127) / 128, (cols + 127) / 128, 0.001f, 0.005f);
    max_fp8_cols = std::max(max_fp8_cols, cols);
    return make(DType::f8_e4m3, rows, cols, 0, 0);
  }
  helios::Tensor norm(std::int64_t n) { return make(DType::f32, 1, n, k_norm_spread, 1.0f); }
  helios::Tensor bias(std::int64_t n) { return make(DType::f32, 1, n, k_matrix_scale, 0); }
};

}  // namespace

model::Weights random_weights(const model::ModelSpec& spec, helios::Backend& backend, DeviceFill& fill,
                              std::uint64_t seed, DType matrices) {
  model::Weights weights;
  Builder b{backend, fill, weights, seed * 1000003, matrices};
  const std::int64_t h = spec.hidden_size, q = spec.q_width(), kv = spec.kv_width(), inter = spec.intermediate_size;
  weights.embed = b.matrix(spec.vocab_size, h);
  weights.final_norm = b.norm(h);
  weights.lm_head = spec.tie_word_embeddings ? weights.embed : b.matrix(spec.vocab_size, h);
  for (std::int32_t layer = 0; layer < spec.n_layers; ++layer) {
    model::LayerWeights w;
    w.input_norm = b.norm(h);
    w.qkv = b.projection(q + 2 * kv, h, w.qkv_scales);
    if (spec.qkv_bias) w.qkv_bias = b.bias(q + 2 * kv);
    w.o = b.projection(h, q, w.o_scales);
    if (spec.o_bias) w.o_bias = b.bias(h);
    if (spec.qk_norm) {
      w.q_norm = b.norm(spec.head_dim);
      w.k_norm = b.norm(spec.head_dim);
    }
    w.post_norm = b.norm(h);
    w.gate_up = b.projection(2 * inter, h, w.gate_up_scales);
    w.down = b.projection(h, inter, w.down_scales);
    weights.layers.push_back(w);
  }
  if (b.max_fp8_cols > 0) backend.reserve_fp8_linear(b.max_fp8_cols);
  backend.synchronize();
  return weights;
}

}  // namespace flare::bench::cuda
