// Speculative decoding over real models on the CPU backend: with history drafts, every
// architecture's greedy and seeded sampled outputs equal ordinary decoding's token for token,
// through batching, n > 1 and prefix-cache hits, and the page pool returns to idle. The demo model
// (trained; its greedy code repeats) shows drafts being accepted and steps saved.
#include <gtest/gtest.h>

#include <fstream>
#include <future>
#include <mutex>

#include <nlohmann/json.hpp>

#include "../../support/demo_reference.h"
#include "engine/engine.h"
#include "engine/model_runner.h"
#include "helios/cpu/cpu_backend.h"

namespace flare::engine {
namespace {

class Sink : public OutputSink {
 public:
  void on_output(StepOutput output) override {
    std::lock_guard lock(mutex);
    for (auto& t : output.tokens) tokens[output.choice_index].push_back(t);
    if (output.request_finished) done.set_value();
  }
  std::mutex mutex;
  std::map<std::int32_t, std::vector<TokenOutput>> tokens;
  std::promise<void> done;
};

struct Outcome {
  std::vector<std::map<std::int32_t, std::vector<TokenOutput>>> tokens;  // per request
  SchedulerCounters counters;
};

// Runs the requests twice (the second round hits the prefix cache) on one engine.
Outcome run(const std::filesystem::path& dir, const std::vector<GenerationRequest>& requests, std::int32_t max_drafts,
            const std::filesystem::path& draft_dir = {}) {
  EngineOptions options;
  options.max_concurrency = 6;
  options.prefill_chunk_tokens = 7;
  options.page_size_tokens = 4;
  options.n_pages = 512;
  options.context_limit = 512;
  options.max_draft_tokens = max_drafts;
  options.history_drafts = max_drafts > 0 && draft_dir.empty();
  options.learned_drafts = max_drafts > 0 && !draft_dir.empty();
  // Every round drafts the full count: these tests check what verification computes and accepts;
  // adaptive verification would follow this machine's measured step times (verify_policy_test).
  options.adaptive_verification = false;
  auto runner = ModelStepRunner::load(std::make_unique<helios::cpu::CpuBackend>(2), dir, options, helios::DType::f32);
  if (options.learned_drafts) {
    runner->attach_draft(model::Model::load(draft_dir, runner->backend()));
  }
  LocalEngine engine(options, std::move(runner));
  Outcome out;
  for (int round = 0; round < 2; ++round) {
    std::vector<std::shared_ptr<Sink>> sinks;
    for (const auto& request : requests) {
      sinks.push_back(std::make_shared<Sink>());
      EXPECT_FALSE(engine.submit(request, sinks.back()).rejected);
    }
    for (auto& sink : sinks) {
      EXPECT_EQ(sink->done.get_future().wait_for(std::chrono::seconds(300)), std::future_status::ready);
      out.tokens.push_back(sink->tokens);
    }
  }
  engine.wait_idle();
  out.counters = engine.counters();
  const EngineStats stats = engine.stats();
  EXPECT_EQ(stats.n_running + stats.n_waiting, 0);
  return out;
}

void expect_same_tokens(const Outcome& speculative, const Outcome& plain) {
  ASSERT_EQ(speculative.tokens.size(), plain.tokens.size());
  for (std::size_t r = 0; r < plain.tokens.size(); ++r) {
    for (const auto& [choice, want] : plain.tokens[r]) {
      const auto& got = speculative.tokens[r].at(choice);
      ASSERT_EQ(got.size(), want.size()) << "request " << r << " choice " << choice;
      for (std::size_t i = 0; i < want.size(); ++i) {
        ASSERT_EQ(got[i].token_id, want[i].token_id) << "request " << r << " choice " << choice << " token " << i;
        EXPECT_NEAR(got[i].logprob, want[i].logprob, 1e-4f) << "request " << r << " token " << i;
      }
    }
  }
}

// A prompt that quotes itself, so history drafts have something to copy.
std::vector<TokenId> quoting_prompt(std::int32_t vocab, std::int32_t seed) {
  std::vector<TokenId> span;
  for (std::int32_t i = 0; i < 12; ++i) span.push_back((seed * 131 + i * 37) % vocab);
  std::vector<TokenId> prompt = span;
  prompt.push_back((seed * 7 + 3) % vocab);
  prompt.insert(prompt.end(), span.begin(), span.begin() + 4);
  return prompt;
}

std::vector<GenerationRequest> mixed_requests(std::int32_t vocab) {
  std::vector<GenerationRequest> out;
  for (std::int32_t i = 0; i < 4; ++i) {
    GenerationRequest r;
    r.prompt_token_ids = quoting_prompt(vocab, i + 1);
    r.max_tokens = 24;
    r.sampling.temperature = i == 2 ? 0.8f : 0.0f;
    r.sampling.seed = 40 + std::uint64_t(i);
    r.n = i == 1 ? 2 : 1;
    r.logprobs = true;
    out.push_back(std::move(r));
  }
  return out;
}

class SpeculativeModel : public ::testing::TestWithParam<std::string> {};

TEST_P(SpeculativeModel, HistoryDraftsChangeNoToken) {
  const auto dir = std::filesystem::path(FLARE_TEST_DATA) / "models" / GetParam();
  std::ifstream config(dir / "config.json");
  const auto vocab = nlohmann::json::parse(config).at("vocab_size").get<std::int32_t>();
  const auto requests = mixed_requests(vocab);
  const Outcome plain = run(dir, requests, 0);
  const Outcome speculative = run(dir, requests, 4);
  expect_same_tokens(speculative, plain);
  EXPECT_GT(speculative.counters.n_verify_rows, 0);
  std::printf("[ %s ] %lld verify rows, %lld of %lld drafts accepted\n", GetParam().c_str(),
              static_cast<long long>(speculative.counters.n_verify_rows),
              static_cast<long long>(speculative.counters.n_accepted_draft_tokens),
              static_cast<long long>(speculative.counters.n_draft_tokens));
}

INSTANTIATE_TEST_SUITE_P(Architectures, SpeculativeModel,
                         ::testing::Values("qwen3-gqa2-hd128-tied", "mistral-gqa2-hd64-window8",
                                           "llama-gqa4-hd64-tied-llama3", "qwen2-gqa2-hd64-bias",
                                           "gemma3-gqa2-hd64-window8", "qwen3moe-e8-top2-dense1",
                                           "mixtral-e4-top2-window8", "gptoss-e4-top2-mxfp4-window8"));

TEST(SpeculativeDemoModel, AcceptsRepeatedCodeAndChangesNoToken) {
  const auto dir = testing_support::demo_model_dir(FLARE_SOURCE_DIR);
  ASSERT_FALSE(dir.empty()) << "scripts/restore-assets failed";
  std::ifstream in(dir / "samples.json");
  const auto samples = nlohmann::json::parse(in).at("samples");
  std::vector<GenerationRequest> requests;
  for (std::size_t s = 0; s < 3; ++s) {
    GenerationRequest r;
    r.prompt_token_ids = samples[s].at("prompt_ids").get<std::vector<TokenId>>();
    r.max_tokens = 64;
    r.sampling.temperature = 0.0f;
    requests.push_back(std::move(r));
  }
  GenerationRequest sampled = requests[0];
  sampled.sampling.temperature = 0.8f;
  sampled.sampling.top_p = 0.95f;
  sampled.sampling.seed = 9;
  requests.push_back(sampled);
  const Outcome plain = run(dir, requests, 0);
  const Outcome speculative = run(dir, requests, 6);
  expect_same_tokens(speculative, plain);
  const auto& c = speculative.counters;
  std::printf("[ demo ] %lld verify rows, %lld of %lld drafts accepted; %lld steps against %lld\n",
              static_cast<long long>(c.n_verify_rows), static_cast<long long>(c.n_accepted_draft_tokens),
              static_cast<long long>(c.n_draft_tokens), static_cast<long long>(c.n_steps),
              static_cast<long long>(plain.counters.n_steps));
  EXPECT_GT(c.n_accepted_draft_tokens, 0);
  EXPECT_LT(c.n_steps, plain.counters.n_steps);
}

}  // namespace
}  // namespace flare::engine

namespace flare::engine {
namespace {

TEST(SpeculativeDemoModel, ItsTrainedDraftChangesNoTokenAndIsMostlyAccepted) {
  const auto dir = testing_support::demo_model_dir(FLARE_SOURCE_DIR);
  ASSERT_FALSE(dir.empty()) << "scripts/restore-assets failed";
  std::ifstream in(dir / "samples.json");
  const auto samples = nlohmann::json::parse(in).at("samples");
  std::vector<GenerationRequest> requests;
  for (std::size_t s = 0; s < samples.size(); ++s) {
    GenerationRequest r;
    r.prompt_token_ids = samples[s].at("prompt_ids").get<std::vector<TokenId>>();
    r.max_tokens = 48;
    r.sampling.temperature = s == 4 ? 0.8f : 0.0f;
    r.sampling.seed = 3;
    r.n = s == 3 ? 2 : 1;
    requests.push_back(std::move(r));
  }
  const Outcome plain = run(dir, requests, 0);
  const Outcome speculative = run(dir, requests, 5, dir / "draft");
  expect_same_tokens(speculative, plain);
  const auto& c = speculative.counters;
  const double acceptance = double(c.n_accepted_draft_tokens) / double(std::max<std::int64_t>(c.n_draft_tokens, 1));
  EXPECT_GT(acceptance, 0.25);
  std::printf("[ demo + draft ] %lld verify rows, %lld of %lld drafts accepted (%.1f%%), %.2f tokens per verify "
              "row; %lld steps against %lld\n",
              static_cast<long long>(c.n_verify_rows), static_cast<long long>(c.n_accepted_draft_tokens),
              static_cast<long long>(c.n_draft_tokens), 100.0 * acceptance,
              double(c.n_verify_rows + c.n_accepted_draft_tokens) / double(std::max<std::int64_t>(c.n_verify_rows, 1)),
              static_cast<long long>(c.n_steps), static_cast<long long>(plain.counters.n_steps));
  // 73.7% greedy agreement per token under teacher forcing: about 3 tokens per round at 5 drafts.
  EXPECT_GT(double(c.n_verify_rows + c.n_accepted_draft_tokens), 2.0 * double(c.n_verify_rows));
  EXPECT_LT(c.n_steps * 3, plain.counters.n_steps * 2);
}

}  // namespace
}  // namespace flare::engine
