// The engine-facing Model API: reserved buffers keep their addresses across steps (graph capture),
// empty steps, and hostile steps (token ids outside the vocabulary, pages outside the cache) rejected.
#include <gtest/gtest.h>

#include "common/error.h"
#include "harness.h"

namespace flare::model::testing {
namespace {

TEST(ModelApi, ReservedBuffersKeepTheirAddresses) {
  Runner runner(models_dir() / "qwen3-gqa2-hd128-tied");
  runner.model->reserve(64, 8, 8);
  helios::SequencePages a(*runner.pool, runner.page_size), b(*runner.pool, runner.page_size);
  runner.step({&a}, {{1, 2, 3, 4, 5, 6, 7, 8, 9}}, true);
  const void* first = runner.last_logits().data;
  runner.step({&a, &b}, {{10}, {3, 4}}, false);
  EXPECT_EQ(runner.last_logits().data, first);
  EXPECT_EQ(runner.last_logits().rows, 2);
}

TEST(ModelApi, EmptyStepGivesNoLogits) {
  Runner runner(models_dir() / "qwen3-gqa2-hd128-tied");
  EXPECT_TRUE(runner.model->forward(helios::Step{}, runner.cache).empty());
}

TEST(ModelApi, RejectsHostileSteps) {
  Runner runner(models_dir() / "qwen3-gqa2-hd128-tied", helios::DType::bf16, 8, 4);
  helios::Step step;
  step.tokens = {1, 256};  // vocabulary is 256
  step.rows = {{2, 0, 1, 0, 1}};
  step.block_tables = {0};
  EXPECT_THROW(runner.model->forward(step, runner.cache), Error);
  step.tokens = {1, -1};
  EXPECT_THROW(runner.model->forward(step, runner.cache), Error);
  step.tokens = {1, 2};
  step.block_tables = {8};  // page outside the 8-page cache
  EXPECT_THROW(runner.model->forward(step, runner.cache), Error);
  step.block_tables = {0};
  EXPECT_NO_THROW(runner.model->forward(step, runner.cache));
  helios::HistoryLayout other;
  other.groups = {{1, 8, 4, 1, 128, helios::DType::bf16}};
  other.layers = {{0, 0}};
  helios::HistoryCaches wrong = helios::history_allocate(*runner.backend, other);
  EXPECT_THROW(runner.model->forward(step, wrong), Error);  // layout of another model
}

}  // namespace
}  // namespace flare::model::testing
