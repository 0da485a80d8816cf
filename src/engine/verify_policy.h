// Adaptive verification: how many drafts a choice's verify row carries this round. Each choice
// keeps a decayed estimate of the share of its drafts the target accepts (alpha); the engine
// measures its own steps, so the policy knows what a draft token costs beside a decode row at the
// current batch: decode-only steps give the time of a step of n rows (a), verify steps the time
// of each extra token (b). Assuming each draft is accepted with probability alpha once the ones
// before it were, a round of k drafts commits E(k) = (1 - alpha^(k+1)) / (1 - alpha) tokens and a
// row's share of the step costs a / n + b k, so the row drafts the k that maximises
// E(k) / (1 + beta k), beta = b n / a, and drafts nothing where no k beats ordinary decoding. A
// choice that stopped drafting tries one draft every few rounds, so a text that turns
// repetitive is noticed (and a batch's costs are measured again). Engine thread only.
#pragma once

#include <array>
#include <cstdint>

namespace flare::engine {

struct AcceptanceEstimate {
  double accepted = 0.0;  // decayed counts
  double drafted = 0.0;
  std::int32_t rounds_without_drafts = 0;
  void record(std::int32_t n_drafted, std::int32_t n_accepted);
  // The acceptance rate; an optimistic prior before any round (drafts are tried first).
  double rate() const;
};

class VerifyPolicy {
 public:
  // A decode step's time at `n_rows` rows of one token, and a verify step's with n_tokens in all.
  void record_step(std::int32_t n_rows, std::int32_t n_tokens, double ms);
  // Drafts for a row of a batch of about n_rows rows, at most k_max; 0: decode ordinarily.
  std::int32_t draft_count(AcceptanceEstimate& acceptance, std::int32_t k_max, std::int32_t n_rows) const;
  // beta = (cost of a draft token) / (a row's share of a decode step) at n_rows rows.
  double relative_draft_cost(std::int32_t n_rows) const;

 private:
  static constexpr std::size_t kBuckets = 12;  // rows 1, 2, 3-4, 5-8, ... 1025+
  static std::size_t bucket(std::int32_t n_rows);
  std::array<double, kBuckets> decode_ms_{};      // EMA of decode-only step times; 0: none yet
  std::array<double, kBuckets> token_ms_{};       // EMA of the time of one extra verify token
};

}  // namespace flare::engine
