// Prefix hits that end mid-page on the CUDA backend, with decode graphs: for every offset within a
// page, an engine first serves each reference prompt cut after 4 + offset tokens (their checkpoints
// keep a partly filled snapshot page), then the whole prompts, which hit exactly there, copy the
// snapshot page (cuMemcpyDtoDAsync on the step's stream, before the step's graph replays) and
// write on into their copy; an n = 2 request forks after the hit. Greedy continuations match
// transformers' up to the first BF16 near tie, and the decode steps still replay graphs.
#ifdef FLARE_HAVE_CUDA

#include <future>
#include <map>
#include <mutex>

#include <gtest/gtest.h>

#include "engine/engine.h"
#include "engine/model_runner.h"
#include "gpu_support.h"
#include "package/safetensors.h"
#include "../support/prefix_cut_prompts.h"

namespace flare::engine {
namespace {

using namespace helios::gpu_testing;

std::vector<std::int32_t> ints(const package::SafetensorsFile& file, const std::string& name) {
  const auto view = file.tensor(name);
  std::vector<std::int32_t> out(view.bytes.size() / sizeof(std::int32_t));
  std::memcpy(out.data(), view.bytes.data(), view.bytes.size());
  return out;
}

std::vector<float> floats(const package::SafetensorsFile& file, const std::string& name) {
  const auto view = file.tensor(name);
  std::vector<float> out(view.bytes.size() / sizeof(float));
  std::memcpy(out.data(), view.bytes.data(), view.bytes.size());
  return out;
}

class Sink : public OutputSink {
 public:
  void on_output(StepOutput output) override {
    std::lock_guard lock(mutex);
    for (auto& t : output.tokens) tokens[output.choice_index].push_back(t.token_id);
    usage = output.usage;
    if (output.finish_reason == FinishReason::error) error = output.error_message;
    if (output.request_finished) done.set_value();
  }
  std::mutex mutex;
  std::map<std::int32_t, std::vector<TokenId>> tokens;
  Usage usage;
  std::string error;
  std::promise<void> done;
};

constexpr float k_bf16_tie_margin = 0.25f;  // as cuda_graph_engine_test.cpp

class CudaPrefixSnapshots : public testing::TestWithParam<std::string> {};

TEST_P(CudaPrefixSnapshots, HitsAtEveryOffsetWithinAPageMatchTheReference) {
  const fs::path dir = test_data_dir() / "models" / GetParam();
  const auto ref = package::SafetensorsFile::open(dir / "reference.safetensors");
  EngineOptions options;
  options.max_concurrency = 6;
  options.prefill_chunk_tokens = 5;
  options.page_size_tokens = 4;
  options.n_pages = 256;
  options.context_limit = 256;
  for (std::int32_t offset = 0; offset < options.page_size_tokens; ++offset) {
    std::string reason;
    auto backend = try_cuda_backend(&reason);
    if (!backend) GTEST_SKIP() << "no CUDA backend: " << reason;
    auto runner = ModelStepRunner::load(std::move(backend), dir, options, helios::DType::bf16);
    ASSERT_GT(runner->capture_graphs(decode_buckets(options.max_concurrency)), 0);
    const ModelStepRunner* runner_view = runner.get();
    LocalEngine engine(options, std::move(runner));
    std::vector<std::vector<std::int32_t>> prompts;
    for (int i = 0; i < 4; ++i) prompts.push_back(ints(*ref, "prompt." + std::to_string(i)));
    std::vector<std::int32_t> cuts;
    testing_support::serve_cut_prompts(engine, prompts, options.page_size_tokens, offset, cuts);
    if (::testing::Test::HasFatalFailure()) return;
    std::vector<std::shared_ptr<Sink>> sinks;
    for (int i = 0; i < 4; ++i) {
      GenerationRequest request;
      request.prompt_token_ids = ints(*ref, "prompt." + std::to_string(i));
      request.max_tokens = 32;
      request.sampling.temperature = 0.0f;
      request.n = i == 1 ? 2 : 1;
      sinks.push_back(std::make_shared<Sink>());
      ASSERT_FALSE(engine.submit(request, sinks.back()).rejected);
    }
    for (int i = 0; i < 4; ++i) {
      Sink& sink = *sinks[std::size_t(i)];
      ASSERT_EQ(sink.done.get_future().wait_for(std::chrono::seconds(120)), std::future_status::ready);
      EXPECT_EQ(sink.error, "");
      EXPECT_EQ(sink.usage.n_cached_prompt_tokens, cuts[std::size_t(i)]) << "offset " << offset << " prompt " << i;
      const auto want = ints(*ref, "greedy." + std::to_string(i));
      const auto margin = floats(*ref, "margin." + std::to_string(i));
      for (auto& [choice, tokens] : sink.tokens) {
        ASSERT_EQ(tokens.size(), want.size()) << "prompt " << i << " choice " << choice;
        for (std::size_t s = 0; s < want.size() && margin[s] > k_bf16_tie_margin; ++s) {
          ASSERT_EQ(tokens[s], want[s]) << "offset " << offset << " prompt " << i << " choice " << choice
                                        << " position " << s << " (reference margin " << margin[s] << ")";
        }
      }
    }
    engine.wait_idle();
    EXPECT_GT(runner_view->model().n_graph_replays(), 0);
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, CudaPrefixSnapshots,
                         testing::Values("qwen3-gqa2-hd128-tied", "mistral-gqa2-hd64-window8",
                                         "gemma3-gqa2-hd64-window8"),
                         [](const auto& info) {
                           std::string name = info.param;
                           for (char& c : name) {
                             if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
                           }
                           return name;
                         });

}  // namespace
}  // namespace flare::engine

#endif  // FLARE_HAVE_CUDA
