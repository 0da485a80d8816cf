// Adaptive verification (see verify_policy.h).
#include "engine/verify_policy.h"

#include <algorithm>
#include <cmath>

namespace flare::engine {
namespace {

constexpr double kDecay = 0.9;          // per round: about the last ten rounds count
constexpr double kStepDecay = 0.8;      // per measured step
constexpr double kPriorRate = 0.7;      // before a choice's first round
constexpr double kPriorBeta = 0.05;     // a draft token's share of a decode step, unmeasured
constexpr std::int32_t kMinTrialInterval = 8;     // steps between trial steps at least ...
constexpr std::int32_t kMaxTrialInterval = 4096;  // ... and at most
constexpr double kTrialOverhead = 0.02;           // trials' share of the decode time between them

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

void VerifyPolicy::record_step(std::int32_t n_rows, std::int32_t widest_row_tokens, double ms) {
  if (n_rows <= 0 || widest_row_tokens <= 0 || !(ms > 0.0) || !std::isfinite(ms)) return;
  const auto width = std::size_t(std::clamp<std::int64_t>(widest_row_tokens, 1, std::int64_t(kWidths) - 1));
  double& slot = step_ms_[bucket(n_rows)][width];
  slot = slot > 0.0 ? kStepDecay * slot + (1.0 - kStepDecay) * ms : ms;
}

double VerifyPolicy::relative_cost(std::int32_t n_rows, std::int32_t k) const {
  const auto& ms = step_ms_[bucket(n_rows)];
  const auto width = std::size_t(std::clamp<std::int64_t>(std::int64_t(k) + 1, 1, std::int64_t(kWidths) - 1));
  if (width == 1) return 1.0;
  const double decode = ms[1];
  if (decode > 0.0 && ms[width] > 0.0) return ms[width] / decode;
  double floor = 1.0;  // a wider round costs at least what a narrower measured one does
  if (decode > 0.0) {
    for (std::size_t w = 2; w < width; ++w) {
      if (ms[w] > 0.0) floor = std::max(floor, ms[w] / decode);
    }
  }
  return std::max(floor, 1.0 + kPriorBeta * double(k));
}

std::int32_t VerifyPolicy::trial_interval(std::int32_t n_rows) const {
  // A trial step costs relative_cost(n, 1) decode steps: space trials so that the extra stays
  // within kTrialOverhead of the decode time between them.
  const double extra = relative_cost(n_rows, 1) - 1.0;
  const double interval = std::ceil(extra / kTrialOverhead);
  return std::int32_t(std::clamp<double>(interval, kMinTrialInterval, kMaxTrialInterval));
}

void VerifyPolicy::begin_step(std::int32_t n_rows) {
  ++n_steps_;
  trial_step_ = n_steps_ - last_trial_ >= trial_interval(n_rows);
  if (trial_step_) last_trial_ = n_steps_;
}

std::int32_t VerifyPolicy::draft_count(const AcceptanceEstimate& acceptance, std::int32_t k_max, std::int32_t n_rows) const {
  if (k_max <= 0) return 0;
  const double alpha = acceptance.rate();
  std::int32_t best = 0;
  double best_rate = 1.0;  // ordinary decoding: one token a decode step
  for (std::int32_t k = 1; k <= k_max; ++k) {
    const double rate = expected_tokens(alpha, k) / relative_cost(n_rows, k);
    if (rate > best_rate) {
      best_rate = rate;
      best = k;
    }
  }
  return best == 0 && trial_step_ ? 1 : best;  // not drafting: one draft on trial steps
}

}  // namespace flare::engine
