// The step executor's graph policy on the CPU: a CPU backend that "captures" a step by keeping the
// program's enqueue and "replays" it by running it again stands in for CUDA graphs. Whatever the
// executor replays (padded decode steps, prefill chunks, recaptures after the arena moved) must
// give exactly the logits an eager run gives, which holds only if a program's enqueue reads its
// per-step inputs from the buffers the upload fills, as a real graph does.
#include <gtest/gtest.h>

#include <cstring>
#include <functional>

#include "harness.h"
#include "helios/step_executor.h"

namespace flare::model {
namespace {

using helios::DType;

class ReplayingCpuBackend final : public helios::cpu::CpuBackend {
 public:
  ReplayingCpuBackend() : CpuBackend(2) {}
  bool supports_graphs() const override { return true; }
  std::unique_ptr<helios::StepGraph> capture(const std::function<void()>& enqueue) override {
    ++n_captures;
    return std::make_unique<Recording>(enqueue);
  }
  void replay(const helios::StepGraph& graph) override {
    ++n_replays;
    static_cast<const Recording&>(graph).enqueue();
  }
  int n_captures = 0, n_replays = 0;

 private:
  struct Recording final : helios::StepGraph {
    explicit Recording(std::function<void()> f) : enqueue(std::move(f)) {}
    std::size_t n_nodes() const override { return 1; }
    std::function<void()> enqueue;
  };
};

// Builds steps for sequences kept in a page pool (pages [0, n_pages); the scratch page lies past them).
struct Sequences {
  helios::PagePool pool;
  std::vector<helios::SequencePages> seqs;
  std::int32_t page_size;
  Sequences(std::int32_t n_pages, std::int32_t n_seqs, std::int32_t page) : pool(n_pages), page_size(page) {
    for (std::int32_t i = 0; i < n_seqs; ++i) seqs.emplace_back(pool, page);
  }
  // One row per entry of `tokens`, for sequences first, first + 1, ...
  helios::Step step(const std::vector<std::vector<std::int32_t>>& tokens, std::size_t first = 0) {
    helios::Step step;
    std::vector<helios::PageCopy> copies;
    for (std::size_t r = 0; r < tokens.size(); ++r) {
      const std::size_t i = first + r;
      helios::StepRow row;
      row.start_position = seqs[i].n_tokens();
      row.n_tokens = std::int32_t(tokens[r].size());
      row.n_logits = 1;
      EXPECT_TRUE(seqs[i].append(row.n_tokens, copies));
      row.first_block = std::int32_t(step.block_tables.size());
      row.n_blocks = std::int32_t(seqs[i].pages().size());
      step.block_tables.insert(step.block_tables.end(), seqs[i].pages().begin(), seqs[i].pages().end());
      step.tokens.insert(step.tokens.end(), tokens[r].begin(), tokens[r].end());
      step.rows.push_back(row);
    }
    return step;
  }
};

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

void expect_replays_match_eager(const std::string& fixture) {
  SCOPED_TRACE(fixture);
  const auto dir = testing::models_dir() / fixture;
  helios::cpu::CpuBackend eager_backend(2);
  ReplayingCpuBackend graph_backend;
  auto eager = Model::load(dir, eager_backend);
  auto graphed = Model::load(dir, graph_backend);
  const std::int32_t n_pages = 64, page = 4, scratch = n_pages, chunk = 8;
  helios::HistoryCaches eager_cache = helios::history_allocate(eager_backend, eager->kv_cache_layout(n_pages + 1, page, DType::f32));
  helios::HistoryCaches graph_cache = helios::history_allocate(graph_backend, graphed->kv_cache_layout(n_pages + 1, page, DType::f32));
  graphed->reserve(20, 4, 4, 4 * 20);  // room for the prompts below
  for (const std::int32_t rows : {4, 2, 1}) ASSERT_TRUE(graphed->capture_decode_graph(rows, graph_cache, {scratch}));
  ASSERT_TRUE(graphed->capture_prefill_graph(chunk, 1, graph_cache, {scratch}));
  EXPECT_EQ(graphed->n_decode_graphs(), 3);
  EXPECT_EQ(graphed->n_prefill_graphs(), 1);
  const int captures_at_start = graph_backend.n_captures;

  const std::int32_t vocab = eager->spec().vocab_size;
  Sequences a(n_pages, 3, page), b(n_pages, 3, page);
  // Prompts: one full prefill chunk (a replay), then the other two together (eager: not uniform).
  std::vector<std::vector<std::int32_t>> prompts;
  for (std::int32_t i = 0; i < 3; ++i) {
    std::vector<std::int32_t> prompt;
    for (std::int32_t t = 0; t < (i == 0 ? chunk : 3 + 4 * i); ++t) prompt.push_back((17 * t + 29 * i + 3) % vocab);
    prompts.push_back(prompt);
  }
  const auto first = [&](Sequences& s) { return s.step({prompts[0]}); };
  EXPECT_TRUE(same_bits(graphed->forward(first(b), graph_cache), eager->forward(first(a), eager_cache)));
  EXPECT_EQ(graph_backend.n_replays, 1);
  const auto rest = [&](Sequences& s) { return s.step({prompts[1], prompts[2]}, 1); };
  EXPECT_TRUE(same_bits(graphed->forward(rest(b), graph_cache), eager->forward(rest(a), eager_cache)));
  EXPECT_EQ(graph_backend.n_replays, 1);
  // Decode steps of three rows run the 4-row graph, padded with a dummy row on the scratch page.
  for (std::int32_t s = 0; s < 4; ++s) {
    std::vector<std::vector<std::int32_t>> tokens;
    for (std::int32_t i = 0; i < 3; ++i) tokens.push_back({(41 * s + 7 * i + 1) % vocab});
    const std::vector<float> want = eager->forward(a.step(tokens), eager_cache);
    const std::vector<float> got = graphed->forward(b.step(tokens), graph_cache);
    EXPECT_TRUE(same_bits(got, want)) << "decode step " << s;
  }
  EXPECT_EQ(graph_backend.n_replays, 5);
  EXPECT_EQ(graph_backend.n_captures, captures_at_start);
  // A step larger than reserved grows the arena: the next decode step recaptures, then replays.
  std::vector<std::int32_t> long_prompt(40, 5);
  Sequences c(n_pages, 1, page), d(n_pages, 1, page);
  helios::HistoryCaches eager_cache2 = helios::history_allocate(eager_backend, eager->kv_cache_layout(n_pages + 1, page, DType::f32));
  helios::HistoryCaches graph_cache2 = helios::history_allocate(graph_backend, graphed->kv_cache_layout(n_pages + 1, page, DType::f32));
  EXPECT_TRUE(same_bits(graphed->forward(d.step({long_prompt}), graph_cache2),
                        eager->forward(c.step({long_prompt}), eager_cache2)));
  EXPECT_EQ(graph_backend.n_replays, 5) << "no graph has that shape";
  EXPECT_TRUE(same_bits(graphed->forward(d.step({{9}}), graph_cache2), eager->forward(c.step({{9}}), eager_cache2)));
  EXPECT_EQ(graph_backend.n_replays, 5) << "a decode step on another cache runs eagerly";
  std::vector<std::vector<std::int32_t>> tokens{{1}, {2}, {3}};
  EXPECT_TRUE(same_bits(graphed->forward(b.step(tokens), graph_cache), eager->forward(a.step(tokens), eager_cache)));
  EXPECT_EQ(graph_backend.n_captures, captures_at_start + 1);
  EXPECT_EQ(graph_backend.n_replays, 6);
}

TEST(StepExecutor, ReplaysGiveTheEagerLogitsBitForBit) {
  expect_replays_match_eager("qwen3-gqa2-hd128-tied");
  expect_replays_match_eager("llama-gqa2-hd64-dynamic-fp32");  // per-row rope tables uploaded each step
  expect_replays_match_eager("mistral-gqa2-hd64-window8");     // sliding window
}

TEST(StepExecutor, ArenaBuffersAreNamed) {
  helios::cpu::CpuBackend backend(2);
  auto model = Model::load(testing::models_dir() / "qwen3-gqa2-hd128-tied", backend);
  model->reserve(4, 1, 1);
  const helios::ActivationArena& arena = model->executor().arena();
  for (const char* name : {"logits", "x", "h", "qkv", "attn", "delta", "gate_up", "act", "logit_in"}) {
    EXPECT_GE(arena.find(name), 0) << name;
  }
  EXPECT_EQ(arena.find("logits"), helios::k_arena_logits);
  EXPECT_EQ(arena.find("no such buffer"), -1);
}

}  // namespace
}  // namespace flare::model
