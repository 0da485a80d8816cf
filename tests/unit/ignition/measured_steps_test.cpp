// The step times ignition export measures: recorded in the manifest as measured, and summarised by
// the widest verify round at the fewest rows.
#include "ignition/measured_steps.h"

#include <gtest/gtest.h>

namespace flare::ignition {
namespace {

TEST(MeasuredSteps, RecordedInTheManifestsSpeculation) {
  proto::Manifest m;
  record_measured_steps(m, {}, "NVIDIA H200");
  EXPECT_EQ(m.speculation().measured_steps_size(), 0);  // nothing timed: nothing recorded
  EXPECT_TRUE(m.speculation().steps_measured_on().empty());
  const std::vector<MeasuredStepTime> times{{8, 1, 5.0}, {1, 1, 4.0}, {1, 2, 4.2}, {1, 8, 4.88}, {8, 8, 7.5}};
  record_measured_steps(m, times, "NVIDIA H200");
  ASSERT_EQ(m.speculation().measured_steps_size(), 5);
  EXPECT_EQ(m.speculation().measured_steps(3).rows(), 1u);
  EXPECT_EQ(m.speculation().measured_steps(3).tokens_per_row(), 8u);
  EXPECT_DOUBLE_EQ(m.speculation().measured_steps(3).milliseconds(), 4.88);
  EXPECT_EQ(m.speculation().steps_measured_on(), "NVIDIA H200");
  EXPECT_EQ(measured_steps_summary(times), "; a verify round of 1 row x 8 tokens costs 1.22x a decode step (4.000 ms)");
}

TEST(MeasuredSteps, NoSummaryWithoutADecodeAndAVerifyOfOneRowCount) {
  EXPECT_EQ(measured_steps_summary({}), "");
  const std::vector<MeasuredStepTime> decode_only{{1, 1, 4.0}, {2, 1, 4.1}};
  EXPECT_EQ(measured_steps_summary(decode_only), "");
  const std::vector<MeasuredStepTime> other_rows{{1, 1, 4.0}, {2, 4, 4.5}};
  EXPECT_EQ(measured_steps_summary(other_rows), "");
}

}  // namespace
}  // namespace flare::ignition
