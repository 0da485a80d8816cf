#include "common/host_memory.h"

#include <gtest/gtest.h>

namespace flare {
namespace {

TEST(HostMemory, ReadsMeminfoFields) {
  const std::uint64_t total = host_memory_bytes("MemTotal");
  const std::uint64_t available = host_memory_bytes("MemAvailable");
  ASSERT_GT(total, 0u);
  EXPECT_GT(available, 0u);
  EXPECT_LE(available, total);
  EXPECT_EQ(host_memory_bytes("NoSuchField"), 0u);
  EXPECT_EQ(host_memory_bytes("MemTot"), 0u);  // a prefix is not the field
}

}  // namespace
}  // namespace flare
