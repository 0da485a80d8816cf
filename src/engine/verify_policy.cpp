// Adaptive verification (see verify_policy.h).
#include "engine/verify_policy.h"

#include <algorithm>
#include <cmath>

namespace flare::engine {
namespace {

constexpr double kDecay = 0.9;          // per round: about the last ten rounds count
constexpr double kStepDecay = 0.8;      // per measured step
constexpr double kPriorRate = 0.7;      // before a choice's first round
constexpr double kPriorBeta = 0.05;     // a draft token against a decode row before any measurement
constexpr std::int32_t kRetryRounds = 8;  // a choice not drafting tries one draft this often

double expected_tokens(double alpha, std::int32_t k) {
  if (alpha >= 1.0) return double(k + 1);
  return (1.0 - std::pow(alpha, k + 1)) / (1.0 - alpha);
}

}  // namespace

void AcceptanceEstimate::record(std::int32_t n_drafted, std::int32_t n_accepted) {
  if (n_drafted <= 0) return;
  accepted = accepted * kDecay + double(n_accepted);
  drafted = drafted * kDecay + double(n_drafted);
}

double AcceptanceEstimate::rate() const {
  // Prior counts of one pseudo-round keep an estimate from a single round from reaching 0 or 1.
  return (accepted + kPriorRate) / (drafted + 1.0);
}

std::size_t VerifyPolicy::bucket(std::int32_t n_rows) {
  std::size_t b = 0;
  for (std::int32_t n = std::max(n_rows, 1) - 1; n > 0 && b + 1 < kBuckets; n >>= 1) ++b;
  return b;
}

void VerifyPolicy::record_step(std::int32_t n_rows, std::int32_t n_tokens, double ms) {
  if (n_rows <= 0 || n_tokens < n_rows || !(ms > 0.0) || !std::isfinite(ms)) return;
  const std::size_t b = bucket(n_rows);
  if (n_tokens == n_rows) {
    decode_ms_[b] = decode_ms_[b] > 0.0 ? kStepDecay * decode_ms_[b] + (1.0 - kStepDecay) * ms : ms;
    return;
  }
  if (decode_ms_[b] <= 0.0) return;  // the extra tokens' cost needs the decode step's first
  const double per_token = std::max(0.0, ms - decode_ms_[b]) / double(n_tokens - n_rows);
  token_ms_[b] = token_ms_[b] > 0.0 ? kStepDecay * token_ms_[b] + (1.0 - kStepDecay) * per_token : per_token;
}

double VerifyPolicy::relative_draft_cost(std::int32_t n_rows) const {
  const std::size_t b = bucket(n_rows);
  if (decode_ms_[b] <= 0.0 || token_ms_[b] <= 0.0) return kPriorBeta;
  return token_ms_[b] * double(std::max(n_rows, 1)) / decode_ms_[b];
}

std::int32_t VerifyPolicy::draft_count(AcceptanceEstimate& acceptance, std::int32_t k_max, std::int32_t n_rows) const {
  if (k_max <= 0) return 0;
  const double alpha = acceptance.rate();
  const double beta = relative_draft_cost(n_rows);
  std::int32_t best = 0;
  double best_rate = 1.0;  // ordinary decoding: one token for one row's share of a decode step
  for (std::int32_t k = 1; k <= k_max; ++k) {
    const double rate = expected_tokens(alpha, k) / (1.0 + beta * double(k));
    if (rate > best_rate) {
      best_rate = rate;
      best = k;
    }
  }
  if (best == 0 && ++acceptance.rounds_without_drafts >= kRetryRounds) {
    acceptance.rounds_without_drafts = 0;
    return 1;
  }
  if (best > 0) acceptance.rounds_without_drafts = 0;
  return best;
}

}  // namespace flare::engine
