// The engine sampling on the CUDA backend: LocalEngine over a ModelStepRunner on CudaBackend with
// decode graphs, where the scheduler's plan leaves most rows to CudaBackend::sample. A checking
// runner also downloads those rows and samples each on the host (helios::sample_token) with the
// same request: every device token must be the host's, top logprob ids too, logprobs within 2e-4
// (cuda_sampling_test's bound), over seeded temperature, top-p, top-k, min-p, penalties, biases,
// top logprobs and min_tokens, in steps that mix device rows with host rows (prompt logprobs, the
// row n = 2 choices fork from). Skips without a GPU.
#ifdef FLARE_HAVE_CUDA

#include <algorithm>
#include <cctype>
#include <cmath>
#include <future>
#include <map>
#include <mutex>

#include <gtest/gtest.h>

#include "engine/engine.h"
#include "engine/model_runner.h"
#include "gpu_support.h"

namespace flare::engine {
namespace {

using namespace helios::gpu_testing;

// Runs the plan with its sampled rows downloaded as well, and checks each device draw against the
// host sampler on those very logits; hands the engine exactly what the plan asked for.
class CheckingRunner final : public StepRunner {
 public:
  explicit CheckingRunner(std::unique_ptr<ModelStepRunner> inner) : inner_(std::move(inner)) {}
  std::int32_t vocab_size() const override { return inner_->vocab_size(); }
  void bind_thread() override { inner_->bind_thread(); }
  void run(const helios::Step& step, std::span<const helios::PageCopy> copies, const SamplingPlan& plan,
           StepResults& out) override {
    SamplingPlan checked;  // its requests still point at plan.params, alive for this call
    checked.sampled_rows = plan.sampled_rows;
    checked.requests = plan.requests;
    std::set_union(plan.host_rows.begin(), plan.host_rows.end(), plan.sampled_rows.begin(), plan.sampled_rows.end(),
                   std::back_inserter(checked.host_rows));
    inner_->run(step, copies, checked, both_);
    const auto vocab = std::size_t(vocab_size());
    auto host_row = [&](std::int32_t row) {
      const auto at = std::lower_bound(checked.host_rows.begin(), checked.host_rows.end(), row) - checked.host_rows.begin();
      return std::span<const float>(both_.host_logits).subspan(std::size_t(at) * vocab, vocab);
    };
    for (std::size_t i = 0; i < plan.sampled_rows.size(); ++i) {
      const helios::SampleRequest& q = plan.requests[i];
      const helios::SampledToken want = helios::sample_token(host_row(plan.sampled_rows[i]), *q.params, q.history, q.output_index);
      const helios::SampledToken& got = both_.sampled[i];
      std::lock_guard lock(mutex);
      ++n_checked;
      bool same = got.token == want.token && got.top_logprobs.size() == want.top_logprobs.size();
      max_logprob_error = std::max(max_logprob_error, double(std::fabs(got.logprob - want.logprob)));
      for (std::size_t k = 0; same && k < want.top_logprobs.size(); ++k) {
        same = got.top_logprobs[k].first == want.top_logprobs[k].first;
        max_logprob_error = std::max(max_logprob_error, double(std::fabs(got.top_logprobs[k].second - want.top_logprobs[k].second)));
      }
      if (!same && n_mismatches++ < 5) {
        ADD_FAILURE() << "device token " << got.token << " vs host " << want.token << " (output index " << q.output_index
                      << ", seed " << q.params->seed << ", temperature " << q.params->temperature << ")";
      }
    }
    n_host_rows += std::int64_t(plan.host_rows.size());
    out.sampled = both_.sampled;
    out.host_logits.clear();
    for (std::int32_t row : plan.host_rows) {
      const auto logits = host_row(row);
      out.host_logits.insert(out.host_logits.end(), logits.begin(), logits.end());
    }
  }
  const ModelStepRunner& inner() const { return *inner_; }

  std::mutex mutex;
  std::int64_t n_checked = 0, n_mismatches = 0, n_host_rows = 0;
  double max_logprob_error = 0.0;

 private:
  std::unique_ptr<ModelStepRunner> inner_;
  StepResults both_;
};

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

std::vector<GenerationRequest> requests(std::int32_t vocab, int wave) {
  auto prompt = [&](int i) {
    std::vector<TokenId> p;
    for (int t = 0; t < 5 + 4 * i + wave; ++t) p.push_back((29 * t + 13 * i + 7 * wave + 3) % vocab);
    return p;
  };
  std::vector<GenerationRequest> out(4);
  out[0].sampling.temperature = 0.8f;
  out[0].sampling.top_p = 0.9f;
  out[0].logprobs = true;
  out[0].top_logprobs = 5;
  out[1].sampling.temperature = 1.0f;
  out[1].sampling.top_k = 40;
  out[1].sampling.presence_penalty = 0.5f;
  out[1].sampling.frequency_penalty = 0.3f;
  out[1].sampling.repetition_penalty = 1.3f;
  out[1].sampling.logit_bias = {{7, 3.0f}, {11, -2.0f}};
  out[1].n = 2;
  out[2].sampling.temperature = 0.7f;
  out[2].sampling.min_p = 0.05f;
  out[2].min_tokens = 8;
  out[2].stop_token_ids = {1, 2};
  out[2].prompt_logprobs = true;
  out[2].logprobs = true;
  out[2].top_logprobs = 2;
  out[3].sampling.temperature = 0.0f;
  for (int i = 0; i < 4; ++i) {
    out[std::size_t(i)].prompt_token_ids = prompt(i);
    out[std::size_t(i)].max_tokens = 24;
    if (i < 3) out[std::size_t(i)].sampling.seed = 1000 + std::uint64_t(10 * wave + i);
  }
  return out;
}

class CudaEngineSampling : public testing::TestWithParam<std::string> {};

TEST_P(CudaEngineSampling, DeviceDrawsEqualTheHostSamplerOnTheSameLogits) {
  std::string reason;
  auto backend = try_cuda_backend(&reason);
  if (!backend) GTEST_SKIP() << "no CUDA backend: " << reason;
  EngineOptions options;
  options.max_concurrency = 6;  // buckets 1, 2, 4, 8
  options.prefill_chunk_tokens = 8;
  options.page_size_tokens = 4;
  options.n_pages = 256;
  options.context_limit = 256;
  options.eos_token_ids = {};
  auto model_runner = ModelStepRunner::load(std::move(backend), test_data_dir() / "models" / GetParam(), options,
                                            helios::DType::bf16);
  ASSERT_EQ(model_runner->capture_graphs(decode_buckets(options.max_concurrency)), 4);
  auto checking = std::make_unique<CheckingRunner>(std::move(model_runner));
  CheckingRunner* check = checking.get();
  const std::int32_t vocab = check->vocab_size();
  LocalEngine engine(options, std::move(checking));
  for (int wave = 0; wave < 2; ++wave) {
    std::vector<std::shared_ptr<Sink>> sinks;
    for (auto& request : requests(vocab, wave)) {
      sinks.push_back(std::make_shared<Sink>());
      ASSERT_FALSE(engine.submit(request, sinks.back()).rejected);
    }
    for (auto& sink : sinks) {
      ASSERT_EQ(sink->done.get_future().wait_for(std::chrono::seconds(120)), std::future_status::ready);
    }
  }
  engine.wait_idle();
  std::lock_guard lock(check->mutex);
  const std::int64_t n_steps = engine.counters().n_steps, n_replays = check->inner().model().n_graph_replays();
  std::printf("[ %s ] %lld device draws equal the host's (max logprob error %.2e), %lld host rows; %lld of %lld steps "
              "replayed a graph\n",
              GetParam().c_str(), static_cast<long long>(check->n_checked), check->max_logprob_error,
              static_cast<long long>(check->n_host_rows), static_cast<long long>(n_replays),
              static_cast<long long>(n_steps));
  EXPECT_EQ(check->n_mismatches, 0);
  EXPECT_GT(check->n_checked, 100);
  EXPECT_GT(check->n_host_rows, 0);  // prompt logprobs and forks took the host path
  EXPECT_LE(check->max_logprob_error, 2e-4);
  EXPECT_GT(n_replays, 0);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, CudaEngineSampling,
                         testing::Values("qwen3-gqa2-hd128-tied", "llama-gqa4-hd64-tied-llama3"),
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
