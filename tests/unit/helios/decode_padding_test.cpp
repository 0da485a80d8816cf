// Padding decode steps to graph buckets (decode_padding.h): which steps qualify, which bucket they
// take, and what the dummy rows look like (valid steps whose only page is the scratch page).
#include <gtest/gtest.h>

#include "common/error.h"
#include "helios/decode_padding.h"

namespace flare::helios {
namespace {

Step decode_step(std::int32_t n_rows) {
  Step step;
  for (std::int32_t r = 0; r < n_rows; ++r) {
    step.tokens.push_back(100 + r);
    step.rows.push_back({1, 20 + r, 1, 2 * r, 2});
    step.block_tables.push_back(2 * r);
    step.block_tables.push_back(2 * r + 1);
  }
  return step;
}

TEST(DecodePadding, OnlyOneTokenOneLogitRowsAreDecodeSteps) {
  EXPECT_TRUE(step_is_decode(decode_step(3)));
  Step prefill = decode_step(2);
  prefill.rows[1].n_tokens = 2;
  prefill.tokens.push_back(7);
  EXPECT_FALSE(step_is_decode(prefill));
  Step no_logits = decode_step(2);
  no_logits.rows[0].n_logits = 0;
  EXPECT_FALSE(step_is_decode(no_logits));
}

TEST(DecodePadding, PicksTheSmallestBucketThatHoldsTheRows) {
  const std::vector<std::int32_t> buckets{8, 1, 4, 2};
  EXPECT_EQ(decode_bucket_for(decode_step(1), buckets), 1);
  EXPECT_EQ(decode_bucket_for(decode_step(3), buckets), 4);
  EXPECT_EQ(decode_bucket_for(decode_step(4), buckets), 4);
  EXPECT_EQ(decode_bucket_for(decode_step(5), buckets), 8);
  EXPECT_EQ(decode_bucket_for(decode_step(9), buckets), 0);  // beyond every bucket: eager
  EXPECT_EQ(decode_bucket_for(Step{}, buckets), 0);
  EXPECT_EQ(decode_bucket_for(decode_step(2), {}), 0);
  Step mixed = decode_step(2);
  mixed.rows[0].n_tokens = 3;
  mixed.tokens.insert(mixed.tokens.begin(), {1, 2});
  EXPECT_EQ(decode_bucket_for(mixed, buckets), 0);
}

TEST(DecodePadding, DummyRowsUseOnlyTheScratchPage) {
  const std::int32_t n_pages = 6, scratch = 6;  // the cache has n_pages + 1 pages
  const Step real = decode_step(3);
  const Step padded = step_pad_decode(real, 4, scratch);
  ASSERT_EQ(padded.n_rows(), 4);
  EXPECT_NO_THROW(step_validate(padded, n_pages + 1, 16));
  EXPECT_TRUE(step_is_decode(padded));
  for (std::int32_t r = 0; r < 3; ++r) {  // real rows unchanged and first
    EXPECT_EQ(padded.tokens[std::size_t(r)], real.tokens[std::size_t(r)]);
    EXPECT_EQ(padded.rows[std::size_t(r)].start_position, real.rows[std::size_t(r)].start_position);
    EXPECT_EQ(padded.rows[std::size_t(r)].first_block, real.rows[std::size_t(r)].first_block);
  }
  const StepRow& dummy = padded.rows[3];
  EXPECT_EQ(dummy.start_position, 0);
  EXPECT_EQ(dummy.n_blocks, 1);
  EXPECT_EQ(padded.block_tables[std::size_t(dummy.first_block)], scratch);
  EXPECT_EQ(padded.tokens[3], 0);
  EXPECT_EQ(padded.n_logit_rows(), 4);
  // A capture step is all dummies.
  const Step all_dummy = step_pad_decode({}, 2, scratch);
  EXPECT_EQ(all_dummy.block_tables, (std::vector<std::int32_t>{scratch, scratch}));
  EXPECT_THROW(step_pad_decode(real, 2, scratch), Error);
}

}  // namespace
}  // namespace flare::helios
