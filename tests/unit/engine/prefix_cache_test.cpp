// Prefix cache: chained hashes, longest-prefix lookup, supersession, LRU bound and eviction, and
// snapshots of partial pages (hits at every offset of a page, copy-on-write, bound, eviction first).
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

// Without snapshot slots a checkpoint ends on a whole page; a lookup still hits at any token within
// those pages (the hit's last page is shared until it writes there).
TEST(PrefixCache, WithoutSnapshotsCheckpointsEndOnWholePages) {
  helios::HistoryPools pools({{32, 0}});
  helios::PagePool& pool = pools.pool(0);
  PrefixCache cache(pools, 4, 8, 0);
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
  EXPECT_EQ(cache.lookup(t, 11).n_tokens(), 11);  // bounded by max_tokens
  auto diverging = t;
  diverging[5] = -7;
  EXPECT_EQ(cache.lookup(diverging, 100).n_tokens(), 5);
  EXPECT_EQ(cache.n_snapshots(), 0);
  EXPECT_EQ(cache.lookup(tokens(14, 1), 100).n_tokens(), 0);
  EXPECT_EQ(cache.lookup(t, 0).n_tokens(), 0);
  cache.clear();
  EXPECT_EQ(pool.n_used(), 0);
}

TEST(PrefixCache, LongerCheckpointSupersedesItsPrefix) {
  helios::HistoryPools pools({{32, 0}});
  helios::PagePool& pool = pools.pool(0);
  PrefixCache cache(pools, 4, 8, 8);
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
  PrefixCache cache(pools, 4, 2, 2);
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
  PrefixCache off(pools, 4, 0, 0);
  auto seq = filled(pools, 4, 8);
  off.insert(tokens(8, 5), seq);
  EXPECT_EQ(off.n_entries(), 0);
}

TEST(PrefixCache, EvictionPrefersCheckpointsThatFreePages) {
  helios::HistoryPools pools({{8, 0}});
  helios::PagePool& pool = pools.pool(0);
  PrefixCache cache(pools, 4, 8, 8);
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
  PrefixCache cache(pools, 4, 8, 8);
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
  PrefixCache cache(pools, 4, 8, 8);
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

// A checkpoint of n tokens ending anywhere in a page, and lookups cut anywhere within it: the hit
// holds exactly the tokens asked for, its last page is the checkpoint's (shared) until the hit
// writes into it, and then the hit copies it (copy-on-write) while the checkpoint keeps its own.
TEST(PrefixCache, HitsAtEveryOffsetWithinAPage) {
  const std::int32_t page = 4;
  for (std::int32_t n = page; n <= 3 * page; ++n) {
    helios::HistoryPools pools({{32, 0}});
    helios::PagePool& pool = pools.pool(0);
    PrefixCache cache(pools, page, 8, 8);
    const auto t = tokens(3 * page + 2);
    {
      auto seq = filled(pools, page, n);
      cache.insert(t, seq);  // more tokens than the sequence computed: cut at n
    }
    ASSERT_EQ(cache.n_entries(), 1) << n;
    EXPECT_EQ(cache.n_snapshots(), n % page != 0 ? 1 : 0) << n;
    EXPECT_EQ(pool.n_used(), (n + page - 1) / page) << n;
    for (std::int32_t cut = 1; cut <= n + 2; ++cut) {
      auto hit = cache.lookup(t, cut);
      const std::int32_t want = cut < page ? 0 : std::min(cut, n);  // at least one whole page matches
      ASSERT_EQ(hit.n_tokens(), want) << "checkpoint " << n << " cut " << cut;
      if (want == 0) continue;
      ASSERT_EQ(std::int32_t(hit.pages().size()), (want + page - 1) / page);
      const std::int32_t shared = hit.pages().back();
      std::vector<helios::PageCopy> copies;
      ASSERT_EQ(hit.append(1, copies), -1);
      if (want % page != 0) {  // the partial page is copied before the hit writes into it
        ASSERT_EQ(copies.size(), 1u) << "checkpoint " << n << " cut " << cut;
        EXPECT_EQ(copies[0].src_page, shared);
        EXPECT_NE(hit.pages().back(), shared);
        EXPECT_EQ(pool.ref_count(shared), 1);  // the checkpoint's again
      } else {
        EXPECT_TRUE(copies.empty());
      }
    }
    // A prompt that diverges inside the partial page hits up to the divergence.
    if (n % page > 1) {
      auto diverging = t;
      diverging[std::size_t(n - 1)] = -5;
      EXPECT_EQ(cache.lookup(diverging, 100).n_tokens(), n - 1);
    }
    EXPECT_EQ(pool.n_used(), (n + page - 1) / page) << n;  // every hit gave its pages back
    cache.clear();
    EXPECT_EQ(pool.n_used(), 0);
  }
}

// A prompt checkpoint taken while its sequence goes on: the live sequence copies the shared
// partial page at its next append, and the checkpoint's page keeps the prompt's tokens. An answer
// checkpoint of a sequence that ends there takes its page over without a copy.
TEST(PrefixCache, TheLiveSequenceCopiesAPromptSnapshotAndAnAnswerKeepsItsPage) {
  helios::HistoryPools pools({{32, 0}});
  helios::PagePool& pool = pools.pool(0);
  PrefixCache cache(pools, 4, 8, 8);
  const auto t = tokens(20);
  auto live = filled(pools, 4, 10);
  cache.insert(std::span(t).first(10), live);
  const std::int32_t snapshot = live.pages().back();
  EXPECT_EQ(pool.ref_count(snapshot), 2);
  std::vector<helios::PageCopy> copies;
  ASSERT_EQ(live.append(3, copies), -1);
  ASSERT_EQ(copies.size(), 1u);
  EXPECT_EQ(copies[0].src_page, snapshot);
  EXPECT_EQ(pool.ref_count(snapshot), 1);
  // The answer's checkpoint (13 tokens) supersedes the prompt's.
  cache.insert(std::span(t).first(13), live);
  EXPECT_EQ(cache.n_entries(), 1);
  EXPECT_EQ(pool.ref_count(snapshot), 0);  // the superseded snapshot's page went back
  const std::int32_t tail = live.pages().back();
  live.free();
  EXPECT_EQ(pool.ref_count(tail), 1);  // no copy: the checkpoint holds the answer's own page
  EXPECT_EQ(cache.lookup(t, 100).n_tokens(), 13);
  EXPECT_EQ(pool.n_used(), 4);
  cache.clear();
  EXPECT_EQ(pool.n_used(), 0);
}

TEST(PrefixCache, SnapshotsAreBoundedLeastRecentlyUsedCutFirst) {
  helios::HistoryPools pools({{64, 0}});
  helios::PagePool& pool = pools.pool(0);
  PrefixCache cache(pools, 4, 8, 2);
  for (int salt = 0; salt < 3; ++salt) {
    auto seq = filled(pools, 4, 7);
    cache.insert(tokens(7, salt), seq);
  }
  EXPECT_EQ(cache.n_entries(), 3);
  EXPECT_EQ(cache.n_snapshots(), 2);
  EXPECT_EQ(cache.lookup(tokens(7, 0), 7).n_tokens(), 4);  // the oldest was cut to its whole page
  EXPECT_EQ(cache.lookup(tokens(7, 1), 7).n_tokens(), 7);
  EXPECT_EQ(cache.lookup(tokens(7, 2), 7).n_tokens(), 7);
  EXPECT_EQ(pool.n_used(), 1 + 2 + 2);
  cache.clear();
  EXPECT_EQ(pool.n_used(), 0);
}

TEST(PrefixCache, EvictionCutsSnapshotPagesBeforeCheckpoints) {
  helios::HistoryPools pools({{9, 0}});
  helios::PagePool& pool = pools.pool(0);
  PrefixCache cache(pools, 4, 8, 8);
  for (int salt = 0; salt < 3; ++salt) {
    auto seq = filled(pools, 4, 10);  // two whole pages and a snapshot page each
    cache.insert(tokens(10, salt), seq);
  }
  EXPECT_EQ(pool.n_free(), 0);
  EXPECT_TRUE(cache.evict_until_free(2));
  EXPECT_EQ(cache.n_entries(), 3);  // two snapshots cut, no checkpoint evicted
  EXPECT_EQ(cache.n_snapshots(), 1);
  EXPECT_EQ(cache.lookup(tokens(10, 0), 10).n_tokens(), 8);  // least recently used: cut first
  EXPECT_EQ(cache.lookup(tokens(10, 1), 10).n_tokens(), 8);
  EXPECT_EQ(cache.lookup(tokens(10, 2), 10).n_tokens(), 10);
  EXPECT_TRUE(cache.evict_until_free(4));  // then the last snapshot, then a checkpoint
  EXPECT_EQ(cache.n_snapshots(), 0);
  EXPECT_EQ(cache.n_entries(), 2);
  cache.clear();
  EXPECT_EQ(pool.n_used(), 0);
}

TEST(PrefixCache, ASnapshotALiveSequenceWouldCopyIsReleasedWhenNoPageIsFree) {
  helios::HistoryPools pools({{3, 0}});
  helios::PagePool& pool = pools.pool(0);
  PrefixCache cache(pools, 4, 8, 8);
  auto live = filled(pools, 4, 6);
  cache.insert(tokens(6), live);
  auto other = filled(pools, 4, 4);  // takes the last free page
  std::vector<helios::PageCopy> copies;
  EXPECT_EQ(live.append(1, copies), 0);  // the copy needs a page: none
  EXPECT_FALSE(cache.release_snapshots_of(0, live.pages().front()));  // not a snapshot page
  EXPECT_TRUE(cache.release_snapshots_of(0, live.pages().back()));
  EXPECT_EQ(cache.n_snapshots(), 0);
  EXPECT_EQ(cache.n_entries(), 1);  // its whole page stays
  ASSERT_EQ(live.append(1, copies), -1);
  EXPECT_TRUE(copies.empty());  // the page is the sequence's alone again: written in place
  EXPECT_EQ(cache.lookup(tokens(6), 6).n_tokens(), 4);
  live.free();
  other.free();
  cache.clear();
  EXPECT_EQ(pool.n_used(), 0);
}

// With a sliding window, a snapshot hits where its window is held, and cutting it back to whole
// pages drops the checkpoint when the whole-page cut's window is gone.
TEST(PrefixCache, WithASlidingWindowASnapshotHitsAtItsEndAndIsDroppedWhenItsCutIsNoCheckpoint) {
  helios::HistoryPools pools({{32, 0}, {32, 6}});
  PrefixCache cache(pools, 4, 8, 8);
  const auto t = tokens(30);
  {
    auto answer = filled(pools, 4, 22);
    answer.release_behind(22);  // reads 17..22: group 1 gives back pages of 0..15
    cache.insert(t, answer);
  }
  EXPECT_EQ(cache.lookup(t, 100).n_tokens(), 22);
  EXPECT_EQ(cache.lookup(t, 21).n_tokens(), 21);  // reads 16..21: held
  EXPECT_EQ(cache.lookup(t, 20).n_tokens(), 0);   // would read 15: given back
  EXPECT_TRUE(cache.release_snapshots_of(1, 5));  // page 5 of group 1 is its partial page
  EXPECT_EQ(cache.n_entries(), 0);  // a cut at 20 could not go on
  EXPECT_EQ(pools.pool(0).n_used(), 0);
  EXPECT_EQ(pools.pool(1).n_used(), 0);
}

TEST(PrefixCache, NegativeSnapshotCountIsAUsageError) {
  helios::HistoryPools pools({{4, 0}});
  EXPECT_THROW(PrefixCache(pools, 4, 8, -1), std::exception);
}

}  // namespace
}  // namespace flare::engine
