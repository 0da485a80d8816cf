// Speculative decoding on the CUDA backend with the demo model: LocalEngine over a ModelStepRunner
// on CudaBackend (decode graphs captured, for the target and for the draft's one-token forwards, and
// verify graphs for the target's verify steps of 1 + 1 to 1 + 5 tokens a row, replayed for uniform
// verify steps; the verify rows' attention is the decode kernel's),
// ordinary decoding against the trained draft (learned drafts) and against history drafts. Greedy
// outputs must agree token for token up to BF16 near-ties (a verify row's GEMMs run at another m
// than a decode step's, so rounding may differ); the test prints acceptance and batch-1 tokens/s
// of each mode (a measurement, not a gate).
#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <future>
#include <mutex>

#include <nlohmann/json.hpp>

#include "../support/demo_reference.h"
#include "engine/engine.h"
#include "engine/model_runner.h"
#include "gpu_support.h"
#include "model/model.h"

namespace flare::engine {
namespace {

using helios::gpu_testing::try_cuda_backend;

class Sink : public OutputSink {
 public:
  void on_output(StepOutput output) override {
    std::lock_guard lock(mutex);
    for (auto& t : output.tokens) tokens.push_back(t.token_id);
    if (output.request_finished) done.set_value();
  }
  std::mutex mutex;
  std::vector<TokenId> tokens;
  std::promise<void> done;
};

struct Outcome {
  std::vector<std::vector<TokenId>> tokens;
  SchedulerCounters counters;
  double tokens_per_s = 0;  // batch 1, requests one after another
  std::int32_t n_verify_graphs = 0;
  std::int64_t n_graph_replays = 0;  // the target's, decode and verify steps
  std::int64_t n_verify_graph_replays = 0;
  bool ran = false;
};

enum class Mode { plain, learned, history };

Outcome run(Mode mode, const std::vector<std::vector<TokenId>>& prompts, std::string* skip) {
  Outcome out;
  auto backend = try_cuda_backend(skip);
  if (!backend) return out;
  const auto dir = testing_support::demo_model_dir(FLARE_SOURCE_DIR);
  EngineOptions options;
  options.max_concurrency = 4;
  options.prefill_chunk_tokens = 512;
  options.page_size_tokens = 16;
  options.n_pages = 1024;
  options.context_limit = 2048;
  options.max_draft_tokens = mode == Mode::plain ? 0 : 5;
  options.learned_drafts = mode == Mode::learned;
  options.history_drafts = mode == Mode::history;
  auto runner = ModelStepRunner::load(std::move(backend), dir, options, helios::DType::bf16);
  if (mode == Mode::learned) runner->attach_draft(model::Model::load(dir / "draft", runner->backend()));
  runner->capture_graphs(decode_buckets(options.max_concurrency));
  const model::Model& target = runner->model();  // owned by the engine's runner below
  out.n_verify_graphs = target.n_verify_graphs();
  LocalEngine engine(options, std::move(runner));
  auto generate = [&](const std::vector<TokenId>& prompt) {
    GenerationRequest request;
    request.prompt_token_ids = prompt;
    request.max_tokens = 128;
    request.sampling.temperature = 0.0f;
    auto sink = std::make_shared<Sink>();
    EXPECT_FALSE(engine.submit(request, sink).rejected);
    EXPECT_EQ(sink->done.get_future().wait_for(std::chrono::seconds(120)), std::future_status::ready);
    return sink->tokens;
  };
  generate(prompts[0]);  // warm-up: first-use allocations and tuning stay out of the timing
  const auto start = std::chrono::steady_clock::now();
  std::size_t n_tokens = 0;
  for (const auto& prompt : prompts) {
    out.tokens.push_back(generate(prompt));
    n_tokens += out.tokens.back().size();
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  engine.wait_idle();
  out.counters = engine.counters();
  out.tokens_per_s = double(n_tokens) / seconds;
  out.n_graph_replays = target.n_graph_replays();
  out.n_verify_graph_replays = target.n_verify_graph_replays();
  out.ran = true;
  return out;
}

TEST(CudaSpeculative, DemoModelWithItsDraftAndWithHistoryDrafts) {
  const auto dir = testing_support::demo_model_dir(FLARE_SOURCE_DIR);
  ASSERT_FALSE(dir.empty());
  std::ifstream in(dir / "samples.json");
  const auto samples = nlohmann::json::parse(in).at("samples");
  std::vector<std::vector<TokenId>> prompts;
  for (const auto& s : samples) prompts.push_back(s.at("prompt_ids").get<std::vector<TokenId>>());
  std::string skip;
  const Outcome plain = run(Mode::plain, prompts, &skip);
  if (!plain.ran) GTEST_SKIP() << "no CUDA backend: " << skip;
  for (Mode mode : {Mode::learned, Mode::history}) {
    const Outcome got = run(mode, prompts, &skip);
    ASSERT_TRUE(got.ran);
    std::size_t n_same = 0, n_all = 0;
    for (std::size_t p = 0; p < prompts.size(); ++p) {
      ASSERT_EQ(got.tokens[p].size(), plain.tokens[p].size());
      std::size_t i = 0;
      while (i < got.tokens[p].size() && got.tokens[p][i] == plain.tokens[p][i]) ++i;
      n_same += i;
      n_all += got.tokens[p].size();
    }
    const auto& c = got.counters;
    std::printf("[ demo, %s ] %zu of %zu greedy tokens identical before a first divergence; %lld verify rounds, "
                "%lld of %lld drafts accepted (%.2f tokens a round); batch 1: %.0f tokens/s against %.0f (%.2fx)\n",
                mode == Mode::learned ? "learned draft" : "history drafts", n_same, n_all,
                static_cast<long long>(c.n_verify_rows), static_cast<long long>(c.n_accepted_draft_tokens),
                static_cast<long long>(c.n_draft_tokens),
                c.n_verify_rows ? 1.0 + double(c.n_accepted_draft_tokens) / double(c.n_verify_rows) : 0.0,
                got.tokens_per_s, plain.tokens_per_s, got.tokens_per_s / plain.tokens_per_s);
    std::printf("[ demo, %s ] %d verify graphs captured; %lld target graph replays, %lld of them verify steps "
                "(ordinary decoding: %lld)\n",
                mode == Mode::learned ? "learned draft" : "history drafts", got.n_verify_graphs,
                static_cast<long long>(got.n_graph_replays), static_cast<long long>(got.n_verify_graph_replays),
                static_cast<long long>(plain.n_graph_replays));
    EXPECT_GT(c.n_accepted_draft_tokens, 0);
    // Every verify width of 1 + 1 .. 1 + 5 tokens at each of the buckets 1, 2 and 4 (token capacity
    // 128, budget 64), none without speculation.
    EXPECT_EQ(got.n_verify_graphs, 15);
    EXPECT_EQ(plain.n_verify_graphs, 0);
    // At batch 1 (requests one after another) every verify step is one row, so uniform: it replays
    // a verify graph.
    EXPECT_GE(double(got.n_verify_graph_replays), 0.9 * double(c.n_verify_rows));
    // Divergence only from BF16 rounding at near-ties: most of the text stays the same.
    EXPECT_GE(double(n_same), 0.6 * double(n_all));
  }
}

// Batches of 16 and 64 requests whose drafts the target rejects (random prompts, sampled at
// temperature 1, so the learned draft's proposals rarely match the draws): adaptive verification
// falls back to ordinary decoding where drafts do not pay, so throughput stays near it (the issue's
// goal: at least 0.97x). Prints the ratio and the verify rows per batch (a measurement, not a gate);
// asserts every request finished with all its tokens and that drafts were tried.
struct BatchOutcome {
  double tokens_per_s = 0;
  std::size_t n_tokens = 0;
  SchedulerCounters counters;
};

BatchOutcome run_batch(Mode mode, std::int32_t batch, std::string* skip, bool* ran) {
  BatchOutcome out;
  auto backend = try_cuda_backend(skip);
  *ran = backend != nullptr;
  if (!backend) return out;
  const auto dir = testing_support::demo_model_dir(FLARE_SOURCE_DIR);
  EngineOptions options;
  options.max_concurrency = batch;
  options.prefill_chunk_tokens = 512;
  options.page_size_tokens = 16;
  options.n_pages = 4096;
  options.context_limit = 2048;
  options.max_draft_tokens = mode == Mode::plain ? 0 : 5;
  options.learned_drafts = mode == Mode::learned;
  auto runner = ModelStepRunner::load(std::move(backend), dir, options, helios::DType::bf16);
  if (mode == Mode::learned) runner->attach_draft(model::Model::load(dir / "draft", runner->backend()));
  runner->capture_graphs(decode_buckets(options.max_concurrency));
  const std::int32_t vocab = runner->model().spec().vocab_size;
  LocalEngine engine(options, std::move(runner));
  auto submit_all = [&](std::uint64_t round) {
    std::vector<std::shared_ptr<Sink>> sinks;
    for (std::int32_t r = 0; r < batch; ++r) {
      GenerationRequest request;
      std::uint64_t x = 0x9e3779b97f4a7c15ull * (round * 1000 + std::uint64_t(r) + 1);
      for (int i = 0; i < 64; ++i) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        request.prompt_token_ids.push_back(TokenId(x % std::uint64_t(vocab)));
      }
      request.max_tokens = 96;
      request.ignore_eos = true;
      request.sampling.temperature = 1.0f;
      request.sampling.seed = round * 1000 + std::uint64_t(r);
      sinks.push_back(std::make_shared<Sink>());
      EXPECT_FALSE(engine.submit(request, sinks.back()).rejected);
    }
    std::size_t n = 0;
    for (auto& sink : sinks) {
      EXPECT_EQ(sink->done.get_future().wait_for(std::chrono::seconds(120)), std::future_status::ready);
      EXPECT_EQ(sink->tokens.size(), 96u);
      n += sink->tokens.size();
    }
    return n;
  };
  submit_all(0);  // warm-up: the policy's first measurements and first-use allocations
  const auto start = std::chrono::steady_clock::now();
  for (std::uint64_t round = 1; round <= 3; ++round) out.n_tokens += submit_all(round);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  engine.wait_idle();
  out.counters = engine.counters();
  out.tokens_per_s = double(out.n_tokens) / seconds;
  return out;
}

TEST(CudaSpeculative, RejectedDraftsAtBatch16And64FallBackToOrdinaryDecoding) {
  for (const std::int32_t batch : {16, 64}) {
    std::string skip;
    bool ran = false;
    const BatchOutcome plain = run_batch(Mode::plain, batch, &skip, &ran);
    if (!ran) GTEST_SKIP() << "no CUDA backend: " << skip;
    const BatchOutcome learned = run_batch(Mode::learned, batch, &skip, &ran);
    ASSERT_TRUE(ran);
    const auto& c = learned.counters;
    std::printf("[ demo, learned draft, batch %d, random prompts, temperature 1 ] %.0f tokens/s against %.0f "
                "(%.3fx); %lld verify rows, %lld of %lld drafts accepted\n",
                batch, learned.tokens_per_s, plain.tokens_per_s, learned.tokens_per_s / plain.tokens_per_s,
                static_cast<long long>(c.n_verify_rows), static_cast<long long>(c.n_accepted_draft_tokens),
                static_cast<long long>(c.n_draft_tokens));
    EXPECT_EQ(learned.n_tokens, plain.n_tokens);
    EXPECT_GT(c.n_draft_tokens, 0);  // drafts were tried (and rejected or accepted as the draws say)
  }
}

}  // namespace
}  // namespace flare::engine
