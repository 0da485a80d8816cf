// Sampling semantics: greedy, temperature, top-k/top-p/min-p truncation, penalties, logit bias,
// seeded determinism, raw logprobs, and parameter validation.
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <map>

#include "common/error.h"
#include "helios/sampling.h"

namespace flare::helios {
namespace {

const std::vector<float> kLogits = {1.0f, 3.0f, 2.0f, 0.5f, 2.9f};

SampledToken sample(const SamplingParams& p, std::uint64_t index = 0, std::span<const std::int32_t> output = {}) {
  return sample_token(kLogits, p, TokenHistory{{}, output}, index);
}

TEST(Sampling, GreedyTakesArgmaxAndReportsRawLogprobs) {
  SamplingParams p;
  p.temperature = 0;
  p.n_top_logprobs = 2;
  const auto out = sample(p);
  EXPECT_EQ(out.token, 1);
  double lse = 0;
  for (float x : kLogits) lse += std::exp(double(x));
  lse = std::log(lse);
  EXPECT_NEAR(out.logprob, 3.0 - lse, 1e-6);
  ASSERT_EQ(out.top_logprobs.size(), 2u);
  EXPECT_EQ(out.top_logprobs[0].first, 1);
  EXPECT_EQ(out.top_logprobs[1].first, 4);
}

TEST(Sampling, SameSeedSameTokensDifferentSeedsDiffer) {
  SamplingParams p;
  p.seed = 42;
  std::vector<std::int32_t> a, b, c;
  for (std::uint64_t i = 0; i < 64; ++i) {
    a.push_back(sample(p, i).token);
    b.push_back(sample(p, i).token);
  }
  p.seed = 43;
  for (std::uint64_t i = 0; i < 64; ++i) c.push_back(sample(p, i).token);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
}

TEST(Sampling, FollowsTheDistribution) {
  SamplingParams p;
  std::map<std::int32_t, int> counts;
  const int n = 20000;
  for (int i = 0; i < n; ++i) ++counts[sample(p, std::uint64_t(i)).token];
  double z = 0;
  for (float x : kLogits) z += std::exp(double(x));
  for (std::int32_t t = 0; t < 5; ++t) {
    EXPECT_NEAR(counts[t] / double(n), std::exp(double(kLogits[std::size_t(t)])) / z, 0.015) << "token " << t;
  }
}

TEST(Sampling, TopKTopPMinPTruncate) {
  SamplingParams p;
  p.top_k = 2;  // tokens 1 and 4 only
  for (int i = 0; i < 200; ++i) {
    const auto t = sample(p, std::uint64_t(i)).token;
    EXPECT_TRUE(t == 1 || t == 4);
  }
  p = {};
  p.top_p = 0.3f;  // the top token alone holds more than 30%
  for (int i = 0; i < 200; ++i) EXPECT_EQ(sample(p, std::uint64_t(i)).token, 1);
  p = {};
  p.min_p = 0.5f;  // keeps tokens with p >= 0.5 * p(top): 1, 4, and 2 (e^-1 = 0.37 < 0.5: no)
  for (int i = 0; i < 200; ++i) {
    const auto t = sample(p, std::uint64_t(i)).token;
    EXPECT_TRUE(t == 1 || t == 4) << t;
  }
}

TEST(Sampling, LowTemperatureIsNearlyGreedy) {
  SamplingParams p;
  p.temperature = 0.01f;
  for (int i = 0; i < 100; ++i) EXPECT_EQ(sample(p, std::uint64_t(i)).token, 1);
}

TEST(Sampling, PenaltiesAndBiasChangeTheChoice) {
  SamplingParams p;
  p.temperature = 0;
  p.logit_bias = {{3, 10.0f}};
  EXPECT_EQ(sample(p).token, 3);
  p = {};
  p.temperature = 0;
  const std::vector<std::int32_t> output = {1};
  p.presence_penalty = 0.5f;  // 3.0 - 0.5 < 2.9
  EXPECT_EQ(sample(p, 0, output).token, 4);
  p.presence_penalty = 0;
  p.frequency_penalty = 0.05f;
  const std::vector<std::int32_t> twice = {1, 1, 1};  // 3.0 - 0.15 < 2.9
  EXPECT_EQ(sample(p, 0, twice).token, 4);
  p.frequency_penalty = 0;
  p.repetition_penalty = 1.1f;  // 3.0 / 1.1 < 2.9
  EXPECT_EQ(sample(p, 0, output).token, 4);
  const std::vector<std::int32_t> prompt = {1};  // the repetition penalty counts prompt tokens too
  EXPECT_EQ(sample_token(kLogits, p, TokenHistory{prompt, {}}, 0).token, 4);
}

TEST(Sampling, RejectsBadParameters) {
  auto bad = [](auto mutate) {
    SamplingParams p;
    mutate(p);
    EXPECT_THROW(sampling_params_validate(p, 5), Error);
  };
  bad([](SamplingParams& p) { p.temperature = -1; });
  bad([](SamplingParams& p) { p.temperature = NAN; });
  bad([](SamplingParams& p) { p.top_k = -1; });
  bad([](SamplingParams& p) { p.top_p = 0; });
  bad([](SamplingParams& p) { p.top_p = 1.5f; });
  bad([](SamplingParams& p) { p.min_p = 2; });
  bad([](SamplingParams& p) { p.repetition_penalty = 0; });
  bad([](SamplingParams& p) { p.logit_bias = {{5, 1.0f}}; });
  bad([](SamplingParams& p) { p.logit_bias = {{-1, 1.0f}}; });
  bad([](SamplingParams& p) { p.n_top_logprobs = 6; });
  SamplingParams ok;
  EXPECT_NO_THROW(sampling_params_validate(ok, 5));
}

// Random123's known answers (kat_vectors) for Philox4x32-10: counter, key -> output.
TEST(Sampling, PhiloxMatchesKnownAnswers) {
  using Words4 = std::array<std::uint32_t, 4>;
  EXPECT_EQ(sampling_philox({0, 0, 0, 0}, {0, 0}), (Words4{0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}));
  EXPECT_EQ(sampling_philox({0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff}, {0xffffffff, 0xffffffff}),
            (Words4{0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}));
  EXPECT_EQ(sampling_philox({0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}, {0xa4093822, 0x299f31d0}),
            (Words4{0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}));
}

// The draw's uniform is Philox keyed by the seed at counter (index, 0, 0): 53 bits of words 0 and 1.
// The CUDA sampler computes the same, so these values pin the contract between the two.
TEST(Sampling, UniformIsPhiloxOfSeedAndIndex) {
  const std::uint64_t seed = 0x299f31d0a4093822ull, index = 0x85a308d3243f6a88ull;
  const auto x = sampling_philox({0x243f6a88, 0x85a308d3, 0, 0}, {0xa4093822, 0x299f31d0});
  const double expected = double(((std::uint64_t(x[0]) << 32) | x[1]) >> 11) / 9007199254740992.0;
  EXPECT_EQ(sampling_uniform(seed, index), expected);
  // (seed 0, index 0): the first known answer's words 0 and 1.
  EXPECT_EQ(sampling_uniform(0, 0), double(((std::uint64_t(0x6627e8d5) << 32) | 0xe169c58d) >> 11) / 9007199254740992.0);
  EXPECT_NE(sampling_uniform(0, 1), sampling_uniform(0, 0));
  EXPECT_NE(sampling_uniform(1ull << 32, 0), sampling_uniform(0, 0));  // the seed's high word counts
  EXPECT_NE(sampling_uniform(0, 1ull << 32), sampling_uniform(0, 0));  // and the index's
}

TEST(Sampling, UniformIsInRangeAndSpread) {
  double sum = 0;
  for (std::uint64_t i = 0; i < 10000; ++i) {
    const double u = sampling_uniform(7, i);
    ASSERT_GE(u, 0.0);
    ASSERT_LT(u, 1.0);
    sum += u;
  }
  EXPECT_NEAR(sum / 10000, 0.5, 0.02);
}

}  // namespace
}  // namespace flare::helios
