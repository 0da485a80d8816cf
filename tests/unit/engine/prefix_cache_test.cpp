// Prefix cache: chained hashes, longest-prefix lookup, supersession, LRU bound and eviction.
#include "engine/prefix_cache.h"

#include <gtest/gtest.h>

namespace flare::engine {
namespace {

std::vector<std::int32_t> tokens(std::int32_t n, std::int32_t salt = 0) {
  std::vector<std::int32_t> out;
  for (std::int32_t i = 0; i < n; ++i) out.push_back(i * 13 + salt);
  return out;
}

helios::HistoryPages filled(helios::HistoryPools& pools, std::int32_t page, std::int32_t n) {
  helios::HistoryPages seq(pools, page);
  std::vector<helios::PageCopy> copies;
  EXPECT_EQ(seq.append(n, copies), -1);
  return seq;
}

TEST(PrefixHashes, ChainedOverWholeBlocks) {
  auto a = tokens(10);
  auto h = prefix_block_hashes(a, 4);
  ASSERT_EQ(h.size(), 2u);
  auto b = a;
  b[1] = 999;  // a change in block 0 changes every later hash
  auto hb = prefix_block_hashes(b, 4);
  EXPECT_NE(h[0], hb[0]);
  EXPECT_NE(h[1], hb[1]);
  auto c = a;
  c[9] = 999;  // outside whole blocks: no change
  EXPECT_EQ(prefix_block_hashes(c, 4), h);
  EXPECT_TRUE(prefix_block_hashes(a, 0).empty());
  EXPECT_TRUE(prefix_block_hashes(std::vector<std::int32_t>{}, 4).empty());
}

TEST(PrefixCache, LookupReturnsLongestWholePagePrefix) {
  helios::HistoryPools pools({{32, 0}});
  helios::PagePool& pool = pools.pool(0);
  PrefixCache cache(pools, 4, 8);
  const auto t = tokens(14);
  {
    auto seq = filled(pools, 4, 14);
    cache.insert(t, seq);
    EXPECT_EQ(cache.n_entries(), 1);
    auto hit = cache.lookup(t, 100);
    EXPECT_EQ(hit.n_tokens(), 12);
    EXPECT_EQ(std::vector<std::int32_t>(hit.pages().begin(), hit.pages().end()),
              std::vector<std::int32_t>(seq.pages().begin(), seq.pages().begin() + 3));
  }
  // The sequence is gone; the cache holds its three whole pages.
  EXPECT_EQ(pool.n_used(), 3);
  EXPECT_EQ(cache.n_pages_exclusive(), 3);
  EXPECT_EQ(cache.lookup(t, 11).n_tokens(), 8);  // bounded by max_tokens
  auto diverging = t;
  diverging[5] = -7;
  EXPECT_EQ(cache.lookup(diverging, 100).n_tokens(), 4);
  EXPECT_EQ(cache.lookup(tokens(14, 1), 100).n_tokens(), 0);
  EXPECT_EQ(cache.lookup(t, 0).n_tokens(), 0);
  cache.clear();
  EXPECT_EQ(pool.n_used(), 0);
}

TEST(PrefixCache, LongerCheckpointSupersedesItsPrefix) {
  helios::HistoryPools pools({{32, 0}});
  helios::PagePool& pool = pools.pool(0);
  PrefixCache cache(pools, 4, 8);
  const auto t = tokens(20);
  auto short_seq = filled(pools, 4, 8);
  cache.insert(std::span(t).first(8), short_seq);
  auto long_seq = filled(pools, 4, 20);
  cache.insert(t, long_seq);
  EXPECT_EQ(cache.n_entries(), 1);
  cache.insert(std::span(t).first(8), short_seq);  // already covered: refreshed only
  EXPECT_EQ(cache.n_entries(), 1);
  EXPECT_EQ(cache.lookup(t, 100).n_tokens(), 20);
}

TEST(PrefixCache, BoundedLeastRecentlyUsed) {
  helios::HistoryPools pools({{64, 0}});
  helios::PagePool& pool = pools.pool(0);
  PrefixCache cache(pools, 4, 2);
  for (int salt = 0; salt < 3; ++salt) {
    auto seq = filled(pools, 4, 8);
    cache.insert(tokens(8, salt), seq);
    if (salt == 1) {
      EXPECT_EQ(cache.lookup(tokens(8, 0), 8).n_tokens(), 8);  // 0 is now more recent than 1
    }
  }
  EXPECT_EQ(cache.n_entries(), 2);
  EXPECT_EQ(cache.lookup(tokens(8, 1), 8).n_tokens(), 0);
  EXPECT_EQ(cache.lookup(tokens(8, 0), 8).n_tokens(), 8);
  EXPECT_EQ(cache.lookup(tokens(8, 2), 8).n_tokens(), 8);
  PrefixCache off(pools, 4, 0);
  auto seq = filled(pools, 4, 8);
  off.insert(tokens(8, 5), seq);
  EXPECT_EQ(off.n_entries(), 0);
}

TEST(PrefixCache, EvictionPrefersCheckpointsThatFreePages) {
  helios::HistoryPools pools({{8, 0}});
  helios::PagePool& pool = pools.pool(0);
  PrefixCache cache(pools, 4, 8);
  auto pinned = filled(pools, 4, 8);  // stays alive: its checkpoint frees nothing
  cache.insert(tokens(8, 0), pinned);
  {
    auto seq = filled(pools, 4, 8);
    cache.insert(tokens(8, 1), seq);
  }
  EXPECT_EQ(pool.n_free(), 4);
  EXPECT_TRUE(cache.evict_until_free(6));
  EXPECT_EQ(pool.n_free(), 6);
  EXPECT_EQ(cache.lookup(tokens(8, 0), 8).n_tokens(), 8);  // the pinned one survived
  EXPECT_FALSE(cache.evict_until_free(8));  // live sequences hold the rest
  EXPECT_EQ(cache.n_entries(), 1);          // and the cache keeps what it cannot free
}

TEST(PrefixCache, ZeroTokenAndShortInsertsAreIgnored) {
  helios::HistoryPools pools({{8, 0}});
  helios::PagePool& pool = pools.pool(0);
  PrefixCache cache(pools, 4, 8);
  auto seq = filled(pools, 4, 3);
  cache.insert(tokens(3), seq);
  EXPECT_EQ(cache.n_entries(), 0);
  auto longer = filled(pools, 4, 8);
  cache.insert(tokens(2), longer);  // fewer tokens than pages cover: nothing whole
  EXPECT_EQ(cache.n_entries(), 0);
}

TEST(PrefixCache, WithASlidingWindowACheckpointHitsOnlyWhereItsWindowIsHeld) {
  // Pages of 4 tokens; group 1 reads the last 6 positions.
  helios::HistoryPools pools({{32, 0}, {32, 6}});
  PrefixCache cache(pools, 4, 8);
  const auto t = tokens(24);
  {
    auto prompt = filled(pools, 4, 12);
    cache.insert(std::span(t).first(12), prompt);  // every page held: a checkpoint at 12
    auto answer = filled(pools, 4, 24);
    answer.release_behind(24);  // reads 19..24: pages of 0..15 go back in group 1
    cache.insert(t, answer);    // a checkpoint at 24 that holds only its window
  }
  // Both stay: the longer one cannot stand in for the shorter (its window there is gone).
  EXPECT_EQ(cache.n_entries(), 2);
  auto at_end = cache.lookup(t, 100);
  EXPECT_EQ(at_end.n_tokens(), 24);
  EXPECT_TRUE(at_end.holds_window_at(24));
  // A cut at 20 would read 15..20 of the long checkpoint, given back: the prompt's checkpoint
  // serves 12 instead.
  auto cut = cache.lookup(t, 20);
  EXPECT_EQ(cut.n_tokens(), 12);
  EXPECT_TRUE(cut.holds_window_at(12));
  at_end.free();
  cut.free();
  // A sequence that gave back the window of its own cut is no checkpoint at all.
  auto late = filled(pools, 4, 20);
  late.release_behind(30);
  cache.insert(tokens(20, 3), late);
  EXPECT_EQ(cache.n_entries(), 2);
  late.free();
  cache.clear();
  EXPECT_EQ(pools.pool(0).n_used(), 0);
  EXPECT_EQ(pools.pool(1).n_used(), 0);
}

}  // namespace
}  // namespace flare::engine
