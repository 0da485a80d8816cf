// Decode steps replayed as CUDA graphs (ModelStepRunner::capture_graphs, Model decode graphs) on
// every tiny fixture model: the runner, padding decode batches to buckets 1/2/4/8 and replaying
// their graphs, gives bit-identical logits to the same padded steps run op by op on another
// backend, through prefill, decode batches of 8, 3 (padded to 4) and 1 with growing positions,
// freed and reallocated sequences (new block tables under the same graphs), and a step that grows
// the logits buffer (the graphs recapture). Prompts prefilled alone in full chunks replay the
// prefill-chunk graphs, with and without the last token's logits, and the decode steps after them
// read what those graphs wrote. Also prints eager and graph time per decode step.
#ifdef FLARE_HAVE_CUDA

#include <chrono>
#include <cctype>
#include <cstring>

#include <gtest/gtest.h>

#include "engine/model_runner.h"
#include "gpu_support.h"
#include "helios/step_shape.h"
#include "helios/page_pool.h"
#include "model/model.h"

namespace flare::engine {
namespace {

using namespace helios::gpu_testing;

fs::path models_dir() { return test_data_dir() / "models"; }

std::vector<std::string> fixture_names() {
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(models_dir(), ec)) {
    if (fs::exists(entry.path() / "config.json")) out.push_back(entry.path().filename().string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

constexpr std::int32_t k_pages = 256, k_page_size = 4;

EngineOptions options(bool graphs) {
  EngineOptions o;
  o.max_concurrency = 8;
  o.prefill_chunk_tokens = 64;
  o.page_size_tokens = k_page_size;
  o.n_pages = k_pages;
  o.context_limit = 256;
  o.cuda_graphs = graphs;
  return o;
}

// Sequences on one page pool; both sides keep identical pools, so their page ids agree.
struct Side {
  helios::PagePool pool{k_pages};
  std::map<int, helios::SequencePages> seqs;  // by sequence id

  // Rows want the logits of every token (all_logits), else of their last n_last.
  helios::Step step(const std::vector<int>& ids, const std::vector<std::vector<std::int32_t>>& tokens, bool all_logits,
                    std::vector<helios::PageCopy>& copies, std::int32_t n_last = 1) {
    helios::Step step;
    for (std::size_t i = 0; i < ids.size(); ++i) {
      auto it = seqs.try_emplace(ids[i], pool, k_page_size).first;
      helios::StepRow row;
      row.start_position = it->second.n_tokens();
      row.n_tokens = std::int32_t(tokens[i].size());
      row.n_logits = all_logits ? row.n_tokens : n_last;
      if (!it->second.append(row.n_tokens, copies)) throw std::runtime_error("page pool exhausted");
      row.first_block = std::int32_t(step.block_tables.size());
      row.n_blocks = std::int32_t(it->second.pages().size());
      step.block_tables.insert(step.block_tables.end(), it->second.pages().begin(), it->second.pages().end());
      step.tokens.insert(step.tokens.end(), tokens[i].begin(), tokens[i].end());
      step.rows.push_back(row);
    }
    return step;
  }
};

class CudaGraphs : public testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    std::string reason;
    auto graph_backend = try_cuda_backend(&reason);
    if (!graph_backend) GTEST_SKIP() << "no CUDA backend: " << reason;
    eager_backend_ = try_cuda_backend(&reason);
    const fs::path dir = models_dir() / GetParam();
    runner_ = ModelStepRunner::load(std::move(graph_backend), dir, options(true), helios::DType::bf16);
    eager_ = model::Model::load(dir, *eager_backend_);
    eager_cache_ = helios::history_allocate(*eager_backend_, eager_->kv_cache_layout(k_pages + 1, k_page_size));
  }
  void TearDown() override {
    runner_.reset();
    eager_.reset();
    eager_cache_.groups.clear();
  }
  std::int32_t vocab() const { return eager_->spec().vocab_size; }

  // One step on both sides: the runner (graphs where the step is a decode step of a bucket) and
  // the eager model over the same step padded as the runner pads it. Returns the runner's logits
  // after checking them bit for bit.
  std::vector<float> step(const std::vector<int>& ids, const std::vector<std::vector<std::int32_t>>& tokens,
                          bool all_logits, const std::string& what, std::int32_t n_last = 1) {
    std::vector<helios::PageCopy> copies_graph, copies_eager;
    const helios::Step step = graph_side_.step(ids, tokens, all_logits, copies_graph, n_last);
    const helios::Step eager_step = eager_side_.step(ids, tokens, all_logits, copies_eager, n_last);
    StepResults results;
    runner_->run(step, copies_graph, sampling_plan_host_only(step.n_logit_rows()), results);
    const std::vector<float>& got = results.host_logits;
    EXPECT_EQ(got.size(), std::size_t(step.n_logit_rows()) * std::size_t(vocab()));
    helios::history_copy_pages(*eager_backend_, eager_cache_, copies_eager, true);
    // The eager side pads as the runner's executor does (the smallest captured bucket that holds a
    // decode step), so both run the same GEMM shapes.
    std::int32_t bucket = 0;
    const auto shape = helios::step_shape_of(eager_step, eager_cache_.groups.front().layout.dtype);
    if (shape && shape->is_decode()) {
      for (const std::int32_t b : runner_->graph_buckets()) {
        if (b >= eager_step.n_rows() && (bucket == 0 || b < bucket)) bucket = b;
      }
    }
    std::vector<float> want =
        bucket > eager_step.n_rows()
            ? eager_->forward(helios::step_pad_rows(eager_step, {bucket, 1, 1, eager_cache_.groups.front().layout.dtype},
                                                    eager_cache_.groups.front().layout.page_size_tokens, k_pages),
                              eager_cache_)
            : eager_->forward(eager_step, eager_cache_);
    want.resize(got.size());  // the padding rows' logits are not compared
    std::size_t n_diff = 0;
    double max_abs = 0;
    for (std::size_t i = 0; i < got.size(); ++i) {
      if (std::memcmp(&got[i], &want[i], sizeof(float)) != 0) ++n_diff;
      max_abs = std::max(max_abs, double(std::fabs(got[i] - want[i])));
    }
    EXPECT_EQ(n_diff, 0u) << GetParam() << " " << what << ": " << n_diff << " logits differ, max abs " << max_abs;
    ++n_steps_;
    if (bucket > 0) ++n_graph_steps_;
    return results.host_logits;
  }

  std::vector<std::vector<std::int32_t>> greedy_next(const std::vector<float>& logits, std::size_t n_rows) const {
    std::vector<std::vector<std::int32_t>> out;
    const std::size_t v = std::size_t(vocab());
    for (std::size_t r = 0; r < n_rows; ++r) {
      const float* row = logits.data() + r * v;
      out.push_back({std::int32_t(std::max_element(row, row + v) - row)});
    }
    return out;
  }

  std::vector<std::int32_t> prompt(int id) const {
    std::vector<std::int32_t> p;
    for (int t = 0; t < 3 + 5 * id; ++t) p.push_back((31 * t + 17 * id + 5) % vocab());
    return p;
  }

  // n decode steps of the sequences `ids`, each feeding back its greedy token.
  void decode(const std::vector<int>& ids, std::vector<std::vector<std::int32_t>> next, int n, const std::string& what) {
    for (int s = 0; s < n; ++s) {
      const auto logits = step(ids, next, false, what + " step " + std::to_string(s));
      next = greedy_next(logits, ids.size());
    }
  }

  std::unique_ptr<helios::cuda::CudaBackend> eager_backend_;  // first: the eager model's buffers go before it
  std::unique_ptr<ModelStepRunner> runner_;
  std::unique_ptr<model::Model> eager_;
  helios::HistoryCaches eager_cache_;
  Side graph_side_, eager_side_;
  int n_steps_ = 0, n_graph_steps_ = 0;
};

TEST_P(CudaGraphs, ReplayedDecodeStepsEqualEagerStepsBitForBit) {
  ASSERT_EQ(runner_->capture_graphs(decode_buckets(8)), 4);
  EXPECT_EQ(runner_->graph_buckets(), (std::vector<std::int32_t>{1, 2, 4, 8}));
  std::printf("[ %s ] 4 decode graphs, %zu operations recorded\n", GetParam().c_str(),
              runner_->model().n_decode_graph_nodes());

  // Eight sequences prefill together (eager), then decode as a batch of 8 (bucket 8, no padding).
  std::vector<int> ids{0, 1, 2, 3, 4, 5, 6, 7};
  std::vector<std::vector<std::int32_t>> prompts;
  for (int id : ids) prompts.push_back(prompt(id));
  auto logits = step(ids, prompts, false, "prefill of 8");
  decode(ids, greedy_next(logits, ids.size()), 6, "batch 8");

  // Three of them go on (bucket 4: one dummy row), then one alone (bucket 1).
  for (int id : {3, 4, 5, 6, 7}) {
    graph_side_.seqs.erase(id);
    eager_side_.seqs.erase(id);
  }
  decode({0, 1, 2}, {{11}, {12}, {13}}, 5, "batch 3");
  for (int id : {1, 2}) {
    graph_side_.seqs.erase(id);
    eager_side_.seqs.erase(id);
  }
  decode({0}, {{21}}, 4, "batch 1");

  // New sequences take the freed pages (new block tables under the same graphs); one prefill asks
  // for every position's logits, more rows than the graphs reserved, so they recapture.
  std::vector<int> fresh{10, 11, 12, 13, 14, 15, 16};
  std::vector<std::vector<std::int32_t>> fresh_prompts;
  for (int id : fresh) fresh_prompts.push_back(prompt(id - 7));
  logits = step(fresh, fresh_prompts, true, "prefill of 7, all logits");
  fresh.insert(fresh.begin(), 0);
  std::vector<std::vector<std::int32_t>> next{{31}};
  for (int i = 0; i < 7; ++i) next.push_back({(7 * i + 3) % vocab()});
  decode(fresh, next, 5, "batch 8 after reallocation");
  decode({0, 10, 11, 12, 13}, {{1}, {2}, {3}, {4}, {5}}, 3, "batch 5");
  std::printf("[ %s ] %d steps bit-identical, %d of them through graphs\n", GetParam().c_str(), n_steps_, n_graph_steps_);
}

TEST_P(CudaGraphs, PrefillChunksReplayedEqualEagerStepsBitForBit) {
  ASSERT_EQ(runner_->capture_graphs(decode_buckets(8)), 4);
  ASSERT_EQ(runner_->model().n_prefill_graphs(), 2);  // the 64-token chunk, without and with logits
  std::printf("[ %s ] 2 prefill-chunk graphs, %zu operations recorded\n", GetParam().c_str(),
              runner_->model().n_prefill_graph_nodes());
  const std::int64_t replays_before = runner_->model().n_graph_replays();

  // A 200-token prompt alone: three full chunks without logits (graphs, at positions 0, 64 and
  // 128 over the sequence's own pages), then 8 tokens with the last one's logits (eagerly).
  std::vector<std::int32_t> long_prompt;
  for (int t = 0; t < 200; ++t) long_prompt.push_back((13 * t + 7) % vocab());
  std::vector<float> logits;
  for (int start = 0; start < 200; start += 64) {
    const int n = std::min(64, 200 - start);
    const bool last = start + n == 200;
    logits = step({40}, {std::vector<std::int32_t>(long_prompt.begin() + start, long_prompt.begin() + start + n)}, false,
                  "chunk at " + std::to_string(start), last ? 1 : 0);
  }
  // A 128-token prompt: a chunk without logits, then one with (the other graph).
  const std::vector<std::int32_t> short_prompt(long_prompt.begin() + 30, long_prompt.begin() + 158);
  step({41}, {std::vector<std::int32_t>(short_prompt.begin(), short_prompt.begin() + 64)}, false, "chunk 0 of 128", 0);
  auto logits_41 = step({41}, {std::vector<std::int32_t>(short_prompt.begin() + 64, short_prompt.end())}, false,
                        "chunk 1 of 128", 1);
  EXPECT_EQ(runner_->model().n_graph_replays() - replays_before, 5);

  // Decoding both reads the K and V the graphs wrote.
  std::vector<std::vector<std::int32_t>> next = greedy_next(logits, 1);
  next.push_back(greedy_next(logits_41, 1)[0]);
  decode({40, 41}, next, 4, "decode after chunked prefill");
}

// Wall time per decode step (host issue, GPU work and the logits download) for the smallest and
// the largest bucket, op by op on the eager model and replayed on the runner.
TEST_P(CudaGraphs, DecodeStepTimeEagerAndGraph) {
  ASSERT_EQ(runner_->capture_graphs(decode_buckets(8)), 4);
  for (std::int32_t bucket : {1, 8}) {
    std::vector<int> ids;
    std::vector<std::vector<std::int32_t>> prompts;
    for (int i = 0; i < bucket; ++i) {
      ids.push_back(100 * bucket + i);
      prompts.push_back(prompt(i));
    }
    step(ids, prompts, false, "prefill");
    std::vector<std::vector<std::int32_t>> next(std::size_t(bucket), std::vector<std::int32_t>{1});
    // The same decode step over and over (it rewrites one KV position), so only issue and run vary.
    std::vector<helios::PageCopy> copies;
    const helios::Step graph_step = graph_side_.step(ids, next, false, copies);
    const helios::Step eager_step = eager_side_.step(ids, next, false, copies);
    std::vector<float> logits(std::size_t(bucket) * std::size_t(vocab()));
    const SamplingPlan every_row = sampling_plan_host_only(bucket);
    StepResults results;
    const int n = 200;
    auto time_us = [&](auto&& run_once) {
      for (int i = 0; i < 10; ++i) run_once();
      const auto t0 = std::chrono::steady_clock::now();
      for (int i = 0; i < n; ++i) run_once();
      return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / n;
    };
    const double eager_us = time_us([&] {
      eager_->forward_logits(eager_step, eager_cache_);
      eager_->download_logits(0, bucket, logits);
    });
    const double graph_us = time_us([&] { runner_->run(graph_step, {}, every_row, results); });
    std::printf("[ timing   ] %-32s decode batch %d, %d layers: eager %.1f us/step, graph %.1f us/step (%.2fx)\n",
                GetParam().c_str(), bucket, eager_->spec().n_layers, eager_us, graph_us, eager_us / graph_us);
    EXPECT_GT(eager_us, 0.0);
  }
}

TEST_P(CudaGraphs, DisabledByOption) {
  std::string reason;
  auto backend = try_cuda_backend(&reason);
  auto runner = ModelStepRunner::load(std::move(backend), models_dir() / GetParam(), options(false), helios::DType::bf16);
  EXPECT_EQ(runner->capture_graphs(decode_buckets(8)), 0);
  EXPECT_EQ(runner->model().n_decode_graphs(), 0);
  EXPECT_EQ(runner->model().n_prefill_graphs(), 0);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, CudaGraphs, testing::ValuesIn(fixture_names()), [](const auto& info) {
  std::string name = info.param;
  for (char& c : name) {
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  }
  return name;
});
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(CudaGraphs);

}  // namespace
}  // namespace flare::engine

#endif  // FLARE_HAVE_CUDA
