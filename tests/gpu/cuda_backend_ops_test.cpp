// Each CudaBackend operation against the CPU backend (the reference) on fresh random inputs,
// through the Backend interface: BF16 inputs go to the GPU as they are and to the CPU widened to
// F32; GPU outputs and row padding are poisoned with NaN first; each check prints its max errors.
// KV stores are compared bit for bit with the CPU's BF16 pages (head sizes up to Gemma 3's 256).
// Gemma's geglu, soft_cap and scale too. Skips without a GPU or NVRTC.
#ifdef FLARE_HAVE_CUDA

#include <cstring>
#include <numeric>
#include <random>
#include <tuple>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "common/error.h"
#include "gpu_support.h"
#include "helios/cpu/cpu_backend.h"

namespace flare::helios {
namespace {

using namespace gpu_testing;

class CudaBackendOps : public BackendVersusCpuTest {
 protected:
  CudaBackendOps() : BackendVersusCpuTest(2) {}

  // A step of rows (n_tokens, start_position) over pages of `page_size` drawn from a shuffled pool
  // of n_pages; each row's table covers its positions.
  Step make_step(const std::vector<std::pair<int, int>>& rows, std::int32_t page_size, std::int32_t n_pages,
                 std::int32_t vocab = 100) {
    std::vector<std::int32_t> pages(static_cast<std::size_t>(n_pages));
    std::iota(pages.begin(), pages.end(), 0);
    std::shuffle(pages.begin(), pages.end(), rng_);
    std::uniform_int_distribution<int> token(0, vocab - 1);
    Step step;
    std::size_t next_page = 0;
    for (const auto& [n_tokens, start] : rows) {
      StepRow row;
      row.n_tokens = n_tokens;
      row.start_position = start;
      row.n_logits = std::min(n_tokens, 2);
      row.first_block = std::int32_t(step.block_tables.size());
      row.n_blocks = (start + n_tokens + page_size - 1) / page_size;
      for (std::int32_t b = 0; b < row.n_blocks; ++b) step.block_tables.push_back(pages.at(next_page++));
      for (int i = 0; i < n_tokens; ++i) step.tokens.push_back(token(rng_));
      step.rows.push_back(row);
    }
    return step;
  }

  // Both backends' caches for `layout` (bf16), the GPU's zeroed like the CPU's.
  void make_caches(const KvCacheLayout& layout) {
    cpu_kv_ = cpu_.allocate_kv_cache(layout);
    gpu_kv_ = gpu_->allocate_kv_cache(layout);
    const std::vector<char> zeros(layout.size_bytes(), 0);
    gpu_->upload(*gpu_kv_.storage, 0, zeros.data(), zeros.size());
  }
  void begin_step(const Step& step) {
    cpu_.begin_step(step, cpu_kv_);
    gpu_->begin_step(step, gpu_kv_);
  }
  // Both caches hold the same bytes.
  void expect_same_caches(const std::string& what) {
    std::vector<std::uint16_t> gpu_bytes(gpu_kv_.layout.size_bytes() / 2);
    gpu_->download(*gpu_kv_.storage, 0, gpu_bytes.data(), gpu_bytes.size() * 2);
    const auto* cpu_bytes = static_cast<const std::uint16_t*>(cpu_kv_.storage->data());
    std::size_t n_diff = 0, first = 0;
    for (std::size_t i = 0; i < gpu_bytes.size(); ++i) {
      if (gpu_bytes[i] != cpu_bytes[i] && n_diff++ == 0) first = i;
    }
    EXPECT_EQ(n_diff, 0u) << what << ": KV pages differ from the CPU's, first at element " << first;
  }

  KvCache cpu_kv_, gpu_kv_;
};

TEST_F(CudaBackendOps, Linear) {
  struct Case {
    int m, n, k;
    bool bias, f32_out;
  };
  for (const Case& c : {Case{1, 96, 64, false, false}, Case{7, 130, 200, true, false}, Case{70, 257, 96, true, true},
                        Case{65, 64, 64, false, true}, Case{3, 1000, 33, true, false}}) {
    const auto x = random_bf16(std::size_t(c.m) * c.k, 1.0f);
    const auto w = random_bf16(std::size_t(c.n) * c.k, 0.1f);
    const auto bias = random_f32(std::size_t(c.n), -1.0f, 1.0f);
    Matrix cx = host_f32(cpu_, x, c.m, c.k), cw = host_bf16(w, c.n, c.k), cb = host_f32_values(bias, 1, c.n);
    Matrix cout = host_f32(cpu_, {}, c.m, c.n);
    cpu_.linear(cx.t, cw.t, c.bias ? &cb.t : nullptr, cout.t);

    // x as a column slice of a wider matrix, out with padded rows: strides matter.
    Matrix gx = device_bf16(*gpu_, x, c.m, c.k, c.k + 5), gw = device_bf16(*gpu_, w, c.n, c.k, c.k);
    Matrix gb = device_f32(*gpu_, bias, 1, c.n);
    Matrix gout = c.f32_out ? device_f32(*gpu_, {}, c.m, c.n) : device_bf16(*gpu_, {}, c.m, c.n, c.n + 3);
    gpu_->linear(gx.t, gw.t, c.bias ? &gb.t : nullptr, gout.t);
    const std::string label =
        fmt::format("linear [{}, {}] x [{}, {}]^T{} -> {}", c.m, c.k, c.n, c.k, c.bias ? " + bias" : "", c.f32_out ? "f32" : "bf16");
    expect_close(label, device_values(*gpu_, gout), host_values(cout), c.f32_out ? 1e-4f : 1e-2f,
                 c.f32_out ? 1e-4f : 1.6e-2f);
  }
}

TEST_F(CudaBackendOps, KvStoreAttentionAndPageCopies) {
  struct Case {
    int n_heads, n_kv_heads, head_dim, window, page_size;
  };
  // Head dim 256 (Gemma 3): GQA 2:1 and 8:1 (decode and prefill kernels), with a window.
  for (const Case& c : {Case{4, 2, 64, 0, 4}, Case{8, 2, 128, 0, 16}, Case{4, 1, 64, 5, 4}, Case{2, 2, 80, 0, 3},
                        Case{6, 3, 32, 8, 5}, Case{8, 4, 256, 0, 16}, Case{8, 1, 256, 5, 4}}) {
    KvCacheLayout layout{2, 24, c.page_size, c.n_kv_heads, c.head_dim, DType::bf16};
    make_caches(layout);
    const std::int64_t kv_width = std::int64_t(c.n_kv_heads) * c.head_dim, q_width = std::int64_t(c.n_heads) * c.head_dim;
    // History first (two rows prefilled), then a decode row and a chunk continuing them; the block
    // tables cover the final lengths from the start.
    const Step full = make_step({{12, 0}, {11, 0}}, c.page_size, layout.n_pages);
    Step history = full, step = full;
    history.rows[0] = StepRow{11, 0, 2, full.rows[0].first_block, full.rows[0].n_blocks};
    history.rows[1] = StepRow{6, 0, 2, full.rows[1].first_block, full.rows[1].n_blocks};
    history.tokens.resize(17);
    step.rows[0] = StepRow{1, 11, 1, full.rows[0].first_block, full.rows[0].n_blocks};
    step.rows[1] = StepRow{5, 6, 2, full.rows[1].first_block, full.rows[1].n_blocks};
    step.tokens.resize(6);
    for (const Step* s : {&history, &step}) {
      const std::int64_t n = s->n_tokens();
      begin_step(*s);
      for (std::int32_t layer = 0; layer < layout.n_layers; ++layer) {
        const auto k = random_bf16(std::size_t(n * kv_width), 1.0f), v = random_bf16(std::size_t(n * kv_width), 1.0f);
        Matrix ck = host_f32(cpu_, k, n, kv_width), cv = host_f32(cpu_, v, n, kv_width);
        Matrix gk = device_bf16(*gpu_, k, n, kv_width, kv_width + 8), gv = device_bf16(*gpu_, v, n, kv_width, kv_width);
        cpu_.kv_store(cpu_kv_, layer, ck.t, cv.t);
        gpu_->kv_store(gpu_kv_, layer, gk.t, gv.t);
      }
    }
    const std::string label = fmt::format("heads {}/{} hd={} window={} page={}", c.n_heads, c.n_kv_heads, c.head_dim,
                                          c.window, c.page_size);
    expect_same_caches("kv_store " + label);
    for (std::int32_t layer = 0; layer < layout.n_layers; ++layer) {
      const std::int64_t n = step.n_tokens();
      const auto q = random_bf16(std::size_t(n * q_width), 1.0f);
      Matrix cq = host_f32(cpu_, q, n, q_width), cout = host_f32(cpu_, {}, n, q_width);
      Matrix gq = device_bf16(*gpu_, q, n, q_width, q_width + 2), gout = device_bf16(*gpu_, {}, n, q_width, q_width + 4);
      AttentionParams p{layer, c.n_heads, c.n_kv_heads, c.head_dim, 1.0f / std::sqrt(float(c.head_dim)), c.window};
      cpu_.attention(cpu_kv_, cq.t, p, cout.t);
      gpu_->attention(gpu_kv_, gq.t, p, gout.t);
      expect_close(fmt::format("attention layer {} {}", layer, label), device_values(*gpu_, gout), host_values(cout),
                   1e-2f, 2e-2f);
    }
    std::int32_t spare = 0;  // a page no row uses
    while (std::find(step.block_tables.begin(), step.block_tables.end(), spare) != step.block_tables.end()) ++spare;
    const std::vector<PageCopy> copies = {{step.block_tables[0], step.block_tables[1]}, {step.block_tables[2], spare}};
    cpu_.kv_copy_pages(cpu_kv_, copies);
    gpu_->kv_copy_pages(gpu_kv_, copies);
    expect_same_caches("kv_copy_pages " + label);
  }
}

TEST_F(CudaBackendOps, EmbeddingNormsSwigluAndGather) {
  const std::int64_t vocab = 100, hidden = 320, head_dim = 64, inter = 500;
  const Step step = make_step({{9, 0}, {1, 30}, {4, 7}}, 16, 8, int(vocab));
  const std::int64_t n = step.n_tokens();
  make_caches(KvCacheLayout{1, 8, 16, 1, head_dim, DType::bf16});
  begin_step(step);

  const auto table = random_bf16(std::size_t(vocab * hidden), 1.0f);
  Matrix ct = host_bf16(table, vocab, hidden), cx = host_f32(cpu_, {}, n, hidden);
  Matrix gt = device_bf16(*gpu_, table, vocab, hidden, hidden), gx = device_bf16(*gpu_, {}, n, hidden, hidden + 8);
  cpu_.embedding(ct.t, cx.t);
  gpu_->embedding(gt.t, gx.t);
  expect_close("embedding", device_values(*gpu_, gx), host_values(cx), 0.0f, 0.0f);

  const auto delta = random_bf16(std::size_t(n * hidden), 2.0f);
  const auto weight = random_f32(std::size_t(hidden), 0.5f, 1.5f);
  Matrix cd = host_f32(cpu_, delta, n, hidden), cw = host_f32_values(weight, 1, hidden), ch = host_f32(cpu_, {}, n, hidden);
  Matrix gd = device_bf16(*gpu_, delta, n, hidden, hidden), gw = device_f32(*gpu_, weight, 1, hidden);
  Matrix gh = device_bf16(*gpu_, {}, n, hidden, hidden + 2);
  cpu_.rms_norm(cd.t, nullptr, cw.t, 1e-6f, ch.t);
  gpu_->rms_norm(gd.t, nullptr, gw.t, 1e-6f, gh.t);
  expect_close("rms_norm", device_values(*gpu_, gh), host_values(ch), 1e-3f, 1.6e-2f);
  cpu_.rms_norm(cd.t, &cx.t, cw.t, 1e-6f, ch.t);  // x += delta (x holds the embeddings on both)
  gpu_->rms_norm(gd.t, &gx.t, gw.t, 1e-6f, gh.t);
  expect_close("rms_norm+residual", device_values(*gpu_, gh), host_values(ch), 1e-3f, 1.6e-2f);
  expect_close("rms_norm+residual residual", device_values(*gpu_, gx), host_values(cx), 1e-3f, 4e-3f);

  const std::int64_t q_width = 4 * head_dim, k_width = 2 * head_dim;
  const auto q = random_bf16(std::size_t(n * q_width), 2.0f), k = random_bf16(std::size_t(n * k_width), 2.0f);
  const auto norm_w = random_f32(std::size_t(head_dim), 0.5f, 1.5f);
  Matrix cq = host_f32(cpu_, q, n, q_width), ck = host_f32(cpu_, k, n, k_width), cnw = host_f32_values(norm_w, 1, head_dim);
  Matrix gq = device_bf16(*gpu_, q, n, q_width, q_width + 8), gk = device_bf16(*gpu_, k, n, k_width, k_width);
  Matrix gnw = device_f32(*gpu_, norm_w, 1, head_dim);
  cpu_.head_rms_norm(cq.t, std::int32_t(head_dim), cnw.t, 1e-6f);
  gpu_->head_rms_norm(gq.t, std::int32_t(head_dim), gnw.t, 1e-6f);
  expect_close("head_rms_norm", device_values(*gpu_, gq), host_values(cq), 1e-3f, 1.6e-2f);
  // Rotary on the normed q (the GPU's bf16 q as the CPU's input, so only rotary differs).
  const auto gq_values = device_values(*gpu_, gq);
  std::vector<std::uint16_t> q_bf16(gq_values.size());
  for (std::size_t i = 0; i < q_bf16.size(); ++i) q_bf16[i] = f32_to_bf16(gq_values[i]);
  Matrix cq2 = host_f32(cpu_, q_bf16, n, q_width);
  for (const std::int64_t freq_rows : {std::int64_t(1), std::int64_t(step.n_rows())}) {
    std::vector<float> inv_freq;
    for (std::int64_t r = 0; r < freq_rows; ++r) {
      for (std::int64_t i = 0; i < head_dim / 2; ++i) inv_freq.push_back(std::pow(10000.0f * float(r + 1), -float(i) / 32.0f));
    }
    Matrix cf = host_f32_values(inv_freq, freq_rows, head_dim / 2), gf = device_f32(*gpu_, inv_freq, freq_rows, head_dim / 2);
    cpu_.rotary(cq2.t, ck.t, std::int32_t(head_dim), {cf.t, 1.1f});
    gpu_->rotary(gq.t, gk.t, std::int32_t(head_dim), {gf.t, 1.1f});
    expect_close(fmt::format("rotary q ({} frequency rows)", freq_rows), device_values(*gpu_, gq), host_values(cq2),
                 2e-2f, 2e-2f);
    expect_close(fmt::format("rotary k ({} frequency rows)", freq_rows), device_values(*gpu_, gk), host_values(ck),
                 2e-2f, 2e-2f);
    // Continue from identical inputs for the next round.
    const auto gq_now = device_values(*gpu_, gq), gk_now = device_values(*gpu_, gk);
    std::copy(gq_now.begin(), gq_now.end(), static_cast<float*>(cq2.t.data));
    std::copy(gk_now.begin(), gk_now.end(), static_cast<float*>(ck.t.data));
  }

  const auto gate_up = random_bf16(std::size_t(n * 2 * inter), 3.0f);
  Matrix cgu = host_f32(cpu_, gate_up, n, 2 * inter), cact = host_f32(cpu_, {}, n, inter);
  Matrix ggu = device_bf16(*gpu_, gate_up, n, 2 * inter, 2 * inter), gact = device_bf16(*gpu_, {}, n, inter, inter + 1);
  cpu_.swiglu(cgu.t, cact.t);
  gpu_->swiglu(ggu.t, gact.t);
  expect_close("swiglu", device_values(*gpu_, gact), host_values(cact), 1e-3f, 1e-2f);

  const std::int64_t n_logits = step.n_logit_rows();
  Matrix crows = host_f32(cpu_, {}, n_logits, hidden), grows = device_bf16(*gpu_, {}, n_logits, hidden, hidden + 4);
  const auto h_values = device_values(*gpu_, gh);
  std::vector<std::uint16_t> h_bf16(h_values.size());
  for (std::size_t i = 0; i < h_bf16.size(); ++i) h_bf16[i] = f32_to_bf16(h_values[i]);
  Matrix ch2 = host_f32(cpu_, h_bf16, n, hidden);
  cpu_.gather_logit_rows(ch2.t, crows.t);
  gpu_->gather_logit_rows(gh.t, grows.t);
  expect_close("gather_logit_rows", device_values(*gpu_, grows), host_values(crows), 0.0f, 0.0f);
}

// Gemma's operations: geglu (both kernels: the vector one where widths and strides allow), the final
// logits' soft cap (f32, strided, infinities) and the embedding scale (bf16 rounded once, bit for bit
// with the host's f32 product; f32; more rows than one grid holds).
TEST_F(CudaBackendOps, GegluSoftCapAndScale) {
  struct GegluCase {
    int rows, inter, out_pad;
  };
  // inter % 8 == 0 with 8-aligned strides: the vector kernel; an odd width or stride: the general one.
  for (const GegluCase& c : {GegluCase{1, 10240, 8}, GegluCase{3, 640, 8}, GegluCase{70, 640, 0}, GegluCase{5, 500, 8},
                             GegluCase{7, 640, 1}, GegluCase{2, 17, 0}}) {
    const auto gate_up = random_bf16(std::size_t(c.rows) * 2 * c.inter, 3.0f);
    Matrix cgu = host_f32(cpu_, gate_up, c.rows, 2 * c.inter), cout = host_f32(cpu_, {}, c.rows, c.inter);
    cpu_.geglu(cgu.t, cout.t);
    Matrix ggu = device_bf16(*gpu_, gate_up, c.rows, 2 * c.inter, 2 * c.inter + 8);
    Matrix gout = device_bf16(*gpu_, {}, c.rows, c.inter, c.inter + c.out_pad);
    gpu_->geglu(ggu.t, gout.t);
    // F32 math on the same bf16 inputs, one bf16 rounding: within half a bf16 step (2^-9 relative),
    // plus the F32 cancellation of 1 + tanh for very negative gates.
    expect_close(fmt::format("geglu [{}, {}] out stride +{}", c.rows, c.inter, c.out_pad), device_values(*gpu_, gout),
                 host_values(cout), 1e-4f, 5e-3f);
  }
  {  // PyTorch's gelu(approximate="tanh") at a few points, up = 1 (bf16 outputs).
    const std::vector<float> gates = {0.0f, 1.0f, -1.0f, 2.0f, -3.0f, 0.5f, 10.0f, -10.0f};
    const std::vector<float> want = {0.0f,        0.84119199f, -0.15880801f, 1.95459769f,
                                     -0.00363739f, 0.34571401f, 10.0f,        0.0f};
    std::vector<std::uint16_t> gate_up;
    for (const float g : gates) gate_up.push_back(f32_to_bf16(g));
    gate_up.insert(gate_up.end(), gates.size(), f32_to_bf16(1.0f));
    const auto n = std::int64_t(gates.size());
    Matrix ggu = device_bf16(*gpu_, gate_up, 1, 2 * n, 2 * n), gout = device_bf16(*gpu_, {}, 1, n, n);
    gpu_->geglu(ggu.t, gout.t);
    expect_close("geglu at PyTorch's points", device_values(*gpu_, gout), want, 1e-6f, 4e-3f);
  }

  // Soft cap: logits [rows, vocab] as a column slice of a wider f32 matrix whose padding must stay.
  for (const float cap : {30.0f, 1.0f}) {
    const std::int64_t rows = 5, vocab = 262144 + 7, stride = vocab + 9;
    auto values = random_f32(std::size_t(rows * stride), -200.0f, 200.0f);
    values[0] = INFINITY;
    values[1] = -INFINITY;
    values[2] = 0.0f;
    values[3] = 1e-3f;
    constexpr float k_pad = -777.0f;
    for (std::int64_t r = 0; r < rows; ++r) {
      for (std::int64_t c = vocab; c < stride; ++c) values[std::size_t(r * stride + c)] = k_pad;
    }
    std::vector<float> dense;
    for (std::int64_t r = 0; r < rows; ++r) {
      dense.insert(dense.end(), values.begin() + r * stride, values.begin() + r * stride + vocab);
    }
    Matrix cx = host_f32_values(dense, rows, vocab);
    cpu_.soft_cap(cx.t, cap);
    Matrix gx = device_f32(*gpu_, values, rows, stride);
    gpu_->soft_cap(gx.t.slice_cols(0, vocab), cap);
    const std::vector<float> all = device_values(*gpu_, gx);
    std::vector<float> got;
    std::size_t n_pad_written = 0;
    for (std::int64_t r = 0; r < rows; ++r) {
      got.insert(got.end(), all.begin() + r * stride, all.begin() + r * stride + vocab);
      for (std::int64_t c = vocab; c < stride; ++c) n_pad_written += all[std::size_t(r * stride + c)] != k_pad;
    }
    EXPECT_EQ(n_pad_written, 0u) << "soft_cap wrote row padding";
    EXPECT_EQ(got[0], cap);
    EXPECT_EQ(got[1], -cap);
    EXPECT_EQ(got[2], 0.0f);
    expect_close(fmt::format("soft_cap {} [{}, {}]", cap, rows, vocab), got, host_values(cx), 2e-6f * cap, 1e-5f);
  }

  // Scale: bf16 activations, each element bf16(f32(x) * factor) exactly (IEEE product, one rounding).
  for (const std::int64_t rows : {std::int64_t(1), std::int64_t(9), std::int64_t(70000)}) {
    const std::int64_t cols = rows > 1000 ? 24 : 2560, stride = cols + 8;  // 70,000 rows: past one grid's 65,535
    const float factor = bf16_to_f32(f32_to_bf16(std::sqrt(2560.0f)));  // Gemma-3-4B: bf16(sqrt(hidden))
    const auto x = random_bf16(std::size_t(rows * cols), 1.0f);
    Matrix cx = host_f32(cpu_, x, rows, cols);
    cpu_.scale(cx.t, factor);
    Matrix gx = device_bf16(*gpu_, x, rows, cols, stride);
    gpu_->scale(gx.t, factor);
    const std::vector<float> got = device_values(*gpu_, gx);  // also checks the padding kept its poison
    std::size_t n_diff = 0, first = 0;
    for (std::size_t i = 0; i < x.size(); ++i) {
      if (f32_to_bf16(got[i]) != f32_to_bf16(bf16_to_f32(x[i]) * factor) && n_diff++ == 0) first = i;
    }
    EXPECT_EQ(n_diff, 0u) << "scale bf16 [" << rows << ", " << cols << "]: not the once-rounded product, first at "
                          << first;
    expect_close(fmt::format("scale bf16 [{}, {}]", rows, cols), got, host_values(cx), 0.0f, 1.0f / 256);
  }
  {
    const std::int64_t rows = 3, cols = 1000;
    const auto x = random_f32(std::size_t(rows * cols), -5.0f, 5.0f);
    Matrix cx = host_f32_values(x, rows, cols), gx = device_f32(*gpu_, x, rows, cols);
    cpu_.scale(cx.t, 0.125f);
    gpu_->scale(gx.t, 0.125f);
    expect_close("scale f32", device_values(*gpu_, gx), host_values(cx), 0.0f, 0.0f);
  }
  gpu_->synchronize();
}

TEST_F(CudaBackendOps, RejectsBadStepsTokensAndKvDtypes) {
  make_caches(KvCacheLayout{1, 4, 4, 1, 64, DType::bf16});
  Step step = make_step({{3, 0}}, 4, 4);
  step.block_tables[0] = 4;  // outside the cache
  EXPECT_THROW(gpu_->begin_step(step, gpu_kv_), Error);
  step.block_tables[0] = 0;
  step.tokens.push_back(1);  // more tokens than the rows hold
  EXPECT_THROW(gpu_->begin_step(step, gpu_kv_), Error);
  step.tokens.pop_back();
  step.tokens[1] = 1000;  // outside the vocabulary
  gpu_->begin_step(step, gpu_kv_);
  Matrix table = device_bf16(*gpu_, std::vector<std::uint16_t>(100 * 8, 0), 100, 8, 8);
  Matrix out = device_bf16(*gpu_, {}, 3, 8, 8);
  EXPECT_THROW(gpu_->embedding(table.t, out.t), Error);

  KvCache f32_cache = gpu_->allocate_kv_cache(KvCacheLayout{1, 4, 4, 1, 64, DType::f32});
  step.tokens[1] = 1;
  gpu_->begin_step(step, f32_cache);
  Matrix kv = device_bf16(*gpu_, std::vector<std::uint16_t>(3 * 64, 0), 3, 64, 64);
  EXPECT_THROW(gpu_->kv_store(f32_cache, 0, kv.t, kv.t), Error);
  gpu_->synchronize();
}

}  // namespace
}  // namespace flare::helios

#endif  // FLARE_HAVE_CUDA
