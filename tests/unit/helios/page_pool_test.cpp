// Paged KV bookkeeping: allocation, copy-on-write after fork, truncation, and a long random run of
// append / fork / truncate / free that must return every page (count back to zero, no leak).
#include <gtest/gtest.h>

#include <memory>
#include <random>

#include "common/error.h"
#include "helios/page_pool.h"

namespace flare::helios {
namespace {

TEST(PagePool, AllocatesAndFrees) {
  PagePool pool(3);
  EXPECT_EQ(pool.n_free(), 3);
  const auto a = pool.allocate(), b = pool.allocate(), c = pool.allocate();
  EXPECT_EQ(pool.allocate(), -1);
  EXPECT_EQ(pool.n_used(), 3);
  pool.retain(b);
  pool.release(b);
  EXPECT_EQ(pool.ref_count(b), 1);
  for (auto page : {a, b, c}) pool.release(page);
  EXPECT_EQ(pool.n_used(), 0);
  EXPECT_THROW(pool.release(a), Error);  // double free is caught
  EXPECT_THROW(pool.retain(99), Error);
  EXPECT_THROW(PagePool(0), Error);
}

TEST(SequencePages, AppendAllocatesPagesAsNeeded) {
  PagePool pool(8);
  SequencePages seq(pool, 4);
  std::vector<PageCopy> copies;
  EXPECT_TRUE(seq.append(5, copies));
  EXPECT_EQ(seq.pages().size(), 2u);
  EXPECT_TRUE(seq.append(3, copies));
  EXPECT_EQ(seq.pages().size(), 2u);
  EXPECT_TRUE(seq.append(1, copies));
  EXPECT_EQ(seq.pages().size(), 3u);
  EXPECT_TRUE(copies.empty());
  EXPECT_FALSE(seq.append(100, copies));  // does not fit: nothing changes
  EXPECT_EQ(seq.n_tokens(), 9);
  EXPECT_EQ(pool.n_used(), 3);
  seq.free();
  EXPECT_EQ(pool.n_used(), 0);
}

TEST(SequencePages, ForkSharesAndCopiesOnWrite) {
  PagePool pool(8);
  SequencePages parent(pool, 4);
  std::vector<PageCopy> copies;
  ASSERT_TRUE(parent.append(6, copies));  // one full page, one half page
  SequencePages child = parent.fork();
  EXPECT_EQ(pool.n_used(), 2);
  EXPECT_EQ(pool.ref_count(parent.pages()[0]), 2);
  ASSERT_TRUE(child.append(1, copies));  // writes into the shared half page: private copy
  ASSERT_EQ(copies.size(), 1u);
  EXPECT_EQ(copies[0].src_page, parent.pages()[1]);
  EXPECT_EQ(copies[0].dst_page, child.pages()[1]);
  EXPECT_EQ(child.pages()[0], parent.pages()[0]);  // the full page stays shared
  EXPECT_EQ(pool.n_used(), 3);
  copies.clear();
  ASSERT_TRUE(parent.append(1, copies));  // the parent's half page is now its own again
  EXPECT_TRUE(copies.empty());
  parent.free();
  EXPECT_EQ(pool.n_used(), 2);
  child.free();
  EXPECT_EQ(pool.n_used(), 0);
}

TEST(SequencePages, TruncateReleasesTrailingPages) {
  PagePool pool(8);
  SequencePages seq(pool, 4);
  std::vector<PageCopy> copies;
  ASSERT_TRUE(seq.append(10, copies));
  seq.truncate(4);
  EXPECT_EQ(seq.pages().size(), 1u);
  EXPECT_EQ(pool.n_used(), 1);
  EXPECT_THROW(seq.truncate(5), Error);
}

TEST(SequencePages, RandomOperationsNeverLeak) {
  std::mt19937 rng(1234);
  PagePool pool(64);
  std::vector<std::unique_ptr<SequencePages>> seqs;
  std::size_t n_copies = 0;
  for (int op = 0; op < 20000; ++op) {
    const int kind = int(rng() % 10);
    std::vector<PageCopy> copies;
    if (seqs.empty() || kind < 4) {
      if (seqs.size() < 24) seqs.push_back(std::make_unique<SequencePages>(pool, 1 + int(rng() % 8)));
      auto& seq = *seqs.back();
      seq.append(1 + std::int32_t(rng() % 20), copies);
    } else if (kind < 6) {
      auto& seq = *seqs[rng() % seqs.size()];
      const std::int32_t before = seq.n_tokens();
      const std::size_t pages_before = seq.pages().size();
      if (!seq.append(1 + std::int32_t(rng() % 9), copies)) {
        EXPECT_EQ(seq.n_tokens(), before);
        EXPECT_EQ(seq.pages().size(), pages_before);
      }
    } else if (kind < 8) {
      if (seqs.size() < 24) seqs.push_back(std::make_unique<SequencePages>(seqs[rng() % seqs.size()]->fork()));
    } else if (kind < 9) {
      auto& seq = *seqs[rng() % seqs.size()];
      seq.truncate(seq.n_tokens() == 0 ? 0 : std::int32_t(rng() % std::uint32_t(seq.n_tokens())));
    } else {
      seqs.erase(seqs.begin() + std::ptrdiff_t(rng() % seqs.size()));
    }
    n_copies += copies.size();
    for (const auto& copy : copies) EXPECT_EQ(pool.ref_count(copy.dst_page), 1);
    // Invariant: the pool's references equal the block tables' entries.
    std::int64_t references = 0;
    for (std::int32_t page = 0; page < pool.n_pages(); ++page) references += pool.ref_count(page);
    std::int64_t entries = 0;
    for (const auto& seq : seqs) entries += std::int64_t(seq->pages().size());
    ASSERT_EQ(references, entries) << "after operation " << op;
  }
  EXPECT_GT(n_copies, 0u);
  seqs.clear();
  EXPECT_EQ(pool.n_used(), 0);
  EXPECT_EQ(pool.n_free(), 64);
}

}  // namespace
}  // namespace flare::helios
