// Adaptive verification: the draft count follows measured acceptance and measured step costs,
// falls back to ordinary decoding where drafts do not pay, and retries now and then.
#include "engine/verify_policy.h"

#include <gtest/gtest.h>

namespace flare::engine {
namespace {

TEST(VerifyPolicy, AcceptedDraftsEarnLongRounds) {
  VerifyPolicy policy;
  AcceptanceEstimate acceptance;
  for (int i = 0; i < 30; ++i) acceptance.record(5, 5);
  EXPECT_GT(acceptance.rate(), 0.95);
  EXPECT_EQ(policy.draft_count(acceptance, 7, 1), 7);  // the prior cost of a draft token is small
}

TEST(VerifyPolicy, RejectedDraftsFallBackToOrdinaryDecodingAndRetry) {
  VerifyPolicy policy;
  AcceptanceEstimate acceptance;
  for (int i = 0; i < 30; ++i) acceptance.record(4, 0);
  EXPECT_LT(acceptance.rate(), 0.1);
  int n_tried = 0;
  for (int round = 0; round < 32; ++round) {
    policy.begin_step(4);
    n_tried += policy.draft_count(acceptance, 5, 4) > 0;
  }
  EXPECT_EQ(n_tried, 4);  // one draft every 8 steps while a verify step is assumed cheap
}

// Trial steps are shared by every row of the batch and spaced by what a verify step costs: where
// one verify row makes the step 5x a decode step (an eager mixed step and the draft model over the
// batch), trials come once in 200 steps, so useless drafts cost about 2%.
TEST(VerifyPolicy, TrialStepsAreRareWhereVerifyStepsAreDear) {
  VerifyPolicy policy;
  for (int i = 0; i < 10; ++i) {
    policy.record_step(16, 1, 0.3);
    policy.record_step(16, 2, 1.5);
  }
  EXPECT_EQ(policy.trial_interval(16), 200);
  EXPECT_EQ(policy.trial_interval(1), 8);  // nothing measured at batch 1: the floor
  std::vector<AcceptanceEstimate> rows(16);
  for (auto& a : rows) {
    for (int i = 0; i < 30; ++i) a.record(4, 0);
  }
  int n_trial_steps = 0, n_trial_rows = 0;
  for (int step = 0; step < 1000; ++step) {
    policy.begin_step(16);
    int drafting = 0;
    for (const auto& a : rows) drafting += policy.draft_count(a, 5, 16) > 0;
    EXPECT_TRUE(drafting == 0 || drafting == 16) << "rows try together, on one step";
    n_trial_steps += drafting > 0;
    n_trial_rows += drafting;
  }
  EXPECT_EQ(n_trial_steps, 5);
  EXPECT_EQ(n_trial_rows, 5 * 16);
}

TEST(VerifyPolicy, MeasuredCostsDecide) {
  AcceptanceEstimate acceptance;
  for (int i = 0; i < 30; ++i) acceptance.record(4, 3);  // 75%
  // Cheap draft tokens (a memory-bound GPU step): 10 ms for 8 rows, +0.1 ms a token.
  VerifyPolicy memory_bound;
  for (int i = 0; i < 10; ++i) {
    memory_bound.record_step(8, 1, 10.0);
    memory_bound.record_step(8, 5, 13.2);  // 5 tokens a row
  }
  EXPECT_NEAR(memory_bound.relative_cost(8, 4), 1.32, 1e-6);
  EXPECT_GE(memory_bound.relative_cost(8, 6), 1.32 - 1e-9);  // unmeasured, no cheaper than a narrower one
  EXPECT_GE(memory_bound.draft_count(acceptance, 7, 8), 4);
  // Expensive ones (a compute-bound step): a draft token costs as much as a decode row.
  VerifyPolicy compute_bound;
  for (int i = 0; i < 10; ++i) {
    for (int w = 1; w <= 8; ++w) compute_bound.record_step(8, w, 8.0 * w);
  }
  EXPECT_NEAR(compute_bound.relative_cost(8, 4), 5.0, 1e-6);
  EXPECT_EQ(compute_bound.draft_count(acceptance, 7, 8), 0);
  // A fixed verify overhead (decode steps replayed as graphs, verify steps eager): only long
  // accepted runs pay.
  VerifyPolicy eager_verify;
  for (int i = 0; i < 10; ++i) {
    eager_verify.record_step(1, 1, 0.17);
    for (int w = 2; w <= 6; ++w) eager_verify.record_step(1, w, 0.5 + 0.01 * w);
  }
  EXPECT_EQ(eager_verify.draft_count(acceptance, 5, 1), 0);  // 75%: at most 3.3 tokens for 3x the cost
  AcceptanceEstimate repetitive;
  for (int i = 0; i < 30; ++i) repetitive.record(5, 5);
  EXPECT_EQ(eager_verify.draft_count(repetitive, 5, 1), 5);
  // Other batch sizes keep their own costs (and the prior until measured).
  EXPECT_NEAR(compute_bound.relative_cost(64, 2), 1.1, 1e-9);
}

TEST(VerifyPolicy, IgnoresMeaninglessSamples) {
  VerifyPolicy policy;
  policy.record_step(0, 0, 1.0);
  policy.record_step(4, 2, 1.0);
  policy.record_step(4, 4, -1.0);
  EXPECT_NEAR(policy.relative_cost(4, 2), 1.1, 1e-9);
  policy.record_step(4, 12, 3.0);  // a verify step before any decode step of that batch
  EXPECT_NEAR(policy.relative_cost(4, 2), 1.1, 1e-9);
}

}  // namespace
}  // namespace flare::engine
