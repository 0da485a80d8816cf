// Decode graph padding on the CPU backend: the CPU has no graphs, so the runner captures none and
// runs every step eagerly; and a decode step padded with dummy rows (what the runner replays on a
// GPU) gives its real rows exactly the logits of the unpadded step, over several steps, because
// the dummy rows touch only the scratch page past the scheduler's pool.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "engine/model_runner.h"
#include "helios/cpu/cpu_backend.h"
#include "helios/step_shape.h"
#include "helios/page_pool.h"
#include "model/model.h"

namespace flare::engine {
namespace {

std::filesystem::path fixture(const std::string& name) { return std::filesystem::path(FLARE_TEST_DATA) / "models" / name; }

TEST(DecodeBuckets, PowersOfTwoUpToTheConcurrency) {
  EXPECT_EQ(decode_buckets(1), (std::vector<std::int32_t>{1}));
  EXPECT_EQ(decode_buckets(3), (std::vector<std::int32_t>{1, 2, 4}));
  EXPECT_EQ(decode_buckets(8), (std::vector<std::int32_t>{1, 2, 4, 8}));
}

TEST(ModelStepRunnerGraphs, CpuCapturesNoneAndStillRuns) {
  EngineOptions options;
  options.n_pages = 16;
  options.page_size_tokens = 4;
  auto runner = ModelStepRunner::load(std::make_unique<helios::cpu::CpuBackend>(2), fixture("qwen3-gqa2-hd128-tied"),
                                      options, helios::DType::f32);
  EXPECT_EQ(runner->capture_graphs(decode_buckets(8)), 0);
  EXPECT_TRUE(runner->graph_buckets().empty());
  helios::Step step;
  step.tokens = {5};
  step.rows = {{1, 0, 1, 0, 1}};
  step.block_tables = {15};  // the last page of the pool; the runner's scratch page (16) lies past it
  StepResults results;
  runner->run(step, {}, sampling_plan_host_only(step.n_logit_rows()), results);
  ASSERT_EQ(results.host_logits.size(), std::size_t(runner->vocab_size()));
  EXPECT_TRUE(std::isfinite(results.host_logits[0]));
}

// One model, two caches of n_pages + 1 pages and two pools of n_pages that allocate alike: the
// same sequences run unpadded on one and padded to `bucket` rows on the other.
void expect_padding_invisible(const std::string& fixture_name, std::int32_t n_real, std::int32_t bucket) {
  helios::cpu::CpuBackend backend(2);
  auto model = model::Model::load(fixture(fixture_name), backend);
  const std::int32_t n_pages = 64, page_size = 4, scratch = n_pages;
  helios::HistoryCaches plain = helios::history_allocate(backend, model->kv_cache_layout(n_pages + 1, page_size, helios::DType::f32));
  helios::HistoryCaches padded = helios::history_allocate(backend, model->kv_cache_layout(n_pages + 1, page_size, helios::DType::f32));
  helios::PagePool pool_plain(n_pages), pool_padded(n_pages);
  std::vector<helios::SequencePages> seqs_plain, seqs_padded;
  const std::int32_t vocab = model->spec().vocab_size;
  for (std::int32_t i = 0; i < n_real; ++i) {
    seqs_plain.emplace_back(pool_plain, page_size);
    seqs_padded.emplace_back(pool_padded, page_size);
  }
  auto make_step = [&](std::vector<helios::SequencePages>& seqs, const std::vector<std::vector<std::int32_t>>& tokens) {
    helios::Step step;
    std::vector<helios::PageCopy> copies;
    for (std::size_t i = 0; i < seqs.size(); ++i) {
      helios::StepRow row;
      row.start_position = seqs[i].n_tokens();
      row.n_tokens = std::int32_t(tokens[i].size());
      row.n_logits = 1;
      EXPECT_TRUE(seqs[i].append(row.n_tokens, copies));
      row.first_block = std::int32_t(step.block_tables.size());
      row.n_blocks = std::int32_t(seqs[i].pages().size());
      step.block_tables.insert(step.block_tables.end(), seqs[i].pages().begin(), seqs[i].pages().end());
      step.tokens.insert(step.tokens.end(), tokens[i].begin(), tokens[i].end());
      step.rows.push_back(row);
    }
    return step;
  };
  // Prompts of different lengths (block tables of different sizes), then decode steps.
  std::vector<std::vector<std::int32_t>> tokens;
  for (std::int32_t i = 0; i < n_real; ++i) {
    std::vector<std::int32_t> prompt;
    for (std::int32_t t = 0; t < 3 + 4 * i; ++t) prompt.push_back((17 * t + 29 * i + 3) % vocab);
    tokens.push_back(prompt);
  }
  model->forward(make_step(seqs_plain, tokens), plain);
  model->forward(make_step(seqs_padded, tokens), padded);
  for (std::int32_t s = 0; s < 5; ++s) {
    for (std::int32_t i = 0; i < n_real; ++i) tokens[std::size_t(i)] = {(41 * s + 7 * i + 1) % vocab};
    const helios::Step step_plain = make_step(seqs_plain, tokens);
    const helios::Step step_padded =
        helios::step_pad_rows(make_step(seqs_padded, tokens), {bucket, 1, 1, helios::DType::f32}, page_size, scratch);
    const std::vector<float> want = model->forward(step_plain, plain);
    const std::vector<float> got = model->forward(step_padded, padded);
    ASSERT_EQ(got.size(), std::size_t(bucket) * std::size_t(vocab));
    const std::vector<float> got_real(got.begin(), got.begin() + std::ptrdiff_t(want.size()));
    EXPECT_EQ(std::memcmp(got_real.data(), want.data(), want.size() * sizeof(float)), 0)
        << fixture_name << " decode step " << s << ": padded rows changed the real rows' logits";
  }
}

TEST(DecodePaddingOnCpu, PaddedRowsLeaveRealRowsBitIdentical) {
  expect_padding_invisible("qwen3-gqa2-hd128-tied", 3, 4);
  expect_padding_invisible("qwen3-gqa2-hd128-tied", 1, 8);
  expect_padding_invisible("llama-gqa2-hd64-dynamic-fp32", 3, 4);  // per-row rope tables
  expect_padding_invisible("mistral-gqa2-hd64-window8", 5, 8);     // sliding window
}

}  // namespace
}  // namespace flare::engine
