// Host sampling under a TokenRule (constrained_sampling.h).
#include "engine/constrained_sampling.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <vector>

#include "common/error.h"

namespace flare::engine {
namespace {

void check_token(TokenId token, std::size_t vocab) {
  if (token < 0 || std::size_t(token) >= vocab) {
    fail(ExitCode::failure, "internal: token constraint names id {} outside the vocabulary of {}", token, vocab);
  }
}

// The raw model's logprob of `token` and its n_top best alternatives.
void set_raw_logprobs(std::span<const float> logits, std::int32_t n_top, helios::SampledToken& out) {
  const float max_logit = *std::max_element(logits.begin(), logits.end());
  double sum = 0.0;
  for (float x : logits) sum += std::exp(double(x) - max_logit);
  const double lse = double(max_logit) + std::log(sum);
  out.logprob = float(double(logits[std::size_t(out.token)]) - lse);
  out.top_logprobs.clear();
  if (n_top <= 0) return;
  std::vector<std::int32_t> order(logits.size());
  std::iota(order.begin(), order.end(), 0);
  const auto n = std::min(std::size_t(n_top), order.size());
  std::partial_sort(order.begin(), order.begin() + std::ptrdiff_t(n), order.end(), [&](std::int32_t a, std::int32_t b) {
    return logits[std::size_t(a)] > logits[std::size_t(b)] || (logits[std::size_t(a)] == logits[std::size_t(b)] && a < b);
  });
  for (std::size_t i = 0; i < n; ++i) out.top_logprobs.emplace_back(order[i], float(double(logits[std::size_t(order[i])]) - lse));
}

// The ids a mask rule allows within the vocabulary (its bits, then its extra tokens not set there).
std::vector<TokenId> mask_tokens(const TokenRule& rule, std::size_t vocab) {
  std::vector<TokenId> ids;
  if (rule.mask) {
    const auto& words = *rule.mask;
    const std::size_t n_words = std::min(words.size(), (vocab + 63) / 64);
    for (std::size_t w = 0; w < n_words; ++w) {
      for (std::uint64_t bits = words[w]; bits != 0; bits &= bits - 1) {
        const std::size_t id = w * 64 + std::size_t(__builtin_ctzll(bits));
        if (id < vocab) ids.push_back(TokenId(id));
      }
    }
  }
  for (TokenId token : rule.tokens) {
    const bool set = rule.mask && token >= 0 && std::size_t(token) / 64 < rule.mask->size() &&
                     (((*rule.mask)[std::size_t(token) / 64] >> (token & 63)) & 1);
    if (!set) ids.push_back(token);
  }
  return ids;
}

}  // namespace

helios::SampledToken sample_constrained(const TokenRule& rule, std::span<const float> logits,
                                        const helios::SamplingParams& params, const helios::TokenHistory& history,
                                        std::uint64_t output_index) {
  if (rule.kind == TokenRule::Kind::any) return helios::sample_token(logits, params, history, output_index);
  if (rule.kind == TokenRule::Kind::mask) {
    TokenRule listed{TokenRule::Kind::allowed, mask_tokens(rule, logits.size()), nullptr};
    return sample_constrained(listed, logits, params, history, output_index);
  }
  if (rule.tokens.empty()) fail(ExitCode::failure, "internal: token constraint allows no token");
  for (TokenId token : rule.tokens) check_token(token, logits.size());
  helios::SampledToken out;
  if (rule.kind == TokenRule::Kind::forced || rule.tokens.size() == 1) {
    out.token = rule.tokens[0];
  } else {
    // [vocab] f32: the allowed ids keep their logits, every other id is -inf.
    std::vector<float> masked(logits.size(), -std::numeric_limits<float>::infinity());
    bool any_finite = false;
    for (TokenId token : rule.tokens) {
      masked[std::size_t(token)] = logits[std::size_t(token)];
      any_finite = any_finite || std::isfinite(logits[std::size_t(token)]);
    }
    if (!any_finite) {  // the model gives every allowed id zero probability: take the first
      out.token = rule.tokens[0];
    } else {
      helios::SamplingParams masked_params = params;
      masked_params.n_top_logprobs = 0;
      // A bias may not push every allowed id to -inf: drop the biases that are -inf.
      std::erase_if(masked_params.logit_bias, [](const auto& bias) { return std::isinf(bias.second) && bias.second < 0; });
      out.token = helios::sample_token(masked, masked_params, history, output_index).token;
    }
  }
  set_raw_logprobs(logits, params.n_top_logprobs, out);
  return out;
}

}  // namespace flare::engine
