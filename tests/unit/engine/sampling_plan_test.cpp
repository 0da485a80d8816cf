// The sampling plan: which logits rows the backend samples and which reach the host. Backend and
// host rows mix in one step; constrained, prompt-logprob and forking (n > 1) rows take the host
// path; seeded draws equal helios::sample_token's and an all-host run's (the engine before the
// backend sampled); and ModelStepRunner downloads only the host rows (a counting backend).
#include "engine/sampling_plan.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <future>
#include <limits>
#include <map>
#include <mutex>

#include "engine/engine.h"
#include "engine/model_runner.h"
#include "engine/scheduler.h"
#include "fake_model.h"
#include "helios/cpu/cpu_backend.h"

namespace flare::engine {
namespace {

using testing::FakeModel;
using testing::reference_tokens;

constexpr std::int32_t kVocab = 64;

// Any of a few tokens, n_tokens times; then finished.
class AllowedConstraint final : public TokenConstraint {
 public:
  explicit AllowedConstraint(std::int32_t n_tokens) : n_left_(n_tokens) {}
  std::unique_ptr<TokenConstraint> clone() const override { return std::make_unique<AllowedConstraint>(*this); }
  TokenRule next(std::int32_t) override { return {TokenRule::Kind::allowed, {3, 5, 7, 11}}; }
  void accept(TokenId) override { --n_left_; }
  bool finished() const override { return n_left_ == 0; }

 private:
  std::int32_t n_left_;
};

EngineOptions options() {
  EngineOptions o;
  o.max_concurrency = 8;
  o.prefill_chunk_tokens = 32;  // every prompt below prefills in the first step
  o.page_size_tokens = 4;
  o.n_pages = 128;
  o.context_limit = 128;
  o.eos_token_ids = {};
  return o;
}

std::vector<TokenId> prompt_of(std::int32_t n, std::int32_t salt) {
  std::vector<TokenId> p;
  for (std::int32_t i = 0; i < n; ++i) p.push_back((salt + 11 * i) % kVocab);
  return p;
}

GenerationRequest make_request(std::vector<TokenId> prompt, std::int32_t max_tokens) {
  GenerationRequest r;
  r.prompt_token_ids = std::move(prompt);
  r.max_tokens = max_tokens;
  return r;
}

helios::SamplingParams seeded(float temperature, std::uint64_t seed) {
  helios::SamplingParams p;
  p.temperature = temperature;
  p.seed = seed;
  return p;
}

bool same_token(const TokenOutput& a, const TokenOutput& b) {
  if (a.token_id != b.token_id || std::memcmp(&a.logprob, &b.logprob, sizeof(float)) != 0) return false;
  if (a.top_logprobs.size() != b.top_logprobs.size()) return false;
  for (std::size_t i = 0; i < a.top_logprobs.size(); ++i) {
    if (a.top_logprobs[i].token_id != b.top_logprobs[i].token_id ||
        std::memcmp(&a.top_logprobs[i].logprob, &b.top_logprobs[i].logprob, sizeof(float)) != 0) {
      return false;
    }
  }
  return true;
}

void expect_same_outputs(const std::vector<TokenOutput>& got, const std::vector<TokenOutput>& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (std::size_t i = 0; i < got.size(); ++i) {
    EXPECT_TRUE(same_token(got[i], want[i])) << what << " position " << i << ": token " << got[i].token_id << " logprob "
                                             << got[i].logprob << " vs " << want[i].token_id << " " << want[i].logprob;
  }
}

// Where a step's logits rows went: 's' sampled on the backend, 'h' host, '-' neither.
std::string placement(const SamplingPlan& plan, std::int32_t n_logit_rows) {
  std::string out(std::size_t(n_logit_rows), '-');
  for (std::int32_t row : plan.sampled_rows) out[std::size_t(row)] = 's';
  for (std::int32_t row : plan.host_rows) out[std::size_t(row)] = 'h';
  return out;
}

// A scheduler over the fake model, sampling as the engine does (plan_sampling) or every row on
// the host (the engine before the backend sampled).
struct Driver {
  explicit Driver(bool host_only_, const EngineOptions& o = options())
      : host_only(host_only_), scheduler(o), model(o.n_pages, o.page_size_tokens, kVocab) {}

  void add(RequestHandle handle, const GenerationRequest& request, const helios::SamplingParams& params) {
    scheduler.add(handle, request, params, 0.0);
  }

  // Runs the scheduler dry; per step, the placement of each ScheduledRow's logits rows by handle.
  std::vector<std::map<RequestHandle, std::string>> run_all() {
    std::vector<std::map<RequestHandle, std::string>> steps;
    StepResults results;
    for (int i = 0; i < 1000 && scheduler.has_work(); ++i) {
      const StepPlan plan = scheduler.schedule(double(i));
      if (plan.empty()) break;
      const std::int32_t n_logit_rows = plan.step.n_logit_rows();
      const SamplingPlan sampling = host_only ? sampling_plan_host_only(n_logit_rows) : scheduler.plan_sampling(plan, kVocab);
      const std::string where = placement(sampling, n_logit_rows);
      auto& step = steps.emplace_back();
      std::size_t offset = 0;
      for (const ScheduledRow& row : plan.rows) {
        step[row.handle] += where.substr(offset, std::size_t(row.n_logits));
        offset += std::size_t(row.n_logits);
      }
      model.run(plan.step, plan.page_copies, sampling, results);
      for (auto& request_outputs : scheduler.apply(plan, sampling, results, kVocab)) {
        for (auto& o : request_outputs.outputs) {
          auto& tokens = outputs[request_outputs.handle][o.choice_index];
          tokens.insert(tokens.end(), o.tokens.begin(), o.tokens.end());
          auto& prompt = prompt_outputs[request_outputs.handle];
          prompt.insert(prompt.end(), o.prompt_tokens.begin(), o.prompt_tokens.end());
          if (o.finish_reason != FinishReason::none) finish[request_outputs.handle][o.choice_index] = o.finish_reason;
        }
      }
    }
    EXPECT_FALSE(scheduler.has_work());
    return steps;
  }

  bool host_only;
  Scheduler scheduler;
  FakeModel model;
  std::map<RequestHandle, std::map<std::int32_t, std::vector<TokenOutput>>> outputs;
  std::map<RequestHandle, std::vector<TokenOutput>> prompt_outputs;
  std::map<RequestHandle, std::map<std::int32_t, FinishReason>> finish;
};

enum : RequestHandle { kPlain = 1, kConstrained = 2, kPromptLogprobs = 3, kTwoChoices = 4 };

void add_mixed_requests(Driver& d) {
  d.add(kPlain, make_request(prompt_of(6, 1), 12), seeded(0.8f, 11));
  GenerationRequest constrained = make_request(prompt_of(5, 2), 12);
  constrained.constraint = std::make_shared<AllowedConstraint>(8);
  d.add(kConstrained, constrained, seeded(0.7f, 12));
  GenerationRequest echo = make_request(prompt_of(7, 3), 8);
  echo.prompt_logprobs = true;
  echo.logprobs = true;
  echo.top_logprobs = 2;
  helios::SamplingParams echo_params = seeded(0.9f, 13);
  echo_params.n_top_logprobs = 2;
  d.add(kPromptLogprobs, echo, echo_params);
  GenerationRequest two = make_request(prompt_of(5, 4), 8);
  two.n = 2;
  d.add(kTwoChoices, two, seeded(1.0f, 14));
}

TEST(SamplingPlan, BackendAndHostRowsMixInOneStep) {
  Driver d(false);
  add_mixed_requests(d);
  const auto steps = d.run_all();
  ASSERT_GE(steps.size(), 8u);
  // The first step prefills every prompt and samples each request's first token: the plain row
  // on the backend; the constrained row, every prompt row of the echo and the row two choices
  // fork from on the host.
  EXPECT_EQ(steps[0].at(kPlain), "s");
  EXPECT_EQ(steps[0].at(kConstrained), "h");
  EXPECT_EQ(steps[0].at(kPromptLogprobs), "hhhhhhh");
  EXPECT_EQ(steps[0].at(kTwoChoices), "h");
  // Afterwards only the constrained choice needs the host; the forked choices (one row each) and
  // the echo, whose prompt logprobs went out with its first token, sample on the backend.
  for (std::size_t s = 1; s < 8; ++s) {
    EXPECT_EQ(steps[s].at(kPlain), "s") << "step " << s;
    EXPECT_EQ(steps[s].at(kConstrained), "h") << "step " << s;
    EXPECT_EQ(steps[s].at(kPromptLogprobs), "s") << "step " << s;
    EXPECT_EQ(steps[s].at(kTwoChoices), "ss") << "step " << s;
  }
  EXPECT_GT(d.model.n_sampled_rows, 0);
  EXPECT_EQ(d.model.n_sampled_rows + d.model.n_host_rows, d.model.n_logit_rows);

  // Every output is what the all-host engine produced, bit for bit (tokens, logprobs, top logprobs).
  Driver host(true);
  add_mixed_requests(host);
  host.run_all();
  EXPECT_EQ(host.model.n_sampled_rows, 0);
  for (RequestHandle h : {kPlain, kConstrained, kPromptLogprobs, kTwoChoices}) {
    ASSERT_EQ(d.outputs[h].size(), host.outputs[h].size()) << h;
    for (auto& [choice, tokens] : host.outputs[h]) {
      expect_same_outputs(d.outputs[h][choice], tokens, "request " + std::to_string(h) + " choice " + std::to_string(choice));
    }
    expect_same_outputs(d.prompt_outputs[h], host.prompt_outputs[h], "prompt logprobs of " + std::to_string(h));
    EXPECT_EQ(d.finish[h], host.finish[h]) << h;
  }
  EXPECT_EQ(d.prompt_outputs[kPromptLogprobs].size(), 7u);
  for (const auto& t : d.outputs[kConstrained][0]) EXPECT_TRUE(t.token_id == 3 || t.token_id == 5 || t.token_id == 7 || t.token_id == 11);
  EXPECT_EQ(d.outputs[kConstrained][0].size(), 8u);
  // And the free choices are the reference's: helios::sample_token over the reference logits.
  std::vector<TokenId> plain;
  for (const auto& t : d.outputs[kPlain][0]) plain.push_back(t.token_id);
  EXPECT_EQ(plain, reference_tokens(d.model, prompt_of(6, 1), seeded(0.8f, 11), 0, std::int32_t(plain.size())));
  for (std::int32_t choice : {0, 1}) {
    std::vector<TokenId> got;
    for (const auto& t : d.outputs[kTwoChoices][choice]) got.push_back(t.token_id);
    EXPECT_EQ(got, reference_tokens(d.model, prompt_of(5, 4), seeded(1.0f, 14), choice, std::int32_t(got.size())))
        << "choice " << choice;
  }
}

// Every sampling feature the backend's rows carry (penalties over the history, biases, top-k/p,
// min-p, top logprobs, min_tokens' bans of stop and end ids), against helios::sample_token called
// directly on the reference logits with the counter = tokens generated so far.
TEST(SamplingPlan, SeededDrawsMatchTheHostSampler) {
  helios::SamplingParams params = seeded(0.9f, 1234);
  params.top_k = 20;
  params.top_p = 0.95f;
  params.min_p = 0.01f;
  params.presence_penalty = 0.3f;
  params.frequency_penalty = 0.2f;
  params.repetition_penalty = 1.2f;
  params.logit_bias = {{5, 2.0f}, {9, -1.5f}};
  params.n_top_logprobs = 3;
  GenerationRequest request = make_request(prompt_of(9, 5), 24);
  request.logprobs = true;
  request.top_logprobs = 3;
  request.min_tokens = 6;
  request.stop_token_ids = {17, 23, 1000};  // 1000: outside the vocabulary, dropped from the bans

  EngineOptions o = options();
  o.eos_token_ids = {0};
  Driver d(false, o);
  d.add(1, request, params);
  const auto steps = d.run_all();
  for (std::size_t s = 0; s < steps.size(); ++s) EXPECT_EQ(steps[s].at(1), "s") << "step " << s;

  const std::vector<TokenId> prompt = prompt_of(9, 5);
  std::vector<TokenId> output, all = prompt;
  std::vector<TokenOutput> want;
  for (std::int32_t i = 0; i < request.max_tokens; ++i) {
    helios::SamplingParams p = params;
    if (i < request.min_tokens) {
      for (TokenId id : {17, 23, 0}) p.logit_bias.emplace_back(id, -std::numeric_limits<float>::infinity());
    }
    const helios::SampledToken sampled = helios::sample_token(d.model.logits_for(all), p, {prompt, output}, std::uint64_t(i));
    TokenOutput out{sampled.token, sampled.logprob, {}};
    for (const auto& [id, logprob] : sampled.top_logprobs) out.top_logprobs.push_back({id, logprob});
    want.push_back(out);
    output.push_back(sampled.token);
    all.push_back(sampled.token);
    if (i + 1 >= request.min_tokens && (sampled.token == 17 || sampled.token == 23 || sampled.token == 0)) break;
  }
  expect_same_outputs(d.outputs[1][0], want, "seeded request");
  EXPECT_EQ(d.outputs[1][0].front().top_logprobs.size(), 3u);
}

// A Backend that forwards to the CPU backend and counts what crosses to the host: bytes
// downloaded outside sample(), and the rows sample() was asked for.
class CountingBackend final : public helios::Backend {
 public:
  std::string_view name() const override { return inner_.name(); }
  helios::DType activation_dtype() const override { return inner_.activation_dtype(); }
  std::unique_ptr<helios::Buffer> allocate(std::size_t size_bytes) override { return inner_.allocate(size_bytes); }
  void upload(helios::Buffer& dst, std::size_t offset, const void* src, std::size_t n) override {
    inner_.upload(dst, offset, src, n);
  }
  void download(const helios::Buffer& src, std::size_t offset, void* dst, std::size_t n) override {
    n_downloaded_bytes += std::int64_t(n);
    inner_.download(src, offset, dst, n);
  }
  void synchronize() override { inner_.synchronize(); }
  void kv_copy_pages(helios::KvCache& cache, std::span<const helios::PageCopy> copies) override {
    inner_.kv_copy_pages(cache, copies);
  }
  using helios::Backend::begin_step;
  void begin_step(const helios::Step& step, std::span<const helios::KvCache* const> caches) override {
    inner_.begin_step(step, caches);
  }
  void embedding(const helios::Tensor& table, helios::Tensor out) override { inner_.embedding(table, out); }
  void rms_norm(const helios::Tensor& x, helios::Tensor* residual, const helios::Tensor& weight, float eps,
                helios::Tensor out) override {
    inner_.rms_norm(x, residual, weight, eps, out);
  }
  void head_rms_norm(helios::Tensor x, std::int32_t head_dim, const helios::Tensor& weight, float eps) override {
    inner_.head_rms_norm(x, head_dim, weight, eps);
  }
  void linear(const helios::Tensor& x, const helios::Tensor& weight, const helios::Tensor* bias,
              helios::Tensor out) override {
    inner_.linear(x, weight, bias, out);
  }
  void rotary(helios::Tensor q, helios::Tensor k, std::int32_t head_dim, const helios::RotaryParams& rope) override {
    inner_.rotary(q, k, head_dim, rope);
  }
  void kv_store(helios::KvCache& cache, std::int32_t layer, const helios::Tensor& k, const helios::Tensor& v) override {
    inner_.kv_store(cache, layer, k, v);
  }
  void attention(const helios::KvCache& cache, const helios::Tensor& q, const helios::AttentionParams& params,
                 helios::Tensor out) override {
    inner_.attention(cache, q, params, out);
  }
  void swiglu(const helios::Tensor& gate_up, helios::Tensor out) override { inner_.swiglu(gate_up, out); }
  void gather_logit_rows(const helios::Tensor& x, helios::Tensor out) override { inner_.gather_logit_rows(x, out); }
  std::vector<helios::SampledToken> sample(const helios::Tensor& logits,
                                           std::span<const helios::SampleRequest> requests) override {
    n_sampled_rows += std::int64_t(requests.size());
    ++n_sample_calls;
    return inner_.sample(logits, requests);  // the host default, downloading through inner_
  }

  std::atomic<std::int64_t> n_downloaded_bytes{0};
  std::atomic<std::int64_t> n_sampled_rows{0};
  std::atomic<std::int64_t> n_sample_calls{0};

 private:
  helios::cpu::CpuBackend inner_{2};
};

// Counts the plans a runner is handed. With host_only, it runs the inner runner with every row
// to the host and samples the planned rows itself with helios::sample_token: the engine before the
// backend sampled.
class PlanRecorder final : public StepRunner {
 public:
  PlanRecorder(std::unique_ptr<StepRunner> inner, bool host_only) : inner_(std::move(inner)), host_only_(host_only) {}
  std::int32_t vocab_size() const override { return inner_->vocab_size(); }
  void run(const helios::Step& step, std::span<const helios::PageCopy> copies, const SamplingPlan& plan,
           StepResults& out) override {
    n_logit_rows += step.n_logit_rows();
    n_sampled_rows += std::int64_t(plan.sampled_rows.size());
    n_host_rows += std::int64_t(plan.host_rows.size());
    if (!host_only_) return inner_->run(step, copies, plan, out);
    StepResults all;
    inner_->run(step, copies, sampling_plan_host_only(step.n_logit_rows()), all);
    const auto vocab = std::size_t(vocab_size());
    auto row = [&](std::int32_t r) { return std::span<const float>(all.host_logits).subspan(std::size_t(r) * vocab, vocab); };
    out.sampled.clear();
    for (std::size_t i = 0; i < plan.sampled_rows.size(); ++i) {
      const helios::SampleRequest& q = plan.requests[i];
      out.sampled.push_back(helios::sample_token(row(plan.sampled_rows[i]), *q.params, q.history, q.output_index));
    }
    out.host_logits.clear();
    for (std::int32_t r : plan.host_rows) out.host_logits.insert(out.host_logits.end(), row(r).begin(), row(r).end());
  }

  std::atomic<std::int64_t> n_logit_rows{0}, n_sampled_rows{0}, n_host_rows{0};

 private:
  std::unique_ptr<StepRunner> inner_;
  bool host_only_;
};

class CollectingSink final : public OutputSink {
 public:
  void on_output(StepOutput output) override {
    std::lock_guard lock(mutex);
    auto& t = tokens[output.choice_index];
    t.insert(t.end(), output.tokens.begin(), output.tokens.end());
    prompt.insert(prompt.end(), output.prompt_tokens.begin(), output.prompt_tokens.end());
    if (output.request_finished) done.set_value();
  }
  std::mutex mutex;
  std::map<std::int32_t, std::vector<TokenOutput>> tokens;
  std::vector<TokenOutput> prompt;
  std::promise<void> done;
};

struct EngineRun {
  std::vector<std::shared_ptr<CollectingSink>> sinks;
  std::int64_t n_logit_rows = 0, n_sampled_rows = 0, n_host_rows = 0;
  std::int64_t n_backend_downloaded_bytes = 0, n_backend_sampled_rows = 0;
  std::int32_t vocab = 0;
};

// Seeded free requests, an echo (prompt logprobs) and n = 2 on a real model through the engine.
EngineRun run_engine(bool host_only) {
  const auto dir = std::filesystem::path(FLARE_TEST_DATA) / "models" / "qwen3-gqa2-hd128-tied";
  const EngineOptions o = options();
  auto backend = std::make_unique<CountingBackend>();
  CountingBackend* counts = backend.get();
  auto recorder = std::make_unique<PlanRecorder>(ModelStepRunner::load(std::move(backend), dir, o, helios::DType::f32),
                                                 host_only);
  PlanRecorder* plans = recorder.get();
  EngineRun run;
  run.vocab = recorder->vocab_size();
  {
    LocalEngine engine(o, std::move(recorder));
    for (int i = 0; i < 4; ++i) {
      GenerationRequest r;
      for (int t = 0; t < 6 + 3 * i; ++t) r.prompt_token_ids.push_back((37 * t + 11 * i + 5) % run.vocab);
      r.max_tokens = 10;
      r.sampling.temperature = 0.8f;
      r.sampling.top_p = 0.9f;
      r.sampling.seed = 100 + std::uint64_t(i);
      r.logprobs = true;
      r.top_logprobs = 2;
      if (i == 2) r.prompt_logprobs = true;
      if (i == 3) r.n = 2;
      run.sinks.push_back(std::make_shared<CollectingSink>());
      EXPECT_FALSE(engine.submit(r, run.sinks.back()).rejected);
    }
    for (auto& sink : run.sinks) EXPECT_EQ(sink->done.get_future().wait_for(std::chrono::seconds(60)), std::future_status::ready);
    engine.wait_idle();
    run.n_logit_rows = plans->n_logit_rows;
    run.n_sampled_rows = plans->n_sampled_rows;
    run.n_host_rows = plans->n_host_rows;
    run.n_backend_downloaded_bytes = counts->n_downloaded_bytes;
    run.n_backend_sampled_rows = counts->n_sampled_rows;
  }
  return run;
}

TEST(SamplingPlan, ModelRunnerDownloadsOnlyHostRowsAndChangesNoToken) {
  const EngineRun got = run_engine(false);
  const EngineRun want = run_engine(true);
  // Host rows: the echo's 12 prompt rows (in whatever chunks) and the row n = 2 forks from.
  EXPECT_EQ(got.n_host_rows, 12 + 1);
  EXPECT_EQ(got.n_sampled_rows + got.n_host_rows, got.n_logit_rows);
  EXPECT_EQ(got.n_backend_sampled_rows, got.n_sampled_rows);
  // What the runner downloaded: the host rows' logits, nothing else (sample() reads its own rows,
  // here through the CPU backend, on a GPU where they are).
  const std::int64_t row_bytes = std::int64_t(got.vocab) * std::int64_t(sizeof(float));
  EXPECT_EQ(got.n_backend_downloaded_bytes, got.n_host_rows * row_bytes);
  EXPECT_EQ(want.n_backend_downloaded_bytes, want.n_logit_rows * row_bytes);
  EXPECT_EQ(want.n_backend_sampled_rows, 0);

  ASSERT_EQ(got.sinks.size(), want.sinks.size());
  for (std::size_t i = 0; i < got.sinks.size(); ++i) {
    ASSERT_EQ(got.sinks[i]->tokens.size(), want.sinks[i]->tokens.size()) << "request " << i;
    for (auto& [choice, tokens] : want.sinks[i]->tokens) {
      expect_same_outputs(got.sinks[i]->tokens[choice], tokens, "request " + std::to_string(i) + " choice " + std::to_string(choice));
      EXPECT_EQ(tokens.size(), 10u);
    }
    expect_same_outputs(got.sinks[i]->prompt, want.sinks[i]->prompt, "prompt logprobs of request " + std::to_string(i));
  }
  EXPECT_EQ(got.sinks[2]->prompt.size(), 12u);
}

TEST(SamplingPlan, RunsOfConsecutiveRows) {
  std::vector<std::tuple<std::int32_t, std::int32_t, std::size_t>> runs;
  sampling_plan_runs({0, 1, 2, 5, 7, 8}, [&](std::int32_t first, std::int32_t n, std::size_t offset) {
    runs.emplace_back(first, n, offset);
  });
  EXPECT_EQ(runs, (std::vector<std::tuple<std::int32_t, std::int32_t, std::size_t>>{{0, 3, 0}, {5, 1, 3}, {7, 2, 4}}));
  runs.clear();
  sampling_plan_runs({}, [&](std::int32_t first, std::int32_t n, std::size_t offset) { runs.emplace_back(first, n, offset); });
  EXPECT_TRUE(runs.empty());
  EXPECT_EQ(sampling_plan_host_only(3).host_rows, (std::vector<std::int32_t>{0, 1, 2}));
}

}  // namespace
}  // namespace flare::engine
