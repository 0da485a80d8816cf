// Page pools per history group (history_pages.h): a sliding-window group gives pages back as the
// window moves on, appends take every group's pages or none, forks and checkpoints keep what they
// share, and truncation past released pages is exact.
#include <gtest/gtest.h>

#include "helios/history_pages.h"

namespace flare::helios {
namespace {

TEST(HistoryPages, AWindowGroupGivesBackWhatNoLaterQueryReads) {
  HistoryPools pools({{32, 0}, {6, 8}});  // pages of 4 tokens; the second group reads 8 positions back
  HistoryPages seq(pools, 4);
  std::vector<PageCopy> copies;
  ASSERT_EQ(seq.append(20, copies), -1);  // positions 0..19: five pages in each group
  EXPECT_EQ(pools.pool(0).n_used(), 5);
  EXPECT_EQ(pools.pool(1).n_used(), 5);
  // The next query at 20 reads 13..20: pages of 0..11 go back, the one holding 12..15 stays.
  seq.release_behind(20);
  EXPECT_EQ(pools.pool(0).n_used(), 5);
  EXPECT_EQ(pools.pool(1).n_used(), 2);
  EXPECT_EQ(seq.group(1).pages()[0], SequencePages::k_released);
  EXPECT_EQ(seq.group(1).pages()[3] >= 0, true);
  std::vector<std::int32_t> table;
  seq.append_table(1, table);
  EXPECT_EQ(table[0], pools.released_page_id(1));
  EXPECT_EQ(table[0], 6);
  EXPECT_TRUE(seq.holds_window_at(20));
  EXPECT_TRUE(seq.holds_window_at(19));   // reads 12..19
  EXPECT_FALSE(seq.holds_window_at(12));  // reads 5..12, given back
  EXPECT_EQ(seq.n_held(), 7);
  // Growth takes pages from both groups; rollback of the new tokens gives them back.
  ASSERT_EQ(seq.append(8, copies), -1);
  EXPECT_EQ(pools.pool(1).n_used(), 4);
  seq.truncate(20);
  EXPECT_EQ(pools.pool(1).n_used(), 2);
  EXPECT_EQ(seq.n_tokens(), 20);
  seq.free();
  EXPECT_EQ(pools.pool(0).n_used(), 0);
  EXPECT_EQ(pools.pool(1).n_used(), 0);
}

TEST(HistoryPages, AnAppendOneGroupCannotHoldChangesNoGroup) {
  HistoryPools pools({{32, 0}, {3, 8}});
  HistoryPages seq(pools, 4);
  std::vector<PageCopy> copies;
  ASSERT_EQ(seq.append(8, copies), -1);
  EXPECT_EQ(seq.append(8, copies), 1);  // two more pages: the window group has one left
  EXPECT_EQ(seq.n_tokens(), 8);
  EXPECT_EQ(pools.pool(0).n_used(), 2);
  EXPECT_EQ(pools.pool(1).n_used(), 2);
  EXPECT_TRUE(copies.empty());
}

TEST(HistoryPages, ForksShareEveryHeldPageAndCopyOnWriteNamesItsGroup) {
  HistoryPools pools({{32, 0}, {16, 4}});
  HistoryPages lead(pools, 4);
  std::vector<PageCopy> copies;
  ASSERT_EQ(lead.append(14, copies), -1);
  lead.release_behind(14);  // reads 11..14: pages of 0..7 go back in group 1
  HistoryPages other = lead.fork();
  EXPECT_EQ(pools.pool(0).n_used(), 4);
  EXPECT_EQ(pools.pool(1).n_used(), 2);
  EXPECT_EQ(other.group(1).pages(), lead.group(1).pages());
  // Writing into the shared partial page copies it, in each group.
  ASSERT_EQ(other.append(1, copies), -1);
  ASSERT_EQ(copies.size(), 2u);
  EXPECT_EQ(copies[0].group, 0);
  EXPECT_EQ(copies[1].group, 1);
  other.free();
  lead.free();
  EXPECT_EQ(pools.pool(0).n_used(), 0);
  EXPECT_EQ(pools.pool(1).n_used(), 0);
}

}  // namespace
}  // namespace flare::helios
