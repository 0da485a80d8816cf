// LocalEngine over real tiny random-weight checkpoints (tests/data/models) on the CPU backend:
// greedy continuations through chunked prefill, batching, n > 1 forks and prefix-cache hits match
// Hugging Face transformers' (reference.safetensors, greedy.i), up to the first near-tie.
#include <gtest/gtest.h>

#include <future>
#include <mutex>

#include "engine/engine.h"
#include "engine/model_runner.h"
#include "helios/cpu/cpu_backend.h"
#include "helios/history.h"
#include "model/architecture.h"
#include "model/spec.h"
#include "package/safetensors.h"
#include "../../support/prefix_cut_prompts.h"

namespace flare::engine {
namespace {

std::filesystem::path fixture(const std::string& name) { return std::filesystem::path(FLARE_TEST_DATA) / "models" / name; }

template <typename T>
std::vector<T> values(const package::SafetensorsFile& file, const std::string& name) {
  const auto view = file.tensor(name);
  std::vector<T> out(view.bytes.size() / sizeof(T));
  std::memcpy(out.data(), view.bytes.data(), view.bytes.size());
  return out;
}

class Sink : public OutputSink {
 public:
  void on_output(StepOutput output) override {
    std::lock_guard lock(mutex);
    for (auto& t : output.tokens) tokens[output.choice_index].push_back(t.token_id);
    usage = output.usage;
    if (output.request_finished) done.set_value();
  }
  std::mutex mutex;
  std::map<std::int32_t, std::vector<TokenId>> tokens;
  Usage usage;
  std::promise<void> done;
};

// Tokens equal up to the first position whose reference top-1/top-2 margin is a near-tie.
void expect_same_until_tie(const std::vector<TokenId>& got, const std::vector<TokenId>& want,
                           const std::vector<float>& margin, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (std::size_t i = 0; i < want.size(); ++i) {
    if (margin[i] < 1e-4f) return;
    ASSERT_EQ(got[i], want[i]) << what << " position " << i;
  }
}

class ModelEngine : public ::testing::TestWithParam<std::string> {};

EngineOptions fixture_options() {
  EngineOptions options;
  options.max_concurrency = 8;
  options.prefill_chunk_tokens = 5;  // prompts of 7, 13 and 21 tokens prefill in chunks
  options.page_size_tokens = 4;
  options.n_pages = 256;
  options.context_limit = 256;
  return options;
}

// Two rounds of four prompts (one with n = 2): greedy tokens as transformers', and the second
// round's prompts from the prefix cache, all but their last token (the hits end mid-page: the
// request copies the checkpoint's partial page before writing into it).
void expect_rounds_match_transformers(const std::filesystem::path& dir, const EngineOptions& options) {
  const auto ref = package::SafetensorsFile::open(dir / "reference.safetensors");
  auto runner = ModelStepRunner::load(std::make_unique<helios::cpu::CpuBackend>(2), dir, options, helios::DType::f32);
  LocalEngine engine(options, std::move(runner));
  for (int round = 0; round < 2; ++round) {  // the second round hits the prefix cache
    std::vector<std::shared_ptr<Sink>> sinks;
    for (int i = 0; i < 4; ++i) {
      GenerationRequest request;
      request.prompt_token_ids = values<std::int32_t>(*ref, "prompt." + std::to_string(i));
      request.max_tokens = 32;
      request.sampling.temperature = 0.0f;
      request.n = i == 1 ? 2 : 1;
      sinks.push_back(std::make_shared<Sink>());
      ASSERT_FALSE(engine.submit(request, sinks.back()).rejected);
    }
    for (int i = 0; i < 4; ++i) {
      ASSERT_EQ(sinks[std::size_t(i)]->done.get_future().wait_for(std::chrono::seconds(120)), std::future_status::ready);
      const auto want = values<std::int32_t>(*ref, "greedy." + std::to_string(i));
      const auto margin = values<float>(*ref, "margin." + std::to_string(i));
      for (auto& [choice, tokens] : sinks[std::size_t(i)]->tokens) {
        expect_same_until_tie(tokens, want, margin,
                              "round " + std::to_string(round) + " prompt " + std::to_string(i) + " choice " +
                                  std::to_string(choice));
      }
      const auto n_prompt = std::int32_t(values<std::int32_t>(*ref, "prompt." + std::to_string(i)).size());
      const auto cached = sinks[std::size_t(i)]->usage.n_cached_prompt_tokens;
      if (round == 0) EXPECT_EQ(cached, 0);
      else EXPECT_EQ(cached, n_prompt - 1) << "prompt " << i;  // a partial page's hit: 7, 13 and 21 tokens are no whole pages
    }
  }
  engine.wait_idle();
  EXPECT_GT(engine.stats().n_prefix_hit_tokens, 0);
}

// Hits at every offset within a page: each engine first serves every prompt cut after
// 4 + offset tokens (one token generated), whose checkpoints end there; the whole prompts then hit
// exactly there (copying the partial page before writing into it) and still generate
// transformers' greedy tokens, with n = 2 forking after the hit. small_pool: a pool too small for
// the whole prompts' five sequences at once, so they wait, evict checkpoints or preempt.
void expect_partial_hits_match_transformers(const std::filesystem::path& dir, const EngineOptions& options) {
  const auto ref = package::SafetensorsFile::open(dir / "reference.safetensors");
  for (std::int32_t offset = 0; offset < options.page_size_tokens; ++offset) {
    auto runner = ModelStepRunner::load(std::make_unique<helios::cpu::CpuBackend>(2), dir, options, helios::DType::f32);
    LocalEngine engine(options, std::move(runner));
    std::vector<std::vector<std::int32_t>> prompts;
    for (int i = 0; i < 4; ++i) prompts.push_back(values<std::int32_t>(*ref, "prompt." + std::to_string(i)));
    std::vector<std::int32_t> cuts;
    testing_support::serve_cut_prompts(engine, prompts, options.page_size_tokens, offset, cuts);
    if (::testing::Test::HasFatalFailure()) return;
    std::vector<std::shared_ptr<Sink>> sinks;
    for (int i = 0; i < 4; ++i) {
      GenerationRequest request;
      request.prompt_token_ids = values<std::int32_t>(*ref, "prompt." + std::to_string(i));
      request.max_tokens = 32;
      request.sampling.temperature = 0.0f;
      request.n = i == 1 ? 2 : 1;
      sinks.push_back(std::make_shared<Sink>());
      ASSERT_FALSE(engine.submit(request, sinks.back()).rejected);
    }
    for (int i = 0; i < 4; ++i) {
      ASSERT_EQ(sinks[std::size_t(i)]->done.get_future().wait_for(std::chrono::seconds(120)), std::future_status::ready);
      const auto want = values<std::int32_t>(*ref, "greedy." + std::to_string(i));
      const auto margin = values<float>(*ref, "margin." + std::to_string(i));
      for (auto& [choice, tokens] : sinks[std::size_t(i)]->tokens) {
        expect_same_until_tie(tokens, want, margin,
                              "offset " + std::to_string(offset) + " prompt " + std::to_string(i) + " choice " +
                                  std::to_string(choice));
      }
      // Preemption may recompute a prompt, but usage reports the first admission's hit.
      EXPECT_EQ(sinks[std::size_t(i)]->usage.n_cached_prompt_tokens, cuts[std::size_t(i)]) << "prompt " << i;
    }
    engine.wait_idle();
  }
}

EngineOptions small_pool(EngineOptions options) {
  options.n_pages = 40;  // the five sequences of the whole prompts want up to 70 pages of 4 tokens
  return options;
}

TEST_P(ModelEngine, GreedyMatchesTransformersThroughBatchingChunksForksAndCache) {
  expect_rounds_match_transformers(fixture(GetParam()), fixture_options());
}

TEST_P(ModelEngine, GreedyMatchesTransformersAfterHitsAtEveryOffsetWithinAPage) {
  expect_partial_hits_match_transformers(fixture(GetParam()), fixture_options());
  expect_partial_hits_match_transformers(fixture(GetParam()), small_pool(fixture_options()));
}

INSTANTIATE_TEST_SUITE_P(Fixtures, ModelEngine,
                         ::testing::Values("qwen3-gqa2-hd128-tied", "mistral-gqa2-hd64-window8",
                                           "llama-gqa4-hd64-tied-llama3"));

// Sliding-window layers in pools of their own that give pages back as the window moves on: the
// same tokens, with a window pool far smaller than the sequences' pages (five sequences of up to
// 53 tokens hold 70 pages of 4 tokens; the window pools hold 6 per concurrency slot).
class WindowedModelEngine : public ::testing::TestWithParam<std::string> {};

EngineOptions windowed_options(const std::filesystem::path& dir, EngineOptions options) {
  const model::ModelSpec spec = model::model_spec_load(dir);
  const auto groups = helios::history_groups(model::architecture_of(spec).history(spec));
  bool windowed = false;
  for (const helios::HistoryGroup& group : groups) {
    const std::int32_t window_pages =
        helios::history_window_pages(group.window(), options.prefill_chunk_tokens, options.page_size_tokens);
    const bool own_pool = group.window() > 0 && options.kv_groups.size() > 0;  // after a token-sized group 0
    options.kv_groups.push_back({own_pool ? options.max_concurrency * window_pages : options.n_pages, group.window()});
    windowed = windowed || group.window() > 0;
  }
  EXPECT_TRUE(windowed) << dir << " has no sliding layer";
  return options;
}

TEST_P(WindowedModelEngine, GreedyMatchesTransformersWithWindowPoolsGivingPagesBack) {
  const auto dir = fixture(GetParam());
  expect_rounds_match_transformers(dir, windowed_options(dir, fixture_options()));
}

TEST_P(WindowedModelEngine, GreedyMatchesTransformersAfterHitsAtEveryOffsetWithinAPage) {
  const auto dir = fixture(GetParam());
  expect_partial_hits_match_transformers(dir, windowed_options(dir, fixture_options()));
  expect_partial_hits_match_transformers(dir, windowed_options(dir, small_pool(fixture_options())));
}

INSTANTIATE_TEST_SUITE_P(Fixtures, WindowedModelEngine,
                         ::testing::Values("gemma3-gqa2-hd64-window8", "gemma3-gqa2-hd256-untied-window16",
                                           "mistral-gqa2-hd64-window8", "mixtral-e4-top2-window8",
                                           "gptoss-e4-top2-mxfp4-window8"));

}  // namespace
}  // namespace flare::engine
