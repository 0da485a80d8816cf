#include "ignition/memory_plan.h"

#include <gtest/gtest.h>

#include "common/error.h"
#include "common/sizes.h"

namespace flare::ignition {
namespace {

MemoryDemand demand() {
  MemoryDemand d;
  d.weight_bytes = 16 * kGiB;
  d.scratch_bytes = 2 * kGiB;
  d.kv_bytes_per_token = 128 * kKiB;  // 1 GiB per 8,192 tokens
  d.max_concurrency = 8;
  d.min_tokens_per_request = 8192;
  return d;
}

std::string capacity_error(const MemoryDemand& d, const MemorySupply& s) {
  try {
    plan_memory(d, s);
  } catch (const Error& error) {
    EXPECT_EQ(error.code(), ExitCode::capacity);
    return error.what();
  }
  ADD_FAILURE() << "expected a capacity error";
  return "";
}

TEST(MemoryPlan, FitsAndSizesThePages) {
  const MemoryPlan plan = plan_memory(demand(), {40 * kGiB, kGiB, 0, "GPU 0"});
  EXPECT_EQ(plan.needed_bytes, 26 * kGiB);
  EXPECT_EQ(plan.available_bytes, 39 * kGiB);
  EXPECT_EQ(plan.kv_budget_bytes, 21 * kGiB);
  EXPECT_EQ(plan.kv_tokens, 21 * 8192);
}

TEST(MemoryPlan, EveryOfferedOptionFitsOnItsOwn) {
  // 30 GiB free, 1 GiB headroom, 6 GiB reserve: 23 GiB available for a 26 GiB need.
  const std::string message = capacity_error(demand(), {30 * kGiB, kGiB, 6 * kGiB, "GPU 0"});
  EXPECT_NE(message.find("needs 16.0 GiB weights + 2.0 GiB scratch + 8.0 GiB minimum pages (8 \u00d7 8,192 tokens)"),
            std::string::npos) << message;
  EXPECT_NE(message.find("has 30.0 GiB free \u2212 1.0 GiB headroom \u2212 6.0 GiB reserve = 23.0 GiB."), std::string::npos)
      << message;
  // The largest reserve that fits is 30 - 1 - 26 = 3 GiB; concurrency 5 fits 18 + 5 GiB.
  EXPECT_NE(message.find("Options: [memory] reserve = \"3G\"; --max-concurrency 5."), std::string::npos) << message;
  EXPECT_NO_THROW(plan_memory(demand(), {30 * kGiB, kGiB, 3 * kGiB, "GPU 0"}));
  MemoryDemand fewer = demand();
  fewer.max_concurrency = 5;
  EXPECT_NO_THROW(plan_memory(fewer, {30 * kGiB, kGiB, 6 * kGiB, "GPU 0"}));
}

TEST(MemoryPlan, NothingFitsSaysSo) {
  const std::string message = capacity_error(demand(), {10 * kGiB, kGiB, 0, "GPU 0"});
  EXPECT_NE(message.find("Options: a device with more free memory."), std::string::npos) << message;
}

}  // namespace
}  // namespace flare::ignition
