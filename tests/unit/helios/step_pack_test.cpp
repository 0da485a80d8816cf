// The packed step descriptor (step_pack.h): every array's offset depends only on the step's shape,
// so a graph captured for one shape reads later steps of that shape at the same addresses, and the
// packed values are the descriptor's.
#include <gtest/gtest.h>

#include "common/error.h"
#include "helios/step_pack.h"

namespace flare::helios {
namespace {

// Two rows: a 3-token prefill chunk from position 5 wanting 2 logits, then a decode row at 9.
Step two_row_step(std::vector<std::int32_t> pages_a, std::vector<std::int32_t> pages_b) {
  Step step;
  step.tokens = {11, 12, 13, 14};
  step.rows = {{3, 5, 2, 0, std::int32_t(pages_a.size())},
               {1, 9, 1, std::int32_t(pages_a.size()), std::int32_t(pages_b.size())}};
  step.block_tables = pages_a;
  step.block_tables.insert(step.block_tables.end(), pages_b.begin(), pages_b.end());
  return step;
}

TEST(StepPack, OffsetsDependOnlyOnTheShape) {
  const StepPackLayout short_tables = StepPackLayout::of(two_row_step({0, 1}, {2, 3, 4}));
  const StepPackLayout long_tables = StepPackLayout::of(two_row_step({7, 8, 9, 10, 11}, {12, 13, 14, 15, 16, 17}));
  EXPECT_EQ(short_tables.tokens, long_tables.tokens);
  EXPECT_EQ(short_tables.positions, long_tables.positions);
  EXPECT_EQ(short_tables.token_rows, long_tables.token_rows);
  EXPECT_EQ(short_tables.logit_tokens, long_tables.logit_tokens);
  EXPECT_EQ(short_tables.row_first_block, long_tables.row_first_block);
  EXPECT_EQ(short_tables.row_first_token, long_tables.row_first_token);
  EXPECT_EQ(short_tables.block_tables, long_tables.block_tables);
  EXPECT_EQ(short_tables.size + 6, long_tables.size);
}

TEST(StepPack, WritesEveryArray) {
  const Step step = two_row_step({4, 5}, {6, 7, 8});
  const StepPackLayout l = StepPackLayout::of(step);
  std::vector<std::int32_t> packed(l.size + 1, -99);
  step_pack(step, packed);
  auto at = [&](std::size_t begin, std::size_t n) {
    return std::vector<std::int32_t>(packed.begin() + std::ptrdiff_t(begin), packed.begin() + std::ptrdiff_t(begin + n));
  };
  EXPECT_EQ(at(l.tokens, 4), (std::vector<std::int32_t>{11, 12, 13, 14}));
  EXPECT_EQ(at(l.positions, 4), (std::vector<std::int32_t>{5, 6, 7, 9}));
  EXPECT_EQ(at(l.token_rows, 4), (std::vector<std::int32_t>{0, 0, 0, 1}));
  EXPECT_EQ(at(l.logit_tokens, 3), (std::vector<std::int32_t>{1, 2, 3}));  // the chunk's last two, the decode row
  EXPECT_EQ(at(l.row_first_block, 2), (std::vector<std::int32_t>{0, 2}));
  EXPECT_EQ(at(l.row_first_token, 2), (std::vector<std::int32_t>{0, 3}));  // the chunk's 3 tokens, then the decode row
  EXPECT_EQ(at(l.block_tables, 5), (std::vector<std::int32_t>{4, 5, 6, 7, 8}));
  EXPECT_EQ(packed[l.size], -99);  // nothing past the layout
  EXPECT_LE(l.size, StepPackLayout::capacity(4, 2, 5));
}

TEST(StepPack, RejectsTooSmallOutput) {
  const Step step = two_row_step({0}, {1});
  std::vector<std::int32_t> packed(StepPackLayout::of(step).size - 1);
  EXPECT_THROW(step_pack(step, packed), Error);
}

}  // namespace
}  // namespace flare::helios
