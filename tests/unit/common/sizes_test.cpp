#include "common/sizes.h"

#include <gtest/gtest.h>

#include "common/error.h"

namespace flare {
namespace {

void expect_usage_error(auto&& call) {
  try {
    call();
    ADD_FAILURE() << "expected a usage error";
  } catch (const Error& error) {
    EXPECT_EQ(error.code(), ExitCode::usage) << error.what();
  }
}

TEST(MemoryLimit, OccupiedSizes) {
  EXPECT_EQ(parse_memory_limit("30G").bytes, 30 * kGiB);
  EXPECT_EQ(parse_memory_limit("30g").kind, MemoryLimit::Kind::occupied_bytes);
  EXPECT_EQ(parse_memory_limit("30GB").bytes, 30 * kGiB);
  EXPECT_EQ(parse_memory_limit("30GiB").bytes, 30 * kGiB);
  EXPECT_EQ(parse_memory_limit("512m").bytes, 512 * kMiB);
  EXPECT_EQ(parse_memory_limit("1.5G").bytes, 3 * kGiB / 2);
  EXPECT_EQ(parse_memory_limit("2T").bytes, 2 * kTiB);
}

TEST(MemoryLimit, Reserves) {
  const auto reserve = parse_memory_limit("-30G");
  EXPECT_EQ(reserve.kind, MemoryLimit::Kind::reserve_bytes);
  EXPECT_EQ(reserve.bytes, 30 * kGiB);
  const auto zero = parse_memory_limit("-0G");
  EXPECT_EQ(zero.kind, MemoryLimit::Kind::reserve_bytes);
  EXPECT_EQ(zero.bytes, 0u);
}

TEST(MemoryLimit, Fractions) {
  const auto limit = parse_memory_limit("0.8");
  EXPECT_EQ(limit.kind, MemoryLimit::Kind::fraction_of_total);
  EXPECT_DOUBLE_EQ(limit.fraction, 0.8);
  EXPECT_DOUBLE_EQ(parse_memory_limit("1").fraction, 1.0);
  EXPECT_DOUBLE_EQ(parse_memory_limit(".5").fraction, 0.5);
}

TEST(MemoryLimit, RejectsHostileValues) {
  for (const char* bad : {"", "0", "0.0", "-0.5", "-1", "1.01", "2", "30", "0G", "1e999", "1e3G", "inf", "nan",
                          "-inf", "G", "-G", "30X", "30 G", " 30G", "30G ", "--30G", "1..5G", "99999999999999999999T",
                          "18446744073709551616G", "0x10G", "+30G"}) {
    SCOPED_TRACE(bad);
    expect_usage_error([&] { parse_memory_limit(bad); });
  }
  expect_usage_error([] { parse_memory_limit(std::string(100, '9') + "G"); });
}

TEST(ByteSize, AcceptsUnitsAndBareZero) {
  EXPECT_EQ(parse_byte_size("1G"), kGiB);
  EXPECT_EQ(parse_byte_size("2GiB"), 2 * kGiB);
  EXPECT_EQ(parse_byte_size("4gib"), 4 * kGiB);
  EXPECT_EQ(parse_byte_size("0"), 0u);
  EXPECT_EQ(parse_byte_size("0G"), 0u);
  EXPECT_EQ(parse_byte_size("64K"), 64 * kKiB);
  EXPECT_EQ(parse_byte_size("100B"), 100u);
}

TEST(ByteSize, RejectsHostileValues) {
  for (const char* bad : {"", "1", "12", "-1G", "1e999", "G", "1Q", "1.2.3G", "nan", "1 G"}) {
    SCOPED_TRACE(bad);
    expect_usage_error([&] { parse_byte_size(bad); });
  }
  expect_usage_error([] { parse_byte_size("0", ByteSizeRules{.allow_bare_zero = false}); });
}

TEST(GpuList, Forms) {
  EXPECT_EQ(parse_gpu_list("0"), (std::vector<int>{0}));
  EXPECT_EQ(parse_gpu_list("0,1"), (std::vector<int>{0, 1}));
  EXPECT_EQ(parse_gpu_list("0-3"), (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(parse_gpu_list("2,0"), (std::vector<int>{2, 0}));
  EXPECT_EQ(parse_gpu_list("0,2-3"), (std::vector<int>{0, 2, 3}));
  EXPECT_EQ(parse_gpu_list("5-5"), (std::vector<int>{5}));
}

TEST(GpuList, RejectsHostileValues) {
  for (const char* bad : {"", "3-1", "-1", "0,", ",0", "0,,1", "a", "0-", "-", "1-2-3", "0,0", "0-2,1", " 0",
                          "0 ", "1.5", "99999", "0-99999"}) {
    SCOPED_TRACE(bad);
    expect_usage_error([&] { parse_gpu_list(bad); });
  }
  expect_usage_error([] { parse_gpu_list(std::string(5000, '1')); });
}

TEST(Format, BytesAndCounts) {
  EXPECT_EQ(format_bytes(static_cast<std::uint64_t>(73.6 * kGiB)), "73.6 GiB");
  EXPECT_EQ(format_bytes(512 * kMiB), "512 MiB");
  EXPECT_EQ(format_bytes(12), "12 B");
  EXPECT_EQ(format_count(8192), "8,192");
  EXPECT_EQ(format_count(1234567), "1,234,567");
  EXPECT_EQ(format_count(999), "999");
  EXPECT_EQ(format_size_option(11 * kGiB + 1), "12G");
}

}  // namespace
}  // namespace flare
