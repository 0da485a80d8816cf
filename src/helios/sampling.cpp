// Reference sampler (see sampling.h for the semantics).
#include "helios/sampling.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <numeric>
#include <unordered_map>

#include "common/error.h"

namespace flare::helios {
namespace {

// Raw log-softmax pieces: max and log-sum-exp.
double log_sum_exp(std::span<const float> logits, float max_logit) {
  double sum = 0.0;
  for (float x : logits) sum += std::exp(double(x) - max_logit);
  return double(max_logit) + std::log(sum);
}

void apply_penalties(std::vector<float>& logits, const SamplingParams& params, const TokenHistory& history) {
  const auto vocab = std::int32_t(logits.size());
  for (const auto& [token, bias] : params.logit_bias) logits[std::size_t(token)] += bias;
  if (params.repetition_penalty != 1.0f) {
    std::vector<bool> seen(logits.size(), false);
    for (auto tokens : {history.prompt, history.output}) {
      for (std::int32_t t : tokens) {
        if (t >= 0 && t < vocab) seen[std::size_t(t)] = true;
      }
    }
    for (std::size_t t = 0; t < logits.size(); ++t) {
      if (!seen[t]) continue;
      logits[t] = logits[t] > 0 ? logits[t] / params.repetition_penalty : logits[t] * params.repetition_penalty;
    }
  }
  if (params.presence_penalty != 0.0f || params.frequency_penalty != 0.0f) {
    std::unordered_map<std::int32_t, std::int32_t> counts;
    for (std::int32_t t : history.output) {
      if (t >= 0 && t < vocab) ++counts[t];
    }
    for (const auto& [t, count] : counts) {
      logits[std::size_t(t)] -= params.frequency_penalty * float(count) + params.presence_penalty;
    }
  }
}

std::int32_t argmax(std::span<const float> logits) {
  return std::int32_t(std::max_element(logits.begin(), logits.end()) - logits.begin());
}

// The candidate tokens best first (higher logit, ties by lower id, so the order does not depend
// on the sort implementation), ordered lazily: only the prefix a walk reaches is sorted, growing
// geometrically. A peaked distribution then costs O(vocab) instead of a full sort, and the result
// is exactly the one a full sort gives. With top_k the candidates are the top_k best (nth_element).
class BestFirst {
 public:
  BestFirst(const std::vector<float>& logits, std::int32_t top_k) : logits_(logits), order_(logits.size()) {
    std::iota(order_.begin(), order_.end(), 0);
    if (top_k > 0 && std::size_t(top_k) < order_.size()) {
      std::nth_element(order_.begin(), order_.begin() + top_k, order_.end(), better());
      order_.resize(std::size_t(top_k));
    }
  }
  std::size_t size() const { return order_.size(); }
  // The i-th best candidate.
  std::int32_t at(std::size_t i) {
    if (i >= n_sorted_) grow(i + 1);
    return order_[i];
  }
  // The candidates in no particular order (for sums over all of them).
  const std::vector<std::int32_t>& unordered() const { return order_; }

 private:
  static constexpr std::size_t kFirstSortedTokens = 64;
  struct Better {
    const std::vector<float>& logits;
    bool operator()(std::int32_t a, std::int32_t b) const {
      const float la = logits[std::size_t(a)], lb = logits[std::size_t(b)];
      return la > lb || (la == lb && a < b);
    }
  };
  Better better() const { return Better{logits_}; }
  // Sorts [n_sorted_, target): every unsorted candidate ranks below the sorted prefix, so the
  // prefix only ever extends.
  void grow(std::size_t need) {
    const std::size_t target = std::min(order_.size(), std::max({need, kFirstSortedTokens, 2 * n_sorted_}));
    const auto first = order_.begin() + std::ptrdiff_t(n_sorted_);
    std::partial_sort(first, order_.begin() + std::ptrdiff_t(target), order_.end(), better());
    n_sorted_ = target;
  }

  const std::vector<float>& logits_;
  std::vector<std::int32_t> order_;
  std::size_t n_sorted_ = 0;
};

// Draws from the processed logits with temperature, top-k, top-p and min-p: the kept tokens are
// the smallest best-first prefix whose mass reaches top_p, cut to those with at least min_p times
// the top probability; the draw walks them best first.
std::int32_t draw(const std::vector<float>& logits, const SamplingParams& params, double uniform) {
  BestFirst best(logits, params.top_k);
  const double max_scaled = double(logits[std::size_t(best.at(0))]) / params.temperature;
  auto prob = [&](std::int32_t token) { return std::exp(double(logits[std::size_t(token)]) / params.temperature - max_scaled); };
  double total = 0.0;
  for (std::int32_t token : best.unordered()) total += prob(token);
  std::size_t n = best.size();
  double kept = total;
  if (params.top_p < 1.0f) {  // smallest prefix whose mass reaches top_p (at least one token)
    double mass = 0.0;
    double sum = 0.0;
    for (std::size_t i = 0; i < n; ++i) {
      const double p = prob(best.at(i));
      mass += p / total;
      sum += p;
      if (mass >= params.top_p) {
        n = i + 1;
        kept = sum;
        break;
      }
    }
  }
  if (params.min_p > 0.0f) {  // tokens below min_p times the top probability (which is 1) are dropped
    const double threshold = params.min_p;
    std::size_t n_above = 0;
    double above = 0.0;
    for (std::int32_t token : best.unordered()) {
      const double p = prob(token);
      if (p >= threshold) {
        ++n_above;
        above += p;
      }
    }
    // Best first, the tokens at or above the threshold are a prefix; it is the cut when shorter.
    if (n_above < n) {
      n = std::max<std::size_t>(n_above, 1);
      kept = above;
    }
  }
  double target = uniform * kept;
  for (std::size_t i = 0; i < n; ++i) {
    target -= prob(best.at(i));
    if (target < 0.0) return best.at(i);
  }
  return best.at(n - 1);
}

}  // namespace

// Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC 2011): a
// counter-based generator, so the draw of any (seed, index) costs ten rounds and no state. The CUDA
// sampler (kernels/sample.cu) carries the same function; both are checked against Random123's
// known answers and against each other.
std::array<std::uint32_t, 4> sampling_philox(std::array<std::uint32_t, 4> counter, std::array<std::uint32_t, 2> key) {
  constexpr std::uint32_t m0 = 0xD2511F53u, m1 = 0xCD9E8D57u, w0 = 0x9E3779B9u, w1 = 0xBB67AE85u;
  for (int round = 0; round < 10; ++round) {
    const std::uint64_t p0 = std::uint64_t(m0) * counter[0], p1 = std::uint64_t(m1) * counter[2];
    counter = {std::uint32_t(p1 >> 32) ^ counter[1] ^ key[0], std::uint32_t(p1), std::uint32_t(p0 >> 32) ^ counter[3] ^ key[1],
               std::uint32_t(p0)};
    key = {key[0] + w0, key[1] + w1};
  }
  return counter;
}

double sampling_uniform(std::uint64_t seed, std::uint64_t output_index) {
  // Keyed by the seed, counted by the output index; the first two words give 53 bits.
  const auto x = sampling_philox({std::uint32_t(output_index), std::uint32_t(output_index >> 32), 0, 0},
                                 {std::uint32_t(seed), std::uint32_t(seed >> 32)});
  const std::uint64_t bits = ((std::uint64_t(x[0]) << 32) | x[1]) >> 11;
  return double(bits) * (1.0 / 9007199254740992.0);  // 2^-53
}

void sampling_params_validate(const SamplingParams& params, std::int32_t vocab_size) {
  if (!(params.temperature >= 0.0f) || !std::isfinite(params.temperature)) {
    fail_usage("temperature must be a finite number >= 0, got {}", params.temperature);
  }
  if (params.top_k < 0) fail_usage("top_k must be >= 0, got {}", params.top_k);
  if (!(params.top_p > 0.0f && params.top_p <= 1.0f)) fail_usage("top_p must be in (0, 1], got {}", params.top_p);
  if (!(params.min_p >= 0.0f && params.min_p <= 1.0f)) fail_usage("min_p must be in [0, 1], got {}", params.min_p);
  if (!(params.repetition_penalty > 0.0f) || !std::isfinite(params.repetition_penalty)) {
    fail_usage("repetition_penalty must be > 0, got {}", params.repetition_penalty);
  }
  if (!std::isfinite(params.presence_penalty) || !std::isfinite(params.frequency_penalty)) {
    fail_usage("presence and frequency penalties must be finite");
  }
  if (params.n_top_logprobs < 0 || params.n_top_logprobs > vocab_size) {
    fail_usage("top logprobs must be in 0..{}, got {}", vocab_size, params.n_top_logprobs);
  }
  for (const auto& [token, bias] : params.logit_bias) {
    if (token < 0 || token >= vocab_size) fail_usage("logit_bias token {} outside the vocabulary 0..{}", token, vocab_size - 1);
    if (std::isnan(bias)) fail_usage("logit_bias for token {} is not a number", token);
  }
}

SampledToken sample_token(std::span<const float> logits, const SamplingParams& params,
                          const TokenHistory& history, std::uint64_t output_index) {
  if (logits.empty()) fail(ExitCode::failure, "internal: sampling from empty logits");
  sampling_params_validate(params, std::int32_t(logits.size()));
  std::vector<float> processed(logits.begin(), logits.end());
  apply_penalties(processed, params, history);
  SampledToken out;
  if (params.temperature == 0.0f) {
    out.token = argmax(processed);
  } else {
    out.token = draw(processed, params, sampling_uniform(params.seed, output_index));
  }
  const float max_logit = *std::max_element(logits.begin(), logits.end());
  const double lse = log_sum_exp(logits, max_logit);
  out.logprob = float(double(logits[std::size_t(out.token)]) - lse);
  if (params.n_top_logprobs > 0) {
    std::vector<std::int32_t> order(logits.size());
    std::iota(order.begin(), order.end(), 0);
    const auto n = std::size_t(params.n_top_logprobs);
    std::partial_sort(order.begin(), order.begin() + std::ptrdiff_t(n), order.end(), [&](std::int32_t a, std::int32_t b) {
      return logits[std::size_t(a)] > logits[std::size_t(b)] || (logits[std::size_t(a)] == logits[std::size_t(b)] && a < b);
    });
    for (std::size_t i = 0; i < n; ++i) {
      out.top_logprobs.emplace_back(order[i], float(double(logits[std::size_t(order[i])]) - lse));
    }
  }
  return out;
}

}  // namespace flare::helios
