#include "common/capacity.h"

#include <gtest/gtest.h>

#include "common/sizes.h"

namespace flare {
namespace {

std::uint64_t gib(double value) { return static_cast<std::uint64_t>(value * kGiB); }

TEST(CapacityError, MatchesTheSpecExample) {
  CapacityShortfall shortfall;
  shortfall.needed = {{gib(68.3), "weights", ""},
                      {gib(7.0), "graphs", ""},
                      {gib(5.2), "live state", ""},
                      {gib(0.9), "prefix cache", ""},
                      {gib(0.8), "minimum pages", "4 \u00d7 8,192 tokens"}};
  shortfall.available = {gib(95.6), "free", ""};
  shortfall.deductions = {{gib(1.0), "headroom", ""}, {gib(21.0), "reserve", ""}};
  shortfall.options = {"[memory] reserve = \"12G\""};
  const std::string expected =
      "needs 68.3 GiB weights + 7.0 GiB graphs + 5.2 GiB live state + 0.9 GiB prefix cache\n"
      "       + 0.8 GiB minimum pages (4 \u00d7 8,192 tokens) = 82.2 GiB;\n"
      "       has 95.6 GiB free \u2212 1.0 GiB headroom \u2212 21.0 GiB reserve = 73.6 GiB.\n"
      "       Options: [memory] reserve = \"12G\".";
  EXPECT_EQ(format_capacity_shortfall(shortfall), expected);
}

TEST(CapacityError, SeveralOptionsAndNoDeductions) {
  CapacityShortfall shortfall;
  shortfall.needed = {{gib(10), "weights", ""}};
  shortfall.available = {gib(8), "free", ""};
  shortfall.options = {"--max-concurrency 2", "--gpus 0-1"};
  EXPECT_EQ(format_capacity_shortfall(shortfall),
            "needs 10.0 GiB weights;\n"
            "       has 8.0 GiB free.\n"
            "       Options: --max-concurrency 2; --gpus 0-1.");
}

TEST(CapacityError, ThrowsWithCapacityExitCode) {
  CapacityShortfall shortfall;
  shortfall.needed = {{gib(2), "weights", ""}};
  shortfall.available = {gib(1), "free", ""};
  try {
    fail_capacity(shortfall);
  } catch (const Error& error) {
    EXPECT_EQ(error.exit_status(), 4);
    return;
  }
  FAIL();
}

TEST(CapacityError, GpuSelectionForm) {
  EXPECT_EQ(format_gpu_shortfall(2, 95 * kGiB, 1, "--gpus 0-1"), "needs 2 GPUs with 95.0 GiB; 1 selected; use --gpus 0-1");
}

TEST(CapacityError, LongRequirementsWrapEveryLineUnderTheLimit) {
  CapacityShortfall shortfall;
  for (int i = 0; i < 12; ++i) shortfall.needed.push_back({gib(1.5 * i), "term number " + std::to_string(i), ""});
  shortfall.available = {gib(3), "free", ""};
  const std::string text = "error: " + format_capacity_shortfall(shortfall);
  std::size_t start = 0;
  while (start < text.size()) {
    std::size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    EXPECT_LE(end - start, static_cast<std::size_t>(kCapacityWrapColumns));
    start = end + 1;
  }
}

}  // namespace
}  // namespace flare
