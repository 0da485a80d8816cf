// flare run's speculation settings: the step costs a package measured at export reach the engine,
// and hostile measured steps (zero rows, NaN or negative times) are dropped, not trusted.
#include "flare/run_speculation.h"

#include <cmath>
#include <limits>

#include <gtest/gtest.h>

namespace flare::cli {
namespace {

proto::Manifest speculative_manifest() {
  proto::Manifest m;
  proto::Speculation* s = m.mutable_speculation();
  s->set_max_draft_tokens(5);
  s->set_adaptive_verification(true);
  s->set_token_capacity(64);
  return m;
}

void add_step(proto::Manifest& m, std::uint32_t rows, std::uint32_t tokens, double ms) {
  proto::MeasuredStep* step = m.mutable_speculation()->add_measured_steps();
  step->set_rows(rows);
  step->set_tokens_per_row(tokens);
  step->set_milliseconds(ms);
}

TEST(RunSpeculation, MeasuredStepCostsReachTheEngine) {
  proto::Manifest m = speculative_manifest();
  m.mutable_speculation()->set_steps_measured_on("NVIDIA H200");
  add_step(m, 1, 1, 4.0);
  add_step(m, 1, 8, 4.9);
  add_step(m, 0, 2, 1.0);                                         // no rows
  add_step(m, 2, 0, 1.0);                                         // no tokens
  add_step(m, 2, 2, std::numeric_limits<double>::quiet_NaN());    // not a time
  add_step(m, 2, 3, -1.0);
  add_step(m, 4'000'000'000u, 4'000'000'000u, 1.0);                // clamped, not overflowed
  SpeculationFlags flags;
  flags.history_drafts = true;
  const RunSpeculation run = run_speculation(m, flags);
  ASSERT_EQ(run.measured_steps.size(), 3u);
  EXPECT_EQ(run.measured_steps[0].rows, 1);
  EXPECT_EQ(run.measured_steps[1].tokens_per_row, 8);
  EXPECT_DOUBLE_EQ(run.measured_steps[1].milliseconds, 4.9);
  EXPECT_GT(run.measured_steps[2].rows, 0);
  EXPECT_GT(run.measured_steps[2].tokens_per_row, 0);
  EXPECT_NE(run.summary.find("adaptive verification from step costs measured at export on NVIDIA H200)"), std::string::npos) << run.summary;

  engine::EngineOptions options;
  apply_speculation(run, options);
  ASSERT_EQ(options.measured_step_costs.size(), 3u);
  EXPECT_DOUBLE_EQ(options.measured_step_costs[0].milliseconds, 4.0);
}

TEST(RunSpeculation, WithoutMeasuredStepsTheSummarySaysAdaptiveOnly) {
  SpeculationFlags flags;
  flags.history_drafts = true;
  const RunSpeculation run = run_speculation(speculative_manifest(), flags);
  EXPECT_TRUE(run.measured_steps.empty());
  EXPECT_NE(run.summary.find("adaptive verification"), std::string::npos) << run.summary;
  flags.adaptive_verification = false;
  EXPECT_NE(run_speculation(speculative_manifest(), flags).summary.find("fixed verification"), std::string::npos);
}

}  // namespace
}  // namespace flare::cli
