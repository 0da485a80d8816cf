// Adaptive verification: how many drafts a choice's verify row carries this round. Each choice
// keeps a decayed estimate of the share of its drafts the target accepts (alpha); the engine
// measures its own steps, so the policy knows what a round of width 1 + k costs against a decode
// step at the current batch (per batch-size bucket: decode steps, and verify steps by their mean
// width; a verify step may cost more than its tokens say, e.g. where decode steps replay graphs
// and verify steps run eagerly). Assuming each draft is accepted with probability alpha once the
// ones before it were, a round of k drafts commits E(k) = (1 - alpha^(k+1)) / (1 - alpha) tokens,
// so the row drafts the k that maximises E(k) / cost(k), and nothing where no k beats ordinary
// decoding. A width not measured yet is assumed cheap (1 + 0.05 k, but no cheaper than a narrower
// measured one), so it gets tried and measured. A choice that stopped drafting tries one draft
// every few rounds, so a text that turns repetitive is noticed. Engine thread only.
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
  // The time of a step whose rows carry k drafts each, over a decode step's, at n_rows rows.
  double relative_cost(std::int32_t n_rows, std::int32_t k) const;

 private:
  static constexpr std::size_t kBuckets = 12;  // rows 1, 2, 3-4, 5-8, ... 1025+
  static constexpr std::size_t kWidths = 17;   // tokens per row 1..16
  static std::size_t bucket(std::int32_t n_rows);
  // EMA of step times by bucket and mean tokens per row (index 1: decode steps); 0: none yet.
  std::array<std::array<double, kWidths>, kBuckets> step_ms_{};
};

}  // namespace flare::engine
