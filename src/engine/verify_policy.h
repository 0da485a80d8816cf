// Adaptive verification: how many drafts a choice's verify row carries this round. Each choice
// keeps a decayed estimate of the share of its drafts the target accepts (alpha); the engine
// measures its own steps, so the policy knows what a step with verify rows costs against a decode
// step at the current batch (per batch-size bucket, keyed by the step's widest row: one verify row
// among decode rows changes the step's cost by more than its tokens say, since the step may lose
// its graph and the draft model runs for the whole batch). Assuming each draft is accepted with
// probability alpha once the ones before it were, a round of k drafts commits
// E(k) = (1 - alpha^(k+1)) / (1 - alpha) tokens, so the row drafts the k that maximises
// E(k) / cost(k), and nothing where no k beats ordinary decoding. A width not measured yet is
// assumed cheap (1 + 0.05 k, but no cheaper than a narrower measured one), so it gets tried and
// measured. Choices that stopped drafting try one draft together on trial steps, spaced so that
// their extra cost stays within about 2% of the decode steps between them (every 8th step where
// a verify step costs little over a decode step, far fewer where it costs several): a text that
// turns repetitive is still noticed, and useless drafts cannot slow a large batch down. Engine
// thread only.
#pragma once

#include <array>
#include <cstdint>

namespace flare::engine {

struct AcceptanceEstimate {
  double accepted = 0.0;  // decayed counts
  double drafted = 0.0;
  void record(std::int32_t n_drafted, std::int32_t n_accepted);
  // The acceptance rate; an optimistic prior before any round (drafts are tried first).
  double rate() const;
};

class VerifyPolicy {
 public:
  // A step's time at `n_rows` rows whose widest computes widest_row_tokens tokens (1: a decode
  // step; more: a step with verify rows of up to widest_row_tokens - 1 drafts).
  void record_step(std::int32_t n_rows, std::int32_t widest_row_tokens, double ms);
  // Once per scheduled step, before its rows' draft counts: whether this is a trial step.
  void begin_step(std::int32_t n_rows);
  // Drafts for a row of a batch of about n_rows rows, at most k_max; 0: decode ordinarily.
  std::int32_t draft_count(const AcceptanceEstimate& acceptance, std::int32_t k_max, std::int32_t n_rows) const;
  // The time of a step whose widest row carries k drafts, over a decode step's, at n_rows rows.
  double relative_cost(std::int32_t n_rows, std::int32_t k) const;
  // Decode steps between trial steps at n_rows rows (see above).
  std::int32_t trial_interval(std::int32_t n_rows) const;

 private:
  static constexpr std::size_t kBuckets = 12;  // rows 1, 2, 3-4, 5-8, ... 1025+
  static constexpr std::size_t kWidths = 17;   // tokens per row 1..16
  static std::size_t bucket(std::int32_t n_rows);
  // EMA of step times by bucket and widest row's tokens (index 1: decode steps); 0: none yet.
  std::array<std::array<double, kWidths>, kBuckets> step_ms_{};
  std::int64_t n_steps_ = 0;        // begin_step calls
  std::int64_t last_trial_ = 0;     // the step of the last trial
  bool trial_step_ = false;
};

}  // namespace flare::engine
