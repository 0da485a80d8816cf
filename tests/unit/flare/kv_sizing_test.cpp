// KV pool sizing for flare run: the default budgets of the CPU and a GPU, each --memory-limit
// form, the reserve precedence (flag, then [memory] reserve, then the package's serving reserve;
// never two together), the --kv-cache-limit ceilings, and the capacity error below the floor.
#include <gtest/gtest.h>

#include "common/error.h"
#include "common/sizes.h"
#include "flare/kv_sizing.h"

namespace flare::cli {
namespace {

constexpr std::uint64_t kTokenBytes = 128 * kKiB;  // Llama-3.1-8B, BF16 KV

KvMemory gpu(std::uint64_t free_gib, std::uint64_t held_gib, std::optional<std::uint64_t> package_reserve = {}) {
  return {true, free_gib * kGiB, 140 * kGiB, held_gib * kGiB, kGiB, package_reserve};
}

std::int64_t tokens_for_gib(std::uint64_t gib) { return std::int64_t(gib * kGiB / kTokenBytes); }

KvSizing size(const KvRequest& request, const KvMemory& memory, std::int64_t context = 131072,
              std::int64_t concurrency = 64) {
  return size_kv_cache(request, memory, 0, kTokenBytes, context, concurrency, 16);
}

TEST(KvSizing, GpuDefaultTakesTheFreeMemoryLessHeadroom) {
  const KvSizing s = size({}, gpu(100, 20));
  EXPECT_EQ(s.tokens, tokens_for_gib(99));
  EXPECT_NE(s.limited_by.find("free GPU memory"), std::string::npos) << s.limited_by;
}

TEST(KvSizing, ConfiguredReserveReplacesThePackageReserve) {
  EXPECT_EQ(size({}, gpu(100, 20, 10 * kGiB)).tokens, tokens_for_gib(89));
  KvRequest request;
  request.configured_reserve = 5 * kGiB;
  const KvSizing s = size(request, gpu(100, 20, 10 * kGiB));
  EXPECT_EQ(s.tokens, tokens_for_gib(94));
  EXPECT_NE(s.limited_by.find("[memory] reserve"), std::string::npos) << s.limited_by;
}

TEST(KvSizing, MemoryLimitFormsOnAGpu) {
  KvRequest request;
  request.configured_reserve = 50 * kGiB;  // replaced by any --memory-limit, never added to it
  request.memory_limit = "30G";            // occupied: weights count against it
  EXPECT_EQ(size(request, gpu(100, 20, 10 * kGiB), 131072, 1).tokens, tokens_for_gib(9));
  request.memory_limit = "-8G";            // leave 8 GiB free
  EXPECT_EQ(size(request, gpu(100, 20, 10 * kGiB), 131072, 1).tokens, tokens_for_gib(91));
  request.memory_limit = "0.5";            // half of the total, weights included
  EXPECT_EQ(size(request, gpu(100, 20), 131072, 1).tokens, tokens_for_gib(49));
  request.memory_limit = "0.95";           // more than is free: what is there
  EXPECT_EQ(size(request, gpu(100, 20), 131072, 1).tokens, tokens_for_gib(99));
}

TEST(KvSizing, KvCacheLimitBoundsThePool) {
  KvRequest request;
  request.kv_cache_limit = "context";
  KvSizing s = size(request, gpu(100, 20));
  EXPECT_EQ(s.tokens, 131072);
  EXPECT_EQ(s.limited_by, "--kv-cache-limit context");
  request.kv_cache_limit = "concurrency";
  s = size(request, gpu(100, 20), 4096, 8);
  EXPECT_EQ(s.tokens, 4096 * 8);
  EXPECT_EQ(s.n_pages, 4096 * 8 / 16);
}

TEST(KvSizing, CpuDefaultIsHalfOfAvailableLessTheModel) {
  const KvMemory host{false, 40 * kGiB, 64 * kGiB, 0, kGiB / 2, std::nullopt};
  const KvSizing s = size_kv_cache({}, host, 4 * kGiB, kTokenBytes, 4096, 2, 16);
  EXPECT_EQ(s.tokens, 4096 * 2);  // bounded by one context per slot
  EXPECT_EQ(s.limited_by, "one context per request slot");
}

TEST(KvSizing, AnOccupiedCapBelowTheModelIsACapacityError) {
  KvRequest request;
  request.memory_limit = "16G";
  try {
    size(request, gpu(100, 20));
    FAIL() << "a 16 GiB cap held a model of 20 GiB";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ExitCode::capacity);
    EXPECT_NE(std::string(e.what()).find("Options:"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace flare::cli
