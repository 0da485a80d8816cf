// A page pool whose pages are backed on demand: it hands out backed pages only, asks its grow hook
// when none is free, and treats a hook that comes back short (the device ran out of memory) as a
// full pool -- allocate() -1, append() false with nothing changed -- without asking again until the
// retry interval has passed.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <vector>

#include "common/error.h"
#include "helios/page_pool.h"

namespace flare::helios {
namespace {

// Backs pages in chunks of `chunk` up to `limit` (the device's memory), counting its calls.
struct FakeDevice {
  std::int32_t backed = 0;
  std::int32_t chunk = 4;
  std::int32_t limit = 1 << 30;
  std::int32_t n_calls = 0;
  std::vector<std::int32_t> asked;

  PagePool::GrowHook hook() {
    return [this](std::int32_t wanted) {
      ++n_calls;
      asked.push_back(wanted);
      const std::int32_t rounded = (wanted + chunk - 1) / chunk * chunk;
      backed = std::max(backed, std::min(rounded, limit));
      return backed;
    };
  }
};

// A clock the test moves by hand.
struct FakeClock {
  std::chrono::steady_clock::time_point now{};
  PagePool::Clock clock() {
    return [this] { return now; };
  }
};

TEST(PagePoolGrowth, GrowsWhenTheBackedPagesRunOut) {
  PagePool pool(16);
  FakeDevice device{.backed = 4};
  pool.set_backing(4, device.hook());
  EXPECT_EQ(pool.n_backed(), 4);
  EXPECT_EQ(pool.n_free(), 4);
  EXPECT_EQ(pool.n_available(), 16);
  std::vector<std::int32_t> pages;
  for (int i = 0; i < 4; ++i) pages.push_back(pool.allocate());
  EXPECT_EQ(device.n_calls, 0);  // the backed pages first
  pages.push_back(pool.allocate());
  EXPECT_EQ(device.n_calls, 1);
  EXPECT_EQ(device.asked.back(), 5);
  EXPECT_EQ(pool.n_backed(), 8);
  while (pages.size() < 16) pages.push_back(pool.allocate());
  EXPECT_EQ(pool.allocate(), -1);  // the whole reservation is out
  EXPECT_EQ(pool.n_backed(), 16);
  EXPECT_EQ(device.n_calls, 3);
  std::sort(pages.begin(), pages.end());
  for (std::int32_t i = 0; i < 16; ++i) EXPECT_EQ(pages[std::size_t(i)], i);  // lowest indices, each once
  for (auto page : pages) pool.release(page);
  EXPECT_EQ(pool.n_used(), 0);
  EXPECT_EQ(pool.n_free(), 16);
}

TEST(PagePoolGrowth, NeverHandsOutAPageBeyondTheBackedRange) {
  PagePool pool(64);
  FakeDevice device{.backed = 3, .chunk = 5};
  pool.set_backing(3, device.hook());
  SequencePages a(pool, 4), b(pool, 4);
  std::vector<PageCopy> copies;
  for (int step = 0; step < 40; ++step) {
    ASSERT_TRUE((step % 2 ? a : b).append(3, copies));
    for (const auto* seq : {&a, &b}) {
      for (auto page : seq->pages()) ASSERT_LT(page, pool.n_backed());
    }
    ASSERT_LE(pool.n_backed(), device.backed);
  }
}

TEST(PagePoolGrowth, PartialGrowthFillsThenReportsFull) {
  PagePool pool(16);
  FakeDevice device{.backed = 4, .chunk = 4, .limit = 6};
  pool.set_backing(4, device.hook());
  std::vector<std::int32_t> pages;
  for (std::int32_t page = pool.allocate(); page >= 0; page = pool.allocate()) pages.push_back(page);
  EXPECT_EQ(pages.size(), 6u);  // 4, then 2 of the chunk of 4 asked for
  for (auto page : pages) EXPECT_LT(page, 6);
  EXPECT_FALSE(pool.can_grow());
  EXPECT_EQ(pool.n_available(), 0);
  const std::int32_t calls = device.n_calls;
  EXPECT_EQ(pool.allocate(), -1);
  EXPECT_EQ(device.n_calls, calls);  // refused just now: not asked again
  pool.release(pages.back());
  EXPECT_EQ(pool.allocate(), pages.back());  // freed pages come back as before
}

TEST(PagePoolGrowth, RefusedGrowthIsAskedAgainAfterTheRetryInterval) {
  PagePool pool(16);
  FakeDevice device{.backed = 4, .chunk = 4, .limit = 4};
  FakeClock clock;
  pool.set_backing(4, device.hook());
  pool.set_growth_retry(std::chrono::milliseconds(500), clock.clock());
  std::vector<std::int32_t> pages;
  for (std::int32_t page = pool.allocate(); page >= 0; page = pool.allocate()) pages.push_back(page);
  EXPECT_EQ(pages.size(), 4u);
  EXPECT_EQ(device.n_calls, 1);
  EXPECT_FALSE(pool.can_grow());

  clock.now += std::chrono::milliseconds(499);
  EXPECT_EQ(pool.allocate(), -1);
  EXPECT_EQ(device.n_calls, 1);  // within the interval: not asked
  EXPECT_EQ(pool.n_available(), 0);

  clock.now += std::chrono::milliseconds(1);
  EXPECT_TRUE(pool.can_grow());
  EXPECT_EQ(pool.n_available(), 12);  // the rest of the reservation counts again
  EXPECT_EQ(pool.allocate(), -1);     // asked, still no memory: refused again, from now
  EXPECT_EQ(device.n_calls, 2);
  EXPECT_FALSE(pool.can_grow());

  device.limit = 16;  // another process gave memory back
  clock.now += std::chrono::milliseconds(500);
  const std::int32_t page = pool.allocate();
  EXPECT_GE(page, 4);
  EXPECT_EQ(device.n_calls, 3);
  EXPECT_EQ(pool.n_backed(), 8);
  while (pool.allocate() >= 0) {
  }
  EXPECT_EQ(pool.n_backed(), 16);  // a granted ask clears the refusal: growth goes on without waiting
  EXPECT_EQ(device.n_calls, 5);
}

TEST(PagePoolGrowth, RetryNeedsAClock) {
  PagePool pool(4);
  EXPECT_THROW(pool.set_growth_retry(std::chrono::milliseconds(10), nullptr), Error);
  EXPECT_THROW(pool.set_growth_retry(std::chrono::milliseconds(-1), [] { return std::chrono::steady_clock::now(); }),
               Error);
}

TEST(PagePoolGrowth, RefusedGrowthLooksLikeAFullPool) {
  PagePool pool(32);
  FakeDevice device{.backed = 2, .limit = 2};
  pool.set_backing(2, device.hook());
  SequencePages seq(pool, 4);
  std::vector<PageCopy> copies;
  ASSERT_TRUE(seq.append(8, copies));  // the two backed pages
  EXPECT_FALSE(seq.append(1, copies));  // a third: the device has none
  EXPECT_EQ(seq.n_tokens(), 8);         // nothing changed
  EXPECT_EQ(seq.pages().size(), 2u);
  EXPECT_EQ(pool.allocate(), -1);
  EXPECT_EQ(pool.n_backed(), 2);
  EXPECT_EQ(pool.n_used() + pool.n_available(), 2);  // what stats report: the pool shrank to its memory
  seq.free();
  EXPECT_EQ(pool.n_free(), 2);
}

TEST(PagePoolGrowth, MakeFreeAsksForEverythingAtOnce) {
  PagePool pool(20);
  FakeDevice device{.backed = 0, .chunk = 1};
  pool.set_backing(0, device.hook());
  EXPECT_EQ(pool.allocate(), 0);
  EXPECT_TRUE(pool.make_free(7));
  EXPECT_EQ(device.asked.back(), 8);  // one page in use, seven free
  EXPECT_FALSE(pool.make_free(100));  // beyond the reservation: grows to all of it, still short
  EXPECT_EQ(pool.n_backed(), 20);
  EXPECT_EQ(pool.n_free(), 19);
}

TEST(PagePoolGrowth, BackingIsSetOnAnEmptyPoolOnly) {
  PagePool pool(8);
  const auto page = pool.allocate();
  EXPECT_THROW(pool.set_backing(2, nullptr), Error);
  pool.release(page);
  EXPECT_THROW(pool.set_backing(9, nullptr), Error);
  pool.set_backing(3, nullptr);  // no hook: three pages, never more
  for (int i = 0; i < 3; ++i) EXPECT_GE(pool.allocate(), 0);
  EXPECT_EQ(pool.allocate(), -1);
}

}  // namespace
}  // namespace flare::helios
