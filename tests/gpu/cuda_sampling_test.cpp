// CudaBackend::sample against the host reference (helios::sample_token) on random logits rows:
// vocabularies of 151936, 32000 and 8192, batches of 64 rows (narrow and wide distributions, rows
// of bf16-rounded values full of ties, a constant row), a grid of parameter sets (greedy,
// temperature, small and large top-k, top-p, min-p, all together,
// penalties over random histories, logit biases with duplicates and -inf, seeds, top logprobs,
// rows the device hands back to the host), in each of the kernel's layouts (a cluster of CTAs a row,
// one CTA a row, slices in global memory). Tokens must be identical (the kernel's only allowed
// difference, a draw within ~1e-13 of a cumulative-probability boundary, is not expected in a
// few thousand draws; a mismatch prints the row); logprobs within 2e-4. Prints the time per call.
// Logits rows are padded and the padding is NaN, so reading past a row shows. Skips without a GPU.
#ifdef FLARE_HAVE_CUDA

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <initializer_list>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "gpu_support.h"
#include "helios/dtype.h"
#include "helios/sampling.h"

namespace flare::helios {
namespace {

using namespace gpu_testing;

constexpr std::int64_t k_rows = 64;
constexpr std::int64_t k_row_padding = 32;

struct Case {
  std::string name;
  SamplingParams params;
  bool histories = false;  // random prompt and output tokens for the penalties
  bool biases = false;     // random logit biases (duplicates, -inf)
};

std::vector<Case> parameter_grid() {
  std::vector<Case> grid;
  auto add = [&](std::string name, std::function<void(SamplingParams&)> set, bool histories = false, bool biases = false) {
    Case c{std::move(name), {}, histories, biases};
    set(c.params);
    grid.push_back(std::move(c));
  };
  add("greedy", [](SamplingParams& p) { p.temperature = 0; });
  add("greedy+top20", [](SamplingParams& p) { p.temperature = 0; p.n_top_logprobs = 20; });
  add("temp1", [](SamplingParams& p) { p.temperature = 1; });
  add("temp0.7+top5", [](SamplingParams& p) { p.temperature = 0.7f; p.n_top_logprobs = 5; });
  add("temp1.5+topk50", [](SamplingParams& p) { p.temperature = 1.5f; p.top_k = 50; });
  add("topk1", [](SamplingParams& p) { p.top_k = 1; });
  add("topk3000", [](SamplingParams& p) { p.top_k = 3000; });  // above the 1024-candidate cap
  add("topp0.9", [](SamplingParams& p) { p.top_p = 0.9f; });
  // Not top_p 0.5: on the constant row (vocab / 2 tokens of mass exactly 1 / vocab each) its boundary
  // is exact, the one case where the host's sequential sum and the kernel's may round apart.
  add("temp0.8+topp0.6", [](SamplingParams& p) { p.temperature = 0.8f; p.top_p = 0.6f; });
  add("minp0.05", [](SamplingParams& p) { p.min_p = 0.05f; });
  add("topk100+topp0.95+minp0.1", [](SamplingParams& p) { p.top_k = 100; p.top_p = 0.95f; p.min_p = 0.1f; });
  add("topk5000+topp0.99+minp0.001",
      [](SamplingParams& p) { p.top_k = 5000; p.top_p = 0.99f; p.min_p = 0.001f; p.temperature = 1.3f; });
  auto penalties = [](SamplingParams& p) {
    p.repetition_penalty = 1.3f;
    p.presence_penalty = 0.6f;
    p.frequency_penalty = 0.35f;
  };
  add("penalties+greedy", [&](SamplingParams& p) { penalties(p); p.temperature = 0; }, true);
  add("penalties+temp1", [&](SamplingParams& p) { penalties(p); }, true);
  add("repetition-only+topp0.9", [](SamplingParams& p) { p.repetition_penalty = 0.8f; p.top_p = 0.9f; }, true);
  add("frequency-only", [](SamplingParams& p) { p.frequency_penalty = -0.5f; p.temperature = 0.5f; }, true);
  add("bias+greedy", [](SamplingParams& p) { p.temperature = 0; }, false, true);
  add("bias+penalties+topk40+top3", [&](SamplingParams& p) { penalties(p); p.top_k = 40; p.n_top_logprobs = 3; }, true,
      true);
  add("host-fallback-top30", [](SamplingParams& p) { p.n_top_logprobs = 30; p.top_p = 0.8f; });
  return grid;
}

class CudaSampling : public BackendVersusCpuTest {
 protected:
  CudaSampling() : BackendVersusCpuTest(1) {}  // the reference is the host sampler, not the CPU backend

  // [k_rows, vocab] logits of several shapes: N(0, scale) for scales 0.5..8, bf16-rounded rows
  // (ties everywhere), a constant row (one tie of the whole vocabulary).
  std::vector<float> random_logits(std::int64_t vocab) {
    std::vector<float> logits(std::size_t(k_rows * vocab));
    const float scales[] = {0.5f, 1.0f, 2.0f, 4.0f, 8.0f};
    for (std::int64_t r = 0; r < k_rows; ++r) {
      std::normal_distribution<float> normal(0.0f, scales[r % 5]);
      for (std::int64_t c = 0; c < vocab; ++c) {
        float v = normal(rng_);
        if (r % 8 == 7) v = bf16_to_f32(f32_to_bf16(v));
        if (r == 5) v = 0.25f;
        logits[std::size_t(r * vocab + c)] = v;
      }
    }
    return logits;
  }

  // The rows on the device with NaN padding between them.
  Matrix device_logits(const std::vector<float>& logits, std::int64_t vocab) {
    const std::int64_t stride = vocab + k_row_padding;
    std::vector<float> padded(std::size_t(k_rows * stride), std::numeric_limits<float>::quiet_NaN());
    for (std::int64_t r = 0; r < k_rows; ++r) {
      std::copy_n(logits.begin() + r * vocab, vocab, padded.begin() + r * stride);
    }
    Matrix m{gpu_->allocate(padded.size() * 4), {}};
    gpu_->upload(*m.buffer, 0, padded.data(), padded.size() * 4);
    m.t = Tensor{m.buffer->data(), DType::f32, k_rows, vocab, stride};
    return m;
  }

  // Every parameter set of parameter_grid() on random rows of each vocabulary against the host.
  void check_parameter_grid(std::initializer_list<std::int64_t> vocabs, const char* layout);

  // Replaces the fixture's backend with one built with `options` (the sampler's layout switches are
  // fixed at construction); call before allocating anything on it.
  void use_backend_options(const cuda::CudaBackendOptions& options) {
    gpu_.reset();
    std::string reason;
    gpu_ = try_cuda_backend(&reason, options);
    ASSERT_TRUE(gpu_) << reason;
  }

  std::vector<std::int32_t> random_tokens(std::size_t max_n, std::int32_t pool) {
    std::uniform_int_distribution<std::size_t> length(0, max_n);
    std::uniform_int_distribution<std::int32_t> token(0, pool - 1);
    std::vector<std::int32_t> out(length(rng_));
    for (auto& t : out) t = token(rng_);
    return out;
  }
};

void CudaSampling::check_parameter_grid(std::initializer_list<std::int64_t> vocabs, const char* layout) {
  for (const std::int64_t vocab : vocabs) {
    const std::vector<float> logits = random_logits(vocab);
    const Matrix device = device_logits(logits, vocab);
    for (const Case& c : parameter_grid()) {
      // Per row: its own seed and output index, histories and biases.
      std::vector<SamplingParams> params(k_rows, c.params);
      std::vector<std::vector<std::int32_t>> prompts(k_rows), outputs(k_rows);
      std::vector<SampleRequest> requests(k_rows);
      std::uniform_int_distribution<std::uint64_t> index(0, 1u << 20);
      for (std::int64_t r = 0; r < k_rows; ++r) {
        SamplingParams& p = params[std::size_t(r)];
        p.seed = rng_() * 0x100000001ull + std::uint64_t(r);
        if (c.histories) {
          // Most history tokens among the row's best 64 ids, so penalties change choices; repeats.
          prompts[std::size_t(r)] = random_tokens(400, std::int32_t(vocab));
          outputs[std::size_t(r)] = random_tokens(120, 64);
          for (auto& t : outputs[std::size_t(r)]) t = std::int32_t((t * 2654435761u) % std::uint32_t(vocab));
          if (r % 4 == 0) outputs[std::size_t(r)].push_back(std::int32_t(vocab) + 3);  // ignored: outside the vocabulary
        }
        if (c.biases) {
          std::uniform_int_distribution<std::int32_t> id(0, std::int32_t(vocab) - 1);
          std::uniform_real_distribution<float> value(-5.0f, 5.0f);
          for (int b = 0; b < 24; ++b) p.logit_bias.emplace_back(id(rng_), value(rng_));
          p.logit_bias.emplace_back(p.logit_bias[3].first, 2.5f);  // a duplicate id: added in order
          p.logit_bias.emplace_back(id(rng_), -std::numeric_limits<float>::infinity());
        }
        requests[std::size_t(r)] =
            SampleRequest{&p, TokenHistory{prompts[std::size_t(r)], outputs[std::size_t(r)]}, index(rng_)};
      }
      gpu_->sample(device.t, requests);  // warm-up (first call allocates)
      auto start = std::chrono::steady_clock::now();
      const std::vector<SampledToken> got = gpu_->sample(device.t, requests);
      const double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count();
      start = std::chrono::steady_clock::now();  // one row: the latency a lone request pays
      const SampledToken first = gpu_->sample(device.t.slice_rows(0, 1), std::span(requests).first(1)).front();
      const double us_one = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count();
      EXPECT_EQ(first.token, got.front().token) << c.name << " vocab " << vocab << ": row 0 alone";

      ASSERT_EQ(got.size(), std::size_t(k_rows));
      int n_token_mismatches = 0, n_top_mismatches = 0;
      double max_logprob_error = 0.0;
      for (std::int64_t r = 0; r < k_rows; ++r) {
        const std::span<const float> row(logits.data() + r * vocab, std::size_t(vocab));
        const SampleRequest& q = requests[std::size_t(r)];
        const SampledToken want = sample_token(row, *q.params, q.history, q.output_index);
        const SampledToken& have = got[std::size_t(r)];
        if (have.token != want.token) {
          ++n_token_mismatches;
          std::printf("  mismatch %s vocab %lld row %lld: gpu %d (logit %.9g) cpu %d (logit %.9g), u %.17g\n",
                      c.name.c_str(), (long long)vocab, (long long)r, have.token, row[std::size_t(have.token)],
                      want.token, row[std::size_t(want.token)], sampling_uniform(q.params->seed, q.output_index));
        }
        max_logprob_error = std::max(max_logprob_error, std::fabs(double(have.logprob) - want.logprob));
        if (have.top_logprobs.size() != want.top_logprobs.size()) {
          ++n_top_mismatches;
          continue;
        }
        for (std::size_t i = 0; i < want.top_logprobs.size(); ++i) {
          if (have.top_logprobs[i].first != want.top_logprobs[i].first) ++n_top_mismatches;
          max_logprob_error =
              std::max(max_logprob_error, std::fabs(double(have.top_logprobs[i].second) - want.top_logprobs[i].second));
        }
      }
      std::printf("[ sample   ] %-6s vocab %6lld %-30s %3lld rows %8.1f us/call, 1 row %7.1f us  token mismatches %d  "
                  "top mismatches %d  max logprob error %.2e\n",
                  layout, (long long)vocab, c.name.c_str(), (long long)k_rows, us, us_one, n_token_mismatches,
                  n_top_mismatches, max_logprob_error);
      EXPECT_EQ(n_token_mismatches, 0) << c.name << " vocab " << vocab;
      EXPECT_EQ(n_top_mismatches, 0) << c.name << " vocab " << vocab;
      EXPECT_LE(max_logprob_error, 2e-4) << c.name << " vocab " << vocab;
    }
  }
}

// The layout the backend picks: on sm_90+ a cluster of 8 CTAs a row, slices in shared memory.
TEST_F(CudaSampling, MatchesTheHostSamplerOnEveryParameterSet) { check_parameter_grid({151936, 32000, 8192}, "auto"); }

// One CTA a row (the layout before sm_90): 32000 ids fit its shared memory on an H200, 151936 do not.
TEST_F(CudaSampling, OneCtaARowMatchesTheHostSampler) {
  ASSERT_NO_FATAL_FAILURE(use_backend_options({.sampler_one_cta = true}));
  check_parameter_grid({151936, 32000}, "1-cta");
}

// Slices read from global memory (vocabularies too large for shared memory), penalties in scratch.
TEST_F(CudaSampling, GlobalMemorySlicesMatchTheHostSampler) {
  ASSERT_NO_FATAL_FAILURE(use_backend_options({.sampler_global_slices = true}));
  check_parameter_grid({151936}, "global");
}

// A seeded request draws the same tokens on the device as on the host over many output indices
// (Philox agrees), and the draws follow the distribution (not stuck on one token).
TEST_F(CudaSampling, SeededDrawsAgreeAcrossManyIndices) {
  const std::int64_t vocab = 8192;
  std::vector<float> logits = random_logits(vocab);
  for (std::int64_t r = 0; r < k_rows; ++r) {  // one shape for every row: scale 1.5
    std::normal_distribution<float> normal(0.0f, 1.5f);
    for (std::int64_t c = 0; c < vocab; ++c) logits[std::size_t(r * vocab + c)] = normal(rng_);
  }
  const Matrix device = device_logits(logits, vocab);
  SamplingParams p;
  p.seed = 0xfeedface12345678ull;
  p.top_k = 16;
  int n_mismatches = 0;
  std::vector<int> distinct(vocab, 0);
  for (std::uint64_t step = 0; step < 8; ++step) {
    std::vector<SampleRequest> requests;
    for (std::int64_t r = 0; r < k_rows; ++r) requests.push_back(SampleRequest{&p, {}, step * k_rows + std::uint64_t(r)});
    const std::vector<SampledToken> got = gpu_->sample(device.t, requests);
    for (std::int64_t r = 0; r < k_rows; ++r) {
      const std::span<const float> row(logits.data() + r * vocab, std::size_t(vocab));
      const SampledToken want = sample_token(row, p, {}, requests[std::size_t(r)].output_index);
      n_mismatches += got[std::size_t(r)].token != want.token;
      distinct[std::size_t(got[std::size_t(r)].token)] = 1;
    }
  }
  int n_distinct = 0;
  for (int d : distinct) n_distinct += d;
  std::printf("[ sample   ] 512 seeded draws: %d mismatches, %d distinct tokens\n", n_mismatches, n_distinct);
  EXPECT_EQ(n_mismatches, 0);
  EXPECT_GT(n_distinct, 16);  // 64 rows of different logits, top 16 of each
}

}  // namespace
}  // namespace flare::helios

#endif  // FLARE_HAVE_CUDA
