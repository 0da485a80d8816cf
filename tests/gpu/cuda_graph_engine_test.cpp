// The engine over the CUDA backend with decode graphs: LocalEngine batches, chunks, forks (n = 2)
// and serves prefix-cache hits while its ModelStepRunner pads decode steps to buckets and replays
// their graphs; greedy continuations still match transformers' reference up to the first position
// whose reference top-1/top-2 margin is within BF16 noise, and most steps ran through graphs.
#ifdef FLARE_HAVE_CUDA

#include <future>
#include <map>
#include <mutex>

#include <gtest/gtest.h>

#include "engine/engine.h"
#include "engine/model_runner.h"
#include "gpu_support.h"
#include "package/safetensors.h"

namespace flare::engine {
namespace {

using namespace helios::gpu_testing;

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
    if (output.request_finished) done.set_value();
  }
  std::mutex mutex;
  std::map<std::int32_t, std::vector<TokenId>> tokens;
  std::promise<void> done;
};

// Logits margins below this are BF16 near-ties, where the GPU may legitimately pick the other token.
constexpr float k_bf16_tie_margin = 0.25f;

class CudaGraphEngine : public testing::TestWithParam<std::string> {};

TEST_P(CudaGraphEngine, GreedyMatchesReferenceWithDecodeGraphs) {
  std::string reason;
  auto backend = try_cuda_backend(&reason);
  if (!backend) GTEST_SKIP() << "no CUDA backend: " << reason;
  const fs::path dir = test_data_dir() / "models" / GetParam();
  const auto ref = package::SafetensorsFile::open(dir / "reference.safetensors");
  EngineOptions options;
  options.max_concurrency = 6;  // buckets 1, 2, 4, 8: five rows pad to 8, three to 4
  options.prefill_chunk_tokens = 5;
  options.page_size_tokens = 4;
  options.n_pages = 256;
  options.context_limit = 256;
  auto runner = ModelStepRunner::load(std::move(backend), dir, options, helios::DType::bf16);
  ASSERT_EQ(runner->capture_graphs(decode_buckets(options.max_concurrency)), 4);
  const ModelStepRunner* runner_view = runner.get();
  LocalEngine engine(options, std::move(runner));
  std::int32_t n_checked = 0, n_total = 0;
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
        ASSERT_EQ(tokens.size(), want.size()) << "prompt " << i << " choice " << choice;
        n_total += std::int32_t(want.size());
        for (std::size_t s = 0; s < want.size(); ++s) {
          if (margin[s] <= k_bf16_tie_margin) break;
          ++n_checked;
          ASSERT_EQ(tokens[s], want[s]) << "round " << round << " prompt " << i << " choice " << choice << " position "
                                        << s << " (reference margin " << margin[s] << ")";
        }
      }
    }
  }
  engine.wait_idle();
  const std::int64_t n_steps = engine.counters().n_steps, n_replays = runner_view->model().n_graph_replays();
  std::printf("[ %s ] engine: %d/%d greedy tokens checked before a near tie; %lld of %lld steps replayed a graph\n",
              GetParam().c_str(), n_checked, n_total, static_cast<long long>(n_replays), static_cast<long long>(n_steps));
  EXPECT_GT(n_replays, 0);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, CudaGraphEngine,
                         testing::Values("qwen3-gqa2-hd128-tied", "mistral-gqa2-hd64-window8",
                                         "llama-gqa4-hd64-tied-llama3", "llama-gqa2-hd64-dynamic-fp32"),
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
