// The sampler's lazy best-first truncation (top-k, top-p, min-p) against a full-sort reference:
// on random vocabularies, peaked and flat, with ties, the drawn token must be the one the
// straightforward "sort everything, cut, walk" definition gives for the same uniform number.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>

#include "helios/sampling.h"

namespace flare::helios {
namespace {

// The definition: sort all tokens best first (ties by id), keep top_k, the smallest prefix whose
// mass reaches top_p, then those with at least min_p times the top probability; walk them.
std::int32_t reference_draw(const std::vector<float>& logits, const SamplingParams& params, double uniform) {
  std::vector<std::int32_t> order(logits.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](std::int32_t a, std::int32_t b) {
    return logits[std::size_t(a)] > logits[std::size_t(b)] || (logits[std::size_t(a)] == logits[std::size_t(b)] && a < b);
  });
  if (params.top_k > 0 && std::size_t(params.top_k) < order.size()) order.resize(std::size_t(params.top_k));
  const double max_scaled = double(logits[std::size_t(order[0])]) / params.temperature;
  std::vector<double> probs;
  double total = 0.0;
  for (std::int32_t t : order) {
    probs.push_back(std::exp(double(logits[std::size_t(t)]) / params.temperature - max_scaled));
    total += probs.back();
  }
  std::size_t n = order.size();
  double mass = 0.0;
  for (std::size_t i = 0; i < n && params.top_p < 1.0f; ++i) {
    mass += probs[i] / total;
    if (mass >= params.top_p) n = i + 1;
  }
  std::size_t keep = 1;
  while (params.min_p > 0.0f && keep < n && probs[keep] >= params.min_p * probs[0]) ++keep;
  if (params.min_p > 0.0f) n = keep;
  double kept = 0.0;
  for (std::size_t i = 0; i < n; ++i) kept += probs[i];
  double target = uniform * kept;
  for (std::size_t i = 0; i < n; ++i) {
    target -= probs[i];
    if (target < 0.0) return order[i];
  }
  return order[n - 1];
}

std::vector<float> random_logits(std::mt19937& rng, std::size_t vocab, float scale, bool ties) {
  std::normal_distribution<float> normal(0.0f, scale);
  std::vector<float> logits(vocab);
  for (auto& x : logits) x = ties ? std::round(normal(rng)) : normal(rng);
  return logits;
}

TEST(SamplingTruncation, MatchesTheFullSortDefinition) {
  std::mt19937 rng(7);
  int n_cases = 0;
  for (std::size_t vocab : {1u, 5u, 63u, 64u, 65u, 1000u, 20000u}) {
    for (float scale : {0.5f, 3.0f, 12.0f}) {  // flat to peaked
      for (bool ties : {false, true}) {
        const auto logits = random_logits(rng, vocab, scale, ties);
        for (std::int32_t top_k : {0, 1, 3, 100}) {
          for (float top_p : {1.0f, 0.999f, 0.9f, 0.5f, 0.05f}) {
            for (float min_p : {0.0f, 0.01f, 0.3f}) {
              SamplingParams params;
              params.temperature = 0.8f;
              params.top_k = top_k;
              params.top_p = top_p;
              params.min_p = min_p;
              for (std::uint64_t index = 0; index < 3; ++index) {
                params.seed = rng();
                const std::int32_t got = sample_token(logits, params, {}, index).token;
                const std::int32_t want = reference_draw(logits, params, sampling_uniform(params.seed, index));
                ASSERT_EQ(got, want) << "vocab " << vocab << " scale " << scale << " ties " << ties << " top_k "
                                     << top_k << " top_p " << top_p << " min_p " << min_p << " index " << index;
                ++n_cases;
              }
            }
          }
        }
      }
    }
  }
  EXPECT_EQ(n_cases, 7 * 3 * 2 * 4 * 5 * 3 * 3);
}

// Masked tokens (-inf logits, as constrained decoding leaves them) are never drawn.
TEST(SamplingTruncation, NeverDrawsMinusInfinity) {
  std::vector<float> logits(5000, -std::numeric_limits<float>::infinity());
  logits[17] = 0.0f;
  logits[4000] = 0.5f;
  SamplingParams params;
  for (float top_p : {1.0f, 0.5f}) {
    params.top_p = top_p;
    for (std::uint64_t i = 0; i < 200; ++i) {
      const auto token = sample_token(logits, params, {}, i).token;
      EXPECT_TRUE(token == 17 || token == 4000) << token;
    }
  }
}

}  // namespace
}  // namespace flare::helios
