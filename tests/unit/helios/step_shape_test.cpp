// Step shapes (step_shape.h): which steps have one, what dummy steps look like (valid steps whose
// only page is the scratch page), and padding a uniform step up to a captured shape.
#include <gtest/gtest.h>

#include "common/error.h"
#include "helios/step_shape.h"

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

TEST(StepShape, OnlyUniformStepsHaveAShape) {
  const auto decode = step_shape_of(decode_step(3), DType::bf16);
  ASSERT_TRUE(decode);
  EXPECT_EQ(*decode, (StepShape{3, 1, 1, DType::bf16}));
  EXPECT_TRUE(decode->is_decode());
  EXPECT_EQ(step_shape_of(decode_step(2), DType::f8_e4m3)->kv_dtype, DType::f8_e4m3);
  Step mixed = decode_step(2);
  mixed.rows[1].n_tokens = 2;
  mixed.tokens.push_back(7);
  EXPECT_FALSE(step_shape_of(mixed, DType::bf16));
  Step no_logits = decode_step(2);
  no_logits.rows[0].n_logits = 0;
  EXPECT_FALSE(step_shape_of(no_logits, DType::bf16));
  EXPECT_FALSE(step_shape_of(Step{}, DType::bf16));
  Step verify = decode_step(2);  // two rows of 3 tokens and 3 logits each
  for (StepRow& row : verify.rows) row.n_tokens = row.n_logits = 3;
  verify.tokens.resize(6, 1);
  const auto shape = step_shape_of(verify, DType::bf16);
  ASSERT_TRUE(shape);
  EXPECT_EQ(*shape, (StepShape{2, 3, 3, DType::bf16}));
  EXPECT_FALSE(shape->is_decode());
  EXPECT_EQ(shape->n_tokens(), 6);
  EXPECT_EQ(shape->n_logit_rows(), 6);
}

TEST(StepShape, DummyStepsUseOnlyTheScratchPage) {
  const std::int32_t n_pages = 6, scratch = 6, page = 16;
  const Step decode = step_dummy({2, 1, 1, DType::bf16}, page, scratch);
  EXPECT_EQ(decode.block_tables, (std::vector<std::int32_t>{scratch, scratch}));
  EXPECT_EQ(decode.tokens, (std::vector<std::int32_t>{0, 0}));
  EXPECT_NO_THROW(step_validate(decode, n_pages + 1, page));
  // A prefill chunk of 40 tokens spans three pages' worth of positions, every block the scratch page.
  const Step chunk = step_dummy({1, 40, 1, DType::bf16}, page, scratch);
  ASSERT_EQ(chunk.n_rows(), 1);
  EXPECT_EQ(chunk.rows[0].n_blocks, 3);
  EXPECT_EQ(chunk.block_tables, (std::vector<std::int32_t>(3, scratch)));
  EXPECT_EQ(chunk.n_logit_rows(), 1);
  EXPECT_NO_THROW(step_validate(chunk, n_pages + 1, page));
  EXPECT_THROW(step_dummy({0, 1, 1, DType::bf16}, page, scratch), Error);
  EXPECT_THROW(step_dummy({1, 2, 3, DType::bf16}, page, scratch), Error);  // more logits than tokens
}

TEST(StepShape, PaddingKeepsRealRowsFirst) {
  const std::int32_t n_pages = 6, scratch = 6;  // the cache has n_pages + 1 pages
  const Step real = decode_step(3);
  const Step padded = step_pad_rows(real, {4, 1, 1, DType::bf16}, 16, scratch);
  ASSERT_EQ(padded.n_rows(), 4);
  EXPECT_NO_THROW(step_validate(padded, n_pages + 1, 16));
  EXPECT_EQ(step_shape_of(padded, DType::bf16), (StepShape{4, 1, 1, DType::bf16}));
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
  EXPECT_THROW(step_pad_rows(real, {2, 1, 1, DType::bf16}, 16, scratch), Error);  // fewer rows
  EXPECT_THROW(step_pad_rows(real, {4, 2, 2, DType::bf16}, 16, scratch), Error);  // another row shape
}

}  // namespace
}  // namespace flare::helios
