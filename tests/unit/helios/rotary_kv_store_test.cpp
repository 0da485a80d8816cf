// The fused rotary_kv_store on the CPU backend (the Backend default) against its definition:
// [head_rms_norm of q and k], rotary, then kv_store, run one by one on copies of the same inputs.
// q, k and every KV page byte must match exactly, for every KV dtype, shared and per-row
// frequencies, partial rotary, with and without the q/k norm, on rows that cross page boundaries.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "helios/cpu/cpu_backend.h"

namespace flare::helios {
namespace {

struct Case {
  DType kv_dtype;
  std::int32_t half;  // rotary_dim / 2 (head_dim / 2: full)
  bool per_row_freq, qk_norm;
};

// A host tensor [rows, cols] over `values`.
Tensor view(std::vector<float>& values, std::int64_t rows, std::int64_t cols) {
  return Tensor{values.data(), DType::f32, rows, cols, cols};
}

void check(const Case& c) {
  std::mt19937 rng(11);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  auto random = [&](std::size_t n) {
    std::vector<float> v(n);
    for (auto& x : v) x = normal(rng);
    return v;
  };
  const std::int32_t n_heads = 6, n_kv = 2, d = 16, page = 4;
  cpu::CpuBackend backend(2);
  // Rows: a prefill chunk crossing two page boundaries, a decode token on a page's last slot, one on
  // a page's first slot; pages out of order.
  Step step;
  step.rows = {{9, 2, 1, 0, 3}, {1, 7, 1, 3, 2}, {1, 8, 1, 5, 3}};
  step.block_tables = {5, 0, 9, 3, 7, 1, 8, 2};
  step.tokens.assign(11, 0);
  const std::int64_t n = step.n_tokens();
  const KvCacheLayout layout{2, 10, page, n_kv, d, c.kv_dtype};
  KvCache fused = backend.allocate_kv_cache(layout), apart = backend.allocate_kv_cache(layout);
  backend.begin_step(step, fused);

  std::vector<float> q = random(std::size_t(n * n_heads * d)), k = random(std::size_t(n * n_kv * d));
  std::vector<float> v = random(std::size_t(n * n_kv * d));
  std::vector<float> q2 = q, k2 = k;
  std::vector<float> inv_freq;
  const std::int64_t freq_rows = c.per_row_freq ? step.n_rows() : 1;
  for (std::int64_t r = 0; r < freq_rows; ++r) {
    for (std::int32_t i = 0; i < c.half; ++i) inv_freq.push_back(std::pow(10000.0f * float(r + 1), -float(i) / float(c.half)));
  }
  std::vector<float> q_w = random(std::size_t(d)), k_w = random(std::size_t(d));
  const RotaryParams rope{view(inv_freq, freq_rows, c.half), c.per_row_freq ? 1.25f : 1.0f};
  const QkNormParams norm{view(q_w, 1, d), view(k_w, 1, d), 1e-6f};
  const QkNormParams* qk_norm = c.qk_norm ? &norm : nullptr;

  for (std::int32_t layer : {1, 0}) {
    backend.rotary_kv_store(fused, layer, view(q, n, n_heads * d), view(k, n, n_kv * d), view(v, n, n_kv * d), d, rope,
                            qk_norm);
    if (qk_norm) {
      backend.head_rms_norm(view(q2, n, n_heads * d), d, norm.q_weight, norm.eps);
      backend.head_rms_norm(view(k2, n, n_kv * d), d, norm.k_weight, norm.eps);
    }
    backend.rotary(view(q2, n, n_heads * d), view(k2, n, n_kv * d), d, rope);
    backend.kv_store(apart, layer, view(k2, n, n_kv * d), view(v, n, n_kv * d));
    EXPECT_EQ(q, q2) << "layer " << layer;
    EXPECT_EQ(k, k2) << "layer " << layer;
  }
  EXPECT_EQ(std::memcmp(fused.storage->data(), apart.storage->data(), layout.size_bytes()), 0);
  // The pages were written at all (not two equally untouched caches).
  const auto* bytes = static_cast<const unsigned char*>(fused.storage->data());
  std::size_t n_nonzero = 0;
  for (std::size_t i = 0; i < layout.size_bytes(); ++i) n_nonzero += bytes[i] != 0;
  EXPECT_GT(n_nonzero, layout.size_bytes() / 8);  // 11 of 40 slots per layer written
}

TEST(RotaryKvStore, CpuEqualsNormRotaryThenStore) {
  for (const DType kv : {DType::f32, DType::bf16, DType::f8_e4m3}) {
    for (const bool per_row : {false, true}) {
      for (const bool qk_norm : {false, true}) {
        SCOPED_TRACE(std::string(dtype_name(kv)) + (per_row ? " per-row" : " shared") + (qk_norm ? " qk-norm" : ""));
        check({kv, 8, per_row, qk_norm});
      }
    }
  }
  SCOPED_TRACE("partial rotary");
  check({DType::bf16, 4, false, false});
  check({DType::f32, 4, true, true});
}

}  // namespace
}  // namespace flare::helios
