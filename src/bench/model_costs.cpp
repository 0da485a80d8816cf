#include "bench/model_costs.h"

namespace flare::bench {
namespace {

// Parameters of one layer's matrices (q, k, v, o, gate, up, down).
double layer_matrix_parameters(const model::ModelSpec& s) {
  const double h = s.hidden_size, q = s.q_width(), kv = s.kv_width(), inter = s.intermediate_size;
  return h * (q + 2 * kv) + q * h + 3 * h * inter;
}

}  // namespace

double decode_weight_bytes(const model::ModelSpec& s, helios::DType matrices) {
  const double h = s.hidden_size, q = s.q_width(), kv = s.kv_width();
  // FP8 matrices: a byte per weight and an f32 scale per 128 x 128 block.
  const double per_weight = matrices == helios::DType::f8_e4m3 ? 1.0 + 4.0 / (128 * 128) : 2.0;
  double layer = per_weight * layer_matrix_parameters(s) + 4.0 * 2 * h;  // two norms f32
  if (s.qkv_bias) layer += 4.0 * (q + 2 * kv);
  if (s.o_bias) layer += 4.0 * h;
  if (s.qk_norm) layer += 4.0 * 2 * s.head_dim;
  return layer * s.n_layers + 4.0 * h + 2.0 * double(s.vocab_size) * h;
}

double kv_bytes_per_token(const model::ModelSpec& s, helios::DType kv_dtype) {
  return 2.0 * double(s.kv_width()) * double(helios::dtype_size_bytes(kv_dtype)) * s.n_layers;
}

double prefill_flops(const model::ModelSpec& s, std::int64_t n_tokens, std::int64_t n_logits) {
  const double n = double(n_tokens);
  const double linear = 2.0 * layer_matrix_parameters(s) * n * s.n_layers;
  const double attention = 4.0 * s.n_heads * s.head_dim * (n * (n + 1) / 2) * s.n_layers;
  const double head = 2.0 * double(n_logits) * s.hidden_size * double(s.vocab_size);
  return linear + attention + head;
}

}  // namespace flare::bench
