// CPU backend operations against naive double-precision loops on random input: GEMM (AVX2 and
// scalar paths, odd shapes, strided views, bias), paged attention (GQA, sliding window, pages out
// of order, every KV dtype), dtype conversions, and step validation of hostile descriptors.
#include <gtest/gtest.h>

#include <array>
#include <atomic>
#include <cmath>
#include <random>

#include "common/error.h"
#include "helios/cpu/cpu_backend.h"
#include "helios/cpu/gemm.h"

namespace flare::helios {
namespace {

std::vector<float> random_floats(std::size_t n, std::mt19937& rng, float scale = 1.0f) {
  std::normal_distribution<float> normal(0.0f, scale);
  std::vector<float> out(n);
  for (auto& x : out) x = normal(rng);
  return out;
}

TEST(DTypes, ConversionsRoundTrip) {
  EXPECT_EQ(bf16_to_f32(f32_to_bf16(1.0f)), 1.0f);
  EXPECT_EQ(bf16_to_f32(f32_to_bf16(-3.140625f)), -3.140625f);
  EXPECT_EQ(f32_to_bf16(1.00390625f), 0x3f80);  // ties to even
  EXPECT_TRUE(std::isnan(bf16_to_f32(f32_to_bf16(NAN))));
  for (float x : {0.0f, 1.0f, -2.5f, 65504.0f, 6.1035156e-05f, 5.9604645e-08f, 0.333251953125f}) {
    EXPECT_EQ(f16_to_f32(f32_to_f16(x)), x) << x;
  }
  EXPECT_TRUE(std::isinf(f16_to_f32(f32_to_f16(1e6f))));
  for (float x : {0.0f, 1.0f, -1.5f, 448.0f, 0.001953125f, -240.0f, 0.875f}) {
    EXPECT_EQ(f8_e4m3_to_f32(f32_to_f8_e4m3(x)), x) << x;
  }
  EXPECT_EQ(f8_e4m3_to_f32(f32_to_f8_e4m3(1000.0f)), 448.0f);  // saturates
  EXPECT_EQ(f8_e4m3_to_f32(f32_to_f8_e4m3(1.0625f)), 1.0f);    // ties to even
  for (int bits = 0; bits < 256; ++bits) {                      // every finite fp8 value round-trips
    const float x = f8_e4m3_to_f32(std::uint8_t(bits));
    if (std::isnan(x)) continue;
    EXPECT_EQ(f8_e4m3_to_f32(f32_to_f8_e4m3(x)), x) << bits;
  }
}

TEST(CpuGemm, MatchesNaiveOnOddShapes) {
  std::mt19937 rng(1);
  cpu::ThreadPool pool(2);
  for (auto [m, n, k] : std::vector<std::array<std::int64_t, 3>>{{1, 1, 1}, {3, 17, 9}, {5, 33, 64}, {9, 40, 131}, {1, 300, 768}}) {
    const std::int64_t x_stride = k + 3, out_stride = n + 5;
    auto x = random_floats(std::size_t(m * x_stride), rng);
    auto wf = random_floats(std::size_t(n * k), rng, 0.1f);
    std::vector<std::uint16_t> w(wf.size());
    for (std::size_t i = 0; i < w.size(); ++i) w[i] = f32_to_bf16(wf[i]);
    auto bias = random_floats(std::size_t(n), rng);
    std::vector<float> out(std::size_t(m * out_stride), -7.0f), scalar = out;
    cpu::GemmArgs a{x.data(), x_stride, w.data(), bias.data(), out.data(), out_stride, m, n, k};
    cpu::gemm_bf16(pool, a);
    a.out = scalar.data();
    cpu::gemm_bf16_scalar(a, 0, n);
    for (std::int64_t i = 0; i < m; ++i) {
      for (std::int64_t j = 0; j < n; ++j) {
        double ref = bias[std::size_t(j)];
        for (std::int64_t p = 0; p < k; ++p) ref += double(x[std::size_t(i * x_stride + p)]) * bf16_to_f32(w[std::size_t(j * k + p)]);
        EXPECT_NEAR(out[std::size_t(i * out_stride + j)], ref, 1e-4 * (1 + std::fabs(ref))) << m << "x" << n << "x" << k;
        EXPECT_NEAR(scalar[std::size_t(i * out_stride + j)], ref, 1e-4 * (1 + std::fabs(ref)));
      }
      EXPECT_EQ(out[std::size_t(i * out_stride + n)], -7.0f);  // nothing written past the row
    }
  }
}

// Naive attention for one token of one head over positions [first, position].
std::vector<double> naive_attention(const std::vector<std::vector<float>>& keys, const std::vector<std::vector<float>>& values,
                                    const float* q, int first, int position, float scale) {
  std::vector<double> scores;
  double max = -1e300;
  for (int j = first; j <= position; ++j) {
    double s = 0;
    for (std::size_t c = 0; c < keys[0].size(); ++c) s += double(q[c]) * keys[std::size_t(j)][c];
    scores.push_back(s * scale);
    max = std::max(max, scores.back());
  }
  double z = 0;
  for (auto& s : scores) z += (s = std::exp(s - max));
  std::vector<double> out(values[0].size(), 0.0);
  for (int j = first; j <= position; ++j) {
    for (std::size_t c = 0; c < out.size(); ++c) out[c] += scores[std::size_t(j - first)] / z * values[std::size_t(j)][c];
  }
  return out;
}

void check_attention(DType kv_dtype, std::int32_t window, double tolerance) {
  std::mt19937 rng(7);
  const std::int32_t n_heads = 4, n_kv = 2, d = 16, page = 3, n_tokens = 11;
  cpu::CpuBackend backend(2);
  KvCache cache = backend.allocate_kv_cache({1, 8, page, n_kv, d, kv_dtype});
  Step step;
  step.tokens.assign(std::size_t(n_tokens), 0);
  step.rows.push_back({n_tokens, 0, n_tokens, 0, 4});
  step.block_tables = {6, 1, 7, 2};  // pages out of order
  backend.begin_step(step, cache);
  auto q = random_floats(std::size_t(n_tokens * n_heads * d), rng);
  auto k = random_floats(std::size_t(n_tokens * n_kv * d), rng);
  auto v = random_floats(std::size_t(n_tokens * n_kv * d), rng);
  std::vector<float> out(q.size());
  Tensor qt{q.data(), DType::f32, n_tokens, n_heads * d, n_heads * d};
  Tensor kt{k.data(), DType::f32, n_tokens, n_kv * d, n_kv * d};
  Tensor vt{v.data(), DType::f32, n_tokens, n_kv * d, n_kv * d};
  Tensor ot{out.data(), DType::f32, n_tokens, n_heads * d, n_heads * d};
  backend.kv_store(cache, 0, kt, vt);
  AttentionParams params{0, n_heads, n_kv, d, 0.25f, window};
  backend.attention(cache, qt, params, ot);
  double worst = 0;
  for (std::int32_t h = 0; h < n_heads; ++h) {
    const std::int32_t kv_head = h / (n_heads / n_kv);
    std::vector<std::vector<float>> keys, values;
    for (std::int32_t t = 0; t < n_tokens; ++t) {
      keys.emplace_back(k.begin() + (t * n_kv + kv_head) * d, k.begin() + (t * n_kv + kv_head + 1) * d);
      values.emplace_back(v.begin() + (t * n_kv + kv_head) * d, v.begin() + (t * n_kv + kv_head + 1) * d);
    }
    for (std::int32_t t = 0; t < n_tokens; ++t) {
      const int first = window > 0 ? std::max(0, t - window + 1) : 0;
      const auto ref = naive_attention(keys, values, &q[std::size_t((t * n_heads + h) * d)], first, t, 0.25f);
      for (std::int32_t c = 0; c < d; ++c) {
        worst = std::max(worst, std::fabs(out[std::size_t((t * n_heads + h) * d + c)] - ref[std::size_t(c)]));
      }
    }
  }
  EXPECT_LT(worst, tolerance) << dtype_name(kv_dtype) << " window " << window;
}

TEST(CpuAttention, MatchesNaive) {
  check_attention(DType::f32, 0, 1e-5);
  check_attention(DType::f32, 4, 1e-5);
  check_attention(DType::bf16, 0, 3e-2);
  check_attention(DType::f8_e4m3, 0, 2e-1);
}

TEST(CpuBackend, KvCopyPagesCopiesEveryLayer) {
  cpu::CpuBackend backend(1);
  KvCache cache = backend.allocate_kv_cache({2, 4, 2, 1, 8, DType::f32});
  auto* data = static_cast<float*>(cache.storage->data());
  const std::size_t page_floats = cache.layout.page_bytes() / 4;
  for (std::size_t i = 0; i < cache.layout.size_bytes() / 4; ++i) data[i] = float(i);
  const std::vector<PageCopy> copies = {{1, 3}};
  backend.kv_copy_pages(cache, copies);
  for (int layer = 0; layer < 2; ++layer) {
    const float* base = data + std::size_t(layer) * 4 * page_floats;
    for (std::size_t i = 0; i < page_floats; ++i) EXPECT_EQ(base[3 * page_floats + i], base[page_floats + i]);
  }
}

TEST(Step, ValidationRejectsHostileDescriptors) {
  auto bad = [](Step step) { EXPECT_THROW(step_validate(step, 4, 2), Error); };
  Step ok;
  ok.tokens = {1, 2, 3};
  ok.rows = {{3, 0, 1, 0, 2}};
  ok.block_tables = {0, 1};
  EXPECT_NO_THROW(step_validate(ok, 4, 2));
  Step s = ok;
  s.rows[0].n_tokens = 0;
  bad(s);
  s = ok;
  s.rows[0].n_logits = 4;
  bad(s);
  s = ok;
  s.rows[0].n_blocks = 1;  // too few pages for 3 positions
  bad(s);
  s = ok;
  s.block_tables = {0, 9};  // page id outside the pool
  bad(s);
  s = ok;
  s.rows[0].first_block = 1;  // range past the block tables
  bad(s);
  s = ok;
  s.tokens.push_back(4);  // more tokens than rows hold
  bad(s);
  s = ok;
  s.rows[0].start_position = -1;
  bad(s);
}

TEST(ThreadPool, CoversTheRangeExactlyOnce) {
  cpu::ThreadPool pool(3);
  for (std::int64_t n : {1, 2, 3, 7, 100}) {
    std::vector<std::atomic<int>> hits(static_cast<std::size_t>(n));
    pool.parallel_for(n, [&](std::int64_t b, std::int64_t e) {
      for (std::int64_t i = b; i < e; ++i) hits[std::size_t(i)]++;
    });
    for (auto& h : hits) EXPECT_EQ(h.load(), 1);
  }
}

}  // namespace
}  // namespace flare::helios
