// Sliding-window pools on the CUDA backend (helios/history_pages.h): the engine serving every
// fixture with sliding layers, its window groups in pools of a few pages per slot that give pages
// back as the window moves on (released blocks naming each group's scratch page), produces the
// same greedy tokens, through decode graphs, chunked prefill, an n = 2 fork and prefix hits, as the
// engine whose every group follows one pool that keeps every page.
#ifdef FLARE_HAVE_CUDA

#include <future>
#include <mutex>

#include <gtest/gtest.h>

#include "engine/engine.h"
#include "engine/model_runner.h"
#include "gpu_support.h"
#include "helios/history.h"
#include "model/architecture.h"
#include "model/spec.h"
#include "package/safetensors.h"

namespace flare::engine {
namespace {

using namespace helios::gpu_testing;

class Sink : public OutputSink {
 public:
  void on_output(StepOutput output) override {
    std::lock_guard lock(mutex);
    for (auto& t : output.tokens) tokens[output.choice_index].push_back(t.token_id);
    if (output.finish_reason == FinishReason::error) error = output.error_message;
    if (output.request_finished) done.set_value();
  }
  std::mutex mutex;
  std::map<std::int32_t, std::vector<TokenId>> tokens;
  std::string error;
  std::promise<void> done;
};

EngineOptions base_options() {
  EngineOptions o;
  o.max_concurrency = 8;
  o.prefill_chunk_tokens = 8;
  o.page_size_tokens = 4;
  o.n_pages = 512;
  o.context_limit = 256;
  return o;
}

// Greedy tokens of every prompt of the fixture's reference (twice: the second round hits the
// prefix cache), by round, prompt and choice.
std::vector<std::map<std::int32_t, std::vector<TokenId>>> serve(const fs::path& dir, const EngineOptions& options,
                                                                 std::string* skip) {
  auto backend = try_cuda_backend(skip);
  if (!backend) return {};
  const auto ref = package::SafetensorsFile::open(dir / "reference.safetensors");
  auto runner = ModelStepRunner::load(std::move(backend), dir, options, helios::DType::bf16);
  runner->capture_graphs(decode_buckets(options.max_concurrency));
  LocalEngine engine(options, std::move(runner));
  std::vector<std::map<std::int32_t, std::vector<TokenId>>> out;
  for (int round = 0; round < 2; ++round) {
    std::vector<std::shared_ptr<Sink>> sinks;
    for (int i = 0; ref->find("prompt." + std::to_string(i)) != nullptr; ++i) {
      const auto view = ref->tensor("prompt." + std::to_string(i));
      GenerationRequest request;
      request.prompt_token_ids.resize(view.bytes.size() / 4);
      std::memcpy(request.prompt_token_ids.data(), view.bytes.data(), view.bytes.size());
      request.max_tokens = 48;
      request.sampling.temperature = 0.0f;
      request.n = i == 1 ? 2 : 1;
      sinks.push_back(std::make_shared<Sink>());
      EXPECT_FALSE(engine.submit(request, sinks.back()).rejected);
    }
    for (auto& sink : sinks) {
      EXPECT_EQ(sink->done.get_future().wait_for(std::chrono::seconds(120)), std::future_status::ready);
      EXPECT_EQ(sink->error, "");
      out.push_back(sink->tokens);
    }
  }
  return out;
}

class CudaWindowPools : public ::testing::TestWithParam<std::string> {};

TEST_P(CudaWindowPools, ServeTheSameTokensAsOnePoolThatKeepsEveryPage) {
  const fs::path dir = test_data_dir() / "models" / GetParam();
  std::string skip;
  const auto shared = serve(dir, base_options(), &skip);
  if (!skip.empty()) GTEST_SKIP() << "no CUDA backend: " << skip;
  EngineOptions windowed = base_options();
  const model::ModelSpec spec = model::model_spec_load(dir);
  for (const helios::HistoryGroup& group : helios::history_groups(model::architecture_of(spec).history(spec))) {
    const bool own_pool = group.window() > 0 && !windowed.kv_groups.empty();
    const std::int32_t pages = helios::history_window_pool_pages(group.window(), windowed.max_concurrency,
                                                                 windowed.prefill_chunk_tokens, windowed.page_size_tokens);
    windowed.kv_groups.push_back({own_pool ? pages : windowed.n_pages, group.window()});
  }
  const auto got = serve(dir, windowed, &skip);
  ASSERT_EQ(got.size(), shared.size());
  for (std::size_t i = 0; i < got.size(); ++i) EXPECT_EQ(got[i], shared[i]) << "request " << i;
}

INSTANTIATE_TEST_SUITE_P(Fixtures, CudaWindowPools,
                         ::testing::Values("gemma3-gqa2-hd64-window8", "gemma3-gqa2-hd256-untied-window16",
                                           "mistral-gqa2-hd64-window8", "gptoss-e4-top2-mxfp4-window8"));

}  // namespace
}  // namespace flare::engine

#endif  // FLARE_HAVE_CUDA
