// The decode step's small fused kernels against the CPU backend (the reference), through the
// Backend interface, on fresh random inputs with poisoned outputs, row padding and KV pages:
// - rotary_kv_store (q/k norm, rotary, KV store in one kernel) for every rope variant (shared and
//   per-row frequencies, YaRN's attention factor, partial rotary), with and without the Qwen3 q/k
//   norm, BF16 and FP8 pages, GQA, head sizes 64 to 256, rows at page boundaries and at large
//   positions; attention then reads what it stored, with and without a sliding window; the same
//   result as the separate GPU operations; a captured step replays at other positions and pages;
// - rms_norm (with and without the residual) for hidden sizes 64..16384, an odd size, a size past
//   the vector path and a misaligned view; swiglu likewise.
// Prints max errors, and the per-launch device time of each op inside a CUDA graph (informational).
// Skips without a GPU or NVRTC.
#ifdef FLARE_HAVE_CUDA

#include <array>
#include <cstring>
#include <functional>
#include <numeric>
#include <random>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "gpu_support.h"
#include "helios/cpu/cpu_backend.h"

namespace flare::helios {
namespace {

using namespace gpu_testing;

constexpr std::uint8_t k_nan_e4m3 = 0x7f;

struct RopeCase {
  int n_heads, n_kv_heads, head_dim, half;  // half: rotary_dim / 2
  bool per_row_freq;                        // dynamic scaling: a frequency row per step row
  float attention_factor;                   // YaRN
  bool qk_norm;
  DType kv;
  int page_size, window;
  std::string label() const {
    return fmt::format("heads {}/{} hd={} half={} {} factor={} {}{} page={} window={}", n_heads, n_kv_heads, head_dim,
                       half, per_row_freq ? "per-row" : "shared", attention_factor, qk_norm ? "qk-norm " : "",
                       dtype_name(kv), page_size, window);
  }
};

class CudaFusedOps : public BackendVersusCpuTest {
 protected:

  // Rows (n_tokens, start_position) over pages drawn from a shuffled pool of n_pages, each row's
  // table covering `final_length[i]` positions (>= its own end).
  Step make_step(const std::vector<std::pair<int, int>>& rows, const std::vector<int>& final_length,
                 std::int32_t page_size, std::int32_t n_pages, const std::vector<std::int32_t>& pages) {
    Step step;
    std::size_t next_page = 0;
    for (std::size_t r = 0; r < rows.size(); ++r) {
      const auto [n_tokens, start] = rows[r];
      StepRow row;
      row.n_tokens = n_tokens;
      row.start_position = start;
      row.n_logits = 1;
      row.first_block = std::int32_t(step.block_tables.size());
      row.n_blocks = (final_length[r] + page_size - 1) / page_size;
      for (std::int32_t b = 0; b < row.n_blocks; ++b) step.block_tables.push_back(pages.at(next_page++));
      for (int i = 0; i < n_tokens; ++i) step.tokens.push_back(1);
      step.rows.push_back(row);
    }
    EXPECT_LE(next_page, std::size_t(n_pages));
    return step;
  }
  std::vector<std::int32_t> shuffled_pages(std::int32_t n_pages) {
    std::vector<std::int32_t> pages(static_cast<std::size_t>(n_pages));
    std::iota(pages.begin(), pages.end(), 0);
    std::shuffle(pages.begin(), pages.end(), rng_);
    return pages;
  }

  // Both backends' caches for `layout`, every element NaN (so stray and missing writes show).
  void make_caches(const KvCacheLayout& layout) {
    cpu_kv_ = cpu_.allocate_kv_cache(layout);
    gpu_kv_ = gpu_->allocate_kv_cache(layout);
    poison_caches();
  }
  // Every element of both caches NaN again, in place (graphs name the GPU cache's address).
  void poison_caches() {
    const KvCacheLayout& layout = cpu_kv_.layout;
    std::vector<std::uint8_t> bytes(layout.size_bytes());
    for (std::size_t i = 0; i < bytes.size(); ++i) {
      if (layout.dtype == DType::f8_e4m3) {
        bytes[i] = k_nan_e4m3;
      } else {
        bytes[i] = i % 2 == 0 ? std::uint8_t(k_poison_bf16 & 0xff) : std::uint8_t(k_poison_bf16 >> 8);
      }
    }
    std::memcpy(cpu_kv_.storage->data(), bytes.data(), bytes.size());
    gpu_->upload(*gpu_kv_.storage, 0, bytes.data(), bytes.size());
  }
  static std::vector<float> cache_values(const KvCacheLayout& l, const std::uint8_t* bytes) {
    const std::size_t n = l.size_bytes() / dtype_size_bytes(l.dtype);
    std::vector<float> out(n);
    for (std::size_t i = 0; i < n; ++i) {
      if (l.dtype == DType::f8_e4m3) {
        out[i] = f8_e4m3_to_f32(bytes[i]);
      } else {
        std::uint16_t bits;
        std::memcpy(&bits, bytes + 2 * i, 2);
        out[i] = bf16_to_f32(bits);
      }
    }
    return out;
  }
  std::vector<float> gpu_cache_values(const KvCache& kv) {
    std::vector<std::uint8_t> bytes(kv.layout.size_bytes());
    gpu_->download(*kv.storage, 0, bytes.data(), bytes.size());
    return cache_values(kv.layout, bytes.data());
  }
  // Page elements agree: NaN (never written) on both sides, or values within tolerance.
  static void expect_same_pages(const std::string& what, const std::vector<float>& gpu, const std::vector<float>& cpu,
                                float atol, float rtol) {
    ASSERT_EQ(gpu.size(), cpu.size());
    std::size_t n_bad = 0, first_bad = 0, n_written = 0;
    double max_abs = 0;
    for (std::size_t i = 0; i < gpu.size(); ++i) {
      const bool g_nan = std::isnan(gpu[i]), c_nan = std::isnan(cpu[i]);
      n_written += !c_nan;
      const double d = std::fabs(double(gpu[i]) - double(cpu[i]));
      const bool ok = g_nan == c_nan && (c_nan || d <= atol + rtol * std::fabs(cpu[i]));
      if (!ok && n_bad++ == 0) first_bad = i;
      if (!g_nan && !c_nan) max_abs = std::max(max_abs, d);
    }
    std::printf("[ error    ] %-44s written=%zu max_abs=%.3e\n", what.c_str(), n_written, max_abs);
    EXPECT_GT(n_written, 0u) << what;
    EXPECT_EQ(n_bad, 0u) << what << ": " << n_bad << " page elements differ, first at " << first_bad << ": gpu "
                         << gpu[first_bad] << " vs cpu " << cpu[first_bad];
  }

  // Device time of one `op` (ms): `n` of them captured in one graph, replayed.
  float graph_time_ms(const std::function<void()>& op, int n = 100) {
    auto graph = gpu_->capture([&] {
      for (int i = 0; i < n; ++i) op();
    });
    const cuda::Driver& d = cuda::driver();
    CUevent start = nullptr, end = nullptr;
    cuda::check(d.event_create(&start, CU_EVENT_DEFAULT), "cuEventCreate");
    cuda::check(d.event_create(&end, CU_EVENT_DEFAULT), "cuEventCreate");
    gpu_->replay(*graph);
    cuda::check(d.event_record(start, gpu_->stream().handle()), "cuEventRecord");
    for (int r = 0; r < 5; ++r) gpu_->replay(*graph);
    cuda::check(d.event_record(end, gpu_->stream().handle()), "cuEventRecord");
    cuda::check(d.event_synchronize(end), "cuEventSynchronize");
    float ms = 0.0f;
    cuda::check(d.event_elapsed_time(&ms, start, end), "cuEventElapsedTime");
    d.event_destroy(start);
    d.event_destroy(end);
    return ms / float(5 * n);
  }

  void check_rotary_kv_store(const RopeCase& c);

  KvCache cpu_kv_, gpu_kv_;
};

constexpr std::int32_t k_layer = 1;  // the layer written; layer 0 must stay NaN

void CudaFusedOps::check_rotary_kv_store(const RopeCase& c) {
  const int p = c.page_size;
  // History first (prefills from 0), then the step under test continuing each row: a decode token
  // on a page's last slot, one on a page's first slot, one mid-page, a chunk crossing two page
  // boundaries, and a chunk at large positions (rotation angles far from 0).
  const std::vector<std::pair<int, int>> history = {{p - 1, 0}, {p, 0}, {19, 0}, {5, 0}, {4090, 0}};
  const std::vector<std::pair<int, int>> current = {{1, p - 1}, {1, p}, {1, 19}, {2 * p + 3, 5}, {5, 4090}};
  std::vector<int> final_length;
  std::int32_t n_used = 0;
  for (const auto& [n, start] : current) {
    final_length.push_back(start + n);
    n_used += (start + n + p - 1) / p;
  }
  const KvCacheLayout layout{2, n_used + 3, p, c.n_kv_heads, c.head_dim, c.kv};
  make_caches(layout);
  const auto pages = shuffled_pages(layout.n_pages);
  const Step steps[2] = {make_step(history, final_length, p, layout.n_pages, pages),
                         make_step(current, final_length, p, layout.n_pages, pages)};

  const std::int64_t q_width = std::int64_t(c.n_heads) * c.head_dim, kv_width = std::int64_t(c.n_kv_heads) * c.head_dim;
  const std::int64_t width = q_width + 2 * kv_width;
  const auto q_w = random_f32(std::size_t(c.head_dim), 0.5f, 1.5f), k_w = random_f32(std::size_t(c.head_dim), 0.5f, 1.5f);
  Matrix cqw = host_f32_values(q_w, 1, c.head_dim), ckw = host_f32_values(k_w, 1, c.head_dim);
  Matrix gqw = device_f32(*gpu_, q_w, 1, c.head_dim), gkw = device_f32(*gpu_, k_w, 1, c.head_dim);
  const QkNormParams cpu_norm{cqw.t, ckw.t, 1e-6f}, gpu_norm{gqw.t, gkw.t, 1e-6f};
  Matrix cq_last, gq_last;
  // The GPU rounds the normed q and k to bf16 before rotating them (as its separate kernels do);
  // the CPU keeps F32 throughout.
  const float atol = c.qk_norm ? 3e-2f : 2e-2f;
  for (const Step& step : steps) {
    const std::int64_t n = step.n_tokens();
    cpu_.begin_step(step, cpu_kv_);
    gpu_->begin_step(step, gpu_kv_);
    const std::int64_t freq_rows = c.per_row_freq ? step.n_rows() : 1;
    std::vector<float> inv_freq;
    for (std::int64_t r = 0; r < freq_rows; ++r) {
      for (int i = 0; i < c.half; ++i) inv_freq.push_back(std::pow(10000.0f * float(r + 1), -float(i) / float(c.half)));
    }
    Matrix cf = host_f32_values(inv_freq, freq_rows, c.half), gf = device_f32(*gpu_, inv_freq, freq_rows, c.half);
    // q, k and v as column slices of one qkv matrix with padded rows, as the model holds them.
    const auto qkv = random_bf16(std::size_t(n * width), c.qk_norm ? 3.0f : 1.0f);
    Matrix cqkv = host_f32(cpu_, qkv, n, width), gqkv = device_bf16(*gpu_, qkv, n, width, width + 8);
    const auto slices = [&](const Tensor& t) {
      return std::array<Tensor, 3>{t.slice_cols(0, q_width), t.slice_cols(q_width, kv_width),
                                   t.slice_cols(q_width + kv_width, kv_width)};
    };
    const auto [cq, ck, cv] = slices(cqkv.t);
    const auto [gq, gk, gv] = slices(gqkv.t);
    cpu_.rotary_kv_store(cpu_kv_, k_layer, cq, ck, cv, c.head_dim, {cf.t, c.attention_factor},
                         c.qk_norm ? &cpu_norm : nullptr);
    gpu_->rotary_kv_store(gpu_kv_, k_layer, gq, gk, gv, c.head_dim, {gf.t, c.attention_factor},
                          c.qk_norm ? &gpu_norm : nullptr);
    const std::string label = fmt::format("{} {} tokens", c.label(), n);
    // q and k rotated (bf16 on the GPU), v untouched, the padding still poisoned.
    expect_close("rotary_kv_store qkv " + label, device_values(*gpu_, gqkv), host_values(cqkv), atol, 2e-2f);

    // The separate GPU operations on the same inputs give the same q, k and pages (to a bf16 ulp:
    // the compiler may contract a rotation product into an FMA differently).
    KvCache apart = gpu_->allocate_kv_cache(layout);
    std::vector<std::uint8_t> cache_bytes(layout.size_bytes());
    gpu_->download(*gpu_kv_.storage, 0, cache_bytes.data(), cache_bytes.size());
    gpu_->upload(*apart.storage, 0, cache_bytes.data(), cache_bytes.size());
    Matrix gqkv2 = device_bf16(*gpu_, qkv, n, width, width + 8);
    const auto [gq2, gk2, gv2] = slices(gqkv2.t);
    gpu_->Backend::rotary_kv_store(apart, k_layer, gq2, gk2, gv2, c.head_dim, {gf.t, c.attention_factor},
                                   c.qk_norm ? &gpu_norm : nullptr);
    expect_close("fused vs apart qkv " + label, device_values(*gpu_, gqkv), device_values(*gpu_, gqkv2), 1e-5f,
                 1.0f / 128);
    expect_same_pages("fused vs apart pages " + label, gpu_cache_values(gpu_kv_), gpu_cache_values(apart),
                      c.kv == DType::f8_e4m3 ? 2e-3f : 1e-5f, c.kv == DType::f8_e4m3 ? 0.13f : 1.0f / 128);
    cq_last = std::move(cqkv);
    gq_last = std::move(gqkv);
  }
  // Pages: the same slots written (the rest NaN, layer 0 included), values within the rounding of
  // the rotated k (bf16 on the GPU before the page's own rounding).
  const float page_rtol = c.kv == DType::f8_e4m3 ? 0.13f : 2e-2f;
  expect_same_pages("rotary_kv_store pages " + c.label(), gpu_cache_values(gpu_kv_),
                    cache_values(layout, static_cast<const std::uint8_t*>(cpu_kv_.storage->data())), atol, page_rtol);
  // Attention over the stored history (each backend its own rotated q), with the case's window,
  // both over the GPU's pages: the page check above bounds how they differ from the CPU's (for FP8
  // a whole e4m3 step where the GPU's bf16 rounding of k tips it), and attention over pages that
  // differ by that much would differ by more than attention's own tolerance.
  gpu_->download(*gpu_kv_.storage, 0, cpu_kv_.storage->data(), layout.size_bytes());
  const Step& step = steps[1];
  const std::int64_t n = step.n_tokens();
  const Tensor cq = cq_last.t.slice_cols(0, q_width), gq = gq_last.t.slice_cols(0, q_width);
  Matrix cout = host_f32(cpu_, {}, n, q_width), gout = device_bf16(*gpu_, {}, n, q_width, q_width + 4);
  const AttentionParams ap{k_layer, c.n_heads, c.n_kv_heads, c.head_dim, 1.0f / std::sqrt(float(c.head_dim)), c.window};
  cpu_.attention(cpu_kv_, cq, ap, cout.t);
  gpu_->attention(gpu_kv_, gq, ap, gout.t);
  expect_close("attention after rotary_kv_store " + c.label(), device_values(*gpu_, gout), host_values(cout), 3e-2f,
               3e-2f);
}

TEST_F(CudaFusedOps, RotaryKvStoreEveryRopeVariant) {
  for (const RopeCase& c : {
           RopeCase{32, 8, 128, 64, false, 1.0f, false, DType::bf16, 16, 0},     // Llama 3
           RopeCase{32, 8, 128, 64, false, 1.0f, false, DType::f8_e4m3, 16, 0},  // FP8 pages
           RopeCase{16, 8, 128, 64, false, 1.0f, true, DType::bf16, 16, 0},      // Qwen3
           RopeCase{16, 8, 128, 64, true, 1.0f, true, DType::f8_e4m3, 16, 0},    // Qwen3, dynamic, FP8
           RopeCase{8, 2, 128, 64, false, 1.2f, false, DType::bf16, 16, 0},      // YaRN
           RopeCase{12, 2, 64, 32, true, 1.0f, false, DType::bf16, 4, 0},        // dynamic NTK
           RopeCase{4, 4, 64, 32, false, 1.0f, true, DType::bf16, 5, 0},         // MHA, odd page size
           RopeCase{6, 2, 128, 32, false, 1.0f, false, DType::bf16, 16, 0},      // partial rotary
           RopeCase{8, 2, 128, 64, false, 1.0f, false, DType::bf16, 16, 8},      // sliding window
           RopeCase{4, 1, 64, 32, false, 1.0f, false, DType::f8_e4m3, 4, 5},     // window, FP8
           RopeCase{2, 1, 80, 40, false, 1.0f, true, DType::bf16, 3, 0},         // head size of neither path
           RopeCase{8, 4, 256, 128, false, 1.0f, true, DType::bf16, 16, 0},      // Gemma 3 (head dim 256, q/k norm)
           RopeCase{8, 4, 256, 128, false, 1.0f, true, DType::f8_e4m3, 16, 8},   // Gemma 3, window, FP8
           RopeCase{8, 1, 256, 128, false, 1.0f, false, DType::bf16, 16, 8},     // head dim 256, GQA 8:1, window
       }) {
    SCOPED_TRACE(c.label());
    check_rotary_kv_store(c);
  }
}

TEST_F(CudaFusedOps, CapturedRotaryKvStoreReplaysAtOtherPositions) {
  const int n_heads = 8, n_kv = 2, hd = 128, page = 16, n_rows = 3;
  const std::int64_t q_width = n_heads * hd, kv_width = n_kv * hd, width = q_width + 2 * kv_width;
  const KvCacheLayout layout{2, 64, page, n_kv, hd, DType::bf16};
  make_caches(layout);
  const auto pages = shuffled_pages(layout.n_pages);
  // Two decode steps of the same shape at other positions, on other pages, with other frequencies.
  const Step a = make_step({{1, 3}, {1, 40}, {1, 15}}, {4, 41, 16}, page, layout.n_pages, pages);
  std::vector<std::int32_t> other(pages.rbegin(), pages.rend());
  const Step b = make_step({{1, 100}, {1, 16}, {1, 0}}, {101, 17, 1}, page, layout.n_pages, other);
  gpu_->reserve_step(n_rows, n_rows, 16);
  Matrix gqkv = device_bf16(*gpu_, {}, n_rows, width, width + 8);
  const auto gq = gqkv.t.slice_cols(0, q_width), gk = gqkv.t.slice_cols(q_width, kv_width),
             gv = gqkv.t.slice_cols(q_width + kv_width, kv_width);
  auto gf = gpu_->allocate(std::size_t(n_rows) * hd / 2 * 4);
  const RotaryParams gpu_rope{Tensor::of(*gf, DType::f32, n_rows, hd / 2), 1.0f};
  const auto freq_for = [&](float base) {
    std::vector<float> f;
    for (int r = 0; r < n_rows; ++r) {
      for (int i = 0; i < hd / 2; ++i) f.push_back(std::pow(base * float(r + 1), -float(i) / float(hd / 2)));
    }
    return f;
  };
  const auto run = [&] { gpu_->rotary_kv_store(gpu_kv_, k_layer, gq, gk, gv, hd, gpu_rope, nullptr); };
  gpu_->begin_step(a, gpu_kv_);
  const auto fa = freq_for(10000.0f);
  gpu_->upload_step_input(*gf, 0, fa.data(), fa.size() * 4);
  run();  // once eagerly: the kernel loads before the capture
  const std::uint64_t generation = gpu_->graph_generation();
  auto graph = gpu_->capture(run);
  poison_caches();  // what the eager run wrote goes

  gpu_->begin_step(b, gpu_kv_);
  EXPECT_EQ(gpu_->graph_generation(), generation);
  const auto fb = freq_for(500000.0f);
  gpu_->upload_step_input(*gf, 0, fb.data(), fb.size() * 4);
  const auto qkv = random_bf16(std::size_t(n_rows * width), 1.0f);
  std::vector<std::uint16_t> padded(std::size_t(n_rows * (width + 8)), k_poison_bf16);
  for (int r = 0; r < n_rows; ++r) std::copy_n(qkv.begin() + r * width, width, padded.begin() + r * (width + 8));
  gpu_->upload(*gqkv.buffer, 0, padded.data(), padded.size() * 2);
  gpu_->replay(*graph);

  cpu_.begin_step(b, cpu_kv_);
  Matrix cqkv = host_f32(cpu_, qkv, n_rows, width), cf = host_f32_values(fb, n_rows, hd / 2);
  cpu_.rotary_kv_store(cpu_kv_, k_layer, cqkv.t.slice_cols(0, q_width), cqkv.t.slice_cols(q_width, kv_width),
                       cqkv.t.slice_cols(q_width + kv_width, kv_width), hd, {cf.t, 1.0f}, nullptr);
  expect_close("replayed rotary_kv_store qkv", device_values(*gpu_, gqkv), host_values(cqkv), 2e-2f, 2e-2f);
  expect_same_pages("replayed rotary_kv_store pages", gpu_cache_values(gpu_kv_),
                    cache_values(layout, static_cast<const std::uint8_t*>(cpu_kv_.storage->data())), 2e-2f, 2e-2f);
}

TEST_F(CudaFusedOps, RmsNormEveryHiddenSize) {
  // Powers of two up to the vector path's limit (16384), Llama/Qwen sizes, an odd size and one past
  // the limit (both the general kernel), each for a decode row and a few rows.
  for (const int cols : {64, 128, 256, 512, 1000, 1024, 2048, 3584, 4096, 5120, 8192, 16384, 4095, 20480}) {
    for (const int rows : {1, 5}) {
      for (const bool with_residual : {false, true}) {
        const auto x = random_bf16(std::size_t(rows) * cols, 2.0f), res = random_bf16(std::size_t(rows) * cols, 4.0f);
        const auto weight = random_f32(std::size_t(cols), 0.5f, 1.5f);
        Matrix cx = host_f32(cpu_, x, rows, cols), cres = host_f32(cpu_, res, rows, cols);
        Matrix cw = host_f32_values(weight, 1, cols), cout = host_f32(cpu_, {}, rows, cols);
        cpu_.rms_norm(cx.t, with_residual ? &cres.t : nullptr, cw.t, 1e-5f, cout.t);
        Matrix gx = device_bf16(*gpu_, x, rows, cols, cols), gres = device_bf16(*gpu_, res, rows, cols, cols + 16);
        Matrix gw = device_f32(*gpu_, weight, 1, cols), gout = device_bf16(*gpu_, {}, rows, cols, cols + 8);
        gpu_->rms_norm(gx.t, with_residual ? &gres.t : nullptr, gw.t, 1e-5f, gout.t);
        const std::string label = fmt::format("rms_norm{} [{}, {}]", with_residual ? "+residual" : "", rows, cols);
        expect_close(label, device_values(*gpu_, gout), host_values(cout), 1e-3f, 1.6e-2f);
        if (with_residual) expect_close(label + " residual", device_values(*gpu_, gres), host_values(cres), 1e-3f, 4e-3f);
      }
    }
  }
  // A view 4 columns into its rows (8 bytes: not 16-byte aligned) takes the general kernel.
  const int rows = 3, cols = 4096;
  const auto x = random_bf16(std::size_t(rows) * (cols + 4), 2.0f);
  const auto weight = random_f32(std::size_t(cols), 0.5f, 1.5f);
  Matrix cx = host_f32(cpu_, x, rows, cols + 4), cw = host_f32_values(weight, 1, cols), cout = host_f32(cpu_, {}, rows, cols);
  cpu_.rms_norm(cx.t.slice_cols(4, cols), nullptr, cw.t, 1e-5f, cout.t);
  Matrix gx = device_bf16(*gpu_, x, rows, cols + 4, cols + 4), gw = device_f32(*gpu_, weight, 1, cols);
  Matrix gout = device_bf16(*gpu_, {}, rows, cols, cols);
  gpu_->rms_norm(gx.t.slice_cols(4, cols), nullptr, gw.t, 1e-5f, gout.t);
  expect_close("rms_norm misaligned view", device_values(*gpu_, gout), host_values(cout), 1e-3f, 1.6e-2f);
}

TEST_F(CudaFusedOps, SwigluEveryWidth) {
  for (const int inter : {8, 64, 1000, 11008, 12288, 14336, 1001, 17}) {
    for (const int rows : {1, 3, 70}) {
      for (const int out_pad : {8, 1}) {  // an odd output stride takes the general kernel
        const auto gate_up = random_bf16(std::size_t(rows) * 2 * inter, 3.0f);
        Matrix cgu = host_f32(cpu_, gate_up, rows, 2 * inter), cout = host_f32(cpu_, {}, rows, inter);
        cpu_.swiglu(cgu.t, cout.t);
        Matrix ggu = device_bf16(*gpu_, gate_up, rows, 2 * inter, 2 * inter + 8);
        Matrix gout = device_bf16(*gpu_, {}, rows, inter, inter + out_pad);
        gpu_->swiglu(ggu.t, gout.t);
        expect_close(fmt::format("swiglu [{}, {}] out stride +{}", rows, inter, out_pad), device_values(*gpu_, gout),
                     host_values(cout), 1e-3f, 1e-2f);
      }
    }
  }
}

TEST_F(CudaFusedOps, DecodeTimings) {
  // Llama-3.1-8B shapes at batch 1 (and 8): per-launch device time inside a graph.
  const int hidden = 4096, inter = 14336, n_heads = 32, n_kv = 8, hd = 128;
  for (const int rows : {1, 8}) {
    Matrix x = device_bf16(*gpu_, random_bf16(std::size_t(rows) * hidden, 1.0f), rows, hidden, hidden);
    Matrix res = device_bf16(*gpu_, random_bf16(std::size_t(rows) * hidden, 1.0f), rows, hidden, hidden);
    Matrix w = device_f32(*gpu_, random_f32(hidden, 0.5f, 1.5f), 1, hidden);
    Matrix h = device_bf16(*gpu_, {}, rows, hidden, hidden);
    Matrix gu = device_bf16(*gpu_, random_bf16(std::size_t(rows) * 2 * inter, 1.0f), rows, 2 * inter, 2 * inter);
    Matrix act = device_bf16(*gpu_, {}, rows, inter, inter);
    const std::int64_t width = (n_heads + 2 * n_kv) * hd;
    Matrix qkv = device_bf16(*gpu_, random_bf16(std::size_t(rows) * width, 1.0f), rows, width, width);
    const Tensor q = qkv.t.slice_cols(0, n_heads * hd), k = qkv.t.slice_cols(n_heads * hd, n_kv * hd),
                 v = qkv.t.slice_cols((n_heads + n_kv) * hd, n_kv * hd);
    Matrix f = device_f32(*gpu_, random_f32(hd / 2, 0.0f, 1.0f), 1, hd / 2);
    const KvCacheLayout layout{1, rows * 8 + 1, 16, n_kv, hd, DType::bf16};
    make_caches(layout);
    std::vector<std::pair<int, int>> step_rows(std::size_t(rows), {1, 100});
    const Step step = make_step(step_rows, std::vector<int>(std::size_t(rows), 101), 16, layout.n_pages,
                                shuffled_pages(layout.n_pages));
    gpu_->begin_step(step, gpu_kv_);
    const RotaryParams rope{f.t, 1.0f};
    const auto fused = [&] { gpu_->rotary_kv_store(gpu_kv_, 0, q, k, v, hd, rope, nullptr); };
    const auto apart = [&] {
      gpu_->rotary(q, k, hd, rope);
      gpu_->kv_store(gpu_kv_, 0, k, v);
    };
    fused();
    apart();
    gpu_->rms_norm(x.t, &res.t, w.t, 1e-5f, h.t);
    gpu_->swiglu(gu.t, act.t);
    std::printf("[ timing   ] batch %d: rms_norm+residual %.2f us, swiglu %.2f us, rotary_kv_store %.2f us "
                "(rotary then kv_store: %.2f us)\n",
                rows, 1e3 * graph_time_ms([&] { gpu_->rms_norm(x.t, &res.t, w.t, 1e-5f, h.t); }),
                1e3 * graph_time_ms([&] { gpu_->swiglu(gu.t, act.t); }), 1e3 * graph_time_ms(fused),
                1e3 * graph_time_ms(apart));
  }
}

}  // namespace
}  // namespace flare::helios

#endif  // FLARE_HAVE_CUDA
