// Admission: capacity rejections in the spec's form, validation of hostile requests, options.
#include "engine/admission.h"

#include <gtest/gtest.h>

#include <limits>

#include "common/error.h"

namespace flare::engine {
namespace {

GenerationRequest request(std::int32_t n_prompt, std::int32_t max_tokens, std::int32_t n = 1) {
  GenerationRequest r;
  r.prompt_token_ids.assign(std::size_t(n_prompt), 1);
  r.max_tokens = max_tokens;
  r.n = n;
  return r;
}

EngineOptions options() {
  EngineOptions o;
  o.max_concurrency = 4;
  o.page_size_tokens = 16;
  o.n_pages = 100;
  o.context_limit = 8192;
  o.max_waiting = 3;
  return o;
}

TEST(Admission, PromptBeyondContext) {
  auto error = admission_check(options(), request(9000, 1), 0);
  ASSERT_TRUE(error);
  EXPECT_FALSE(error->fits_later);
  EXPECT_EQ(error->needed, "9,000 prompt tokens + 1 generated token = 9,001 tokens");
  EXPECT_EQ(error->available, "a context limit of 8,192 tokens");
  EXPECT_NE(error->message().find("needs 9,000 prompt tokens"), std::string::npos);
  auto big = options();
  big.n_pages = 512;
  EXPECT_FALSE(admission_check(big, request(8191, 1), 0));
}

TEST(Admission, MoreChoicesThanSlots) {
  auto error = admission_check(options(), request(10, 10, 5), 0);
  ASSERT_TRUE(error);
  EXPECT_NE(error->options.find("--max-concurrency 5"), std::string::npos);
}

TEST(Admission, MoreKvThanThePool) {
  // 1,000 prompt tokens + 1,000 generated = 125 pages > 100.
  auto error = admission_check(options(), request(1000, 1000), 0);
  ASSERT_TRUE(error);
  EXPECT_FALSE(error->fits_later);
  EXPECT_NE(error->needed.find("2,000 tokens of KV cache (125 pages"), std::string::npos) << error->needed;
  EXPECT_NE(error->available.find("1,600 tokens of KV cache (100 pages)"), std::string::npos) << error->available;
  EXPECT_NE(error->options.find("--kv-cache-limit"), std::string::npos);
  // Choices share the prompt's whole pages: 62 + 3 * 2 = 68 pages fit.
  EXPECT_EQ(admission_worst_case_pages(options(), request(1000, 20, 3)), 62 + 3 * 2);
  EXPECT_FALSE(admission_check(options(), request(1000, 20, 3), 0));
  // Generation is capped by the context limit.
  auto o = options();
  o.context_limit = 1024;
  EXPECT_EQ(admission_worst_case_pages(o, request(1000, 100000)), 64);
}

TEST(Admission, FullQueueFitsLater) {
  auto error = admission_check(options(), request(10, 10), 3);
  ASSERT_TRUE(error);
  EXPECT_TRUE(error->fits_later);
  EXPECT_FALSE(admission_check(options(), request(10, 10), 2));
}

TEST(Admission, ValidationRejectsHostileRequests) {
  const std::int32_t vocab = 100;
  EXPECT_NO_THROW(admission_validate(request(3, 1), vocab));
  EXPECT_THROW(admission_validate(request(0, 1), vocab), Error);
  auto r = request(3, 1);
  r.prompt_token_ids[1] = 100;
  EXPECT_THROW(admission_validate(r, vocab), Error);
  r.prompt_token_ids[1] = -1;
  EXPECT_THROW(admission_validate(r, vocab), Error);
  auto bad = [&](auto mutate) {
    auto x = request(3, 1);
    mutate(x);
    EXPECT_THROW(admission_validate(x, vocab), Error);
  };
  bad([](GenerationRequest& x) { x.max_tokens = 0; });
  bad([](GenerationRequest& x) { x.n = 0; });
  bad([](GenerationRequest& x) { x.min_tokens = -1; });
  bad([](GenerationRequest& x) { x.top_logprobs = -1; });
  bad([](GenerationRequest& x) { x.top_logprobs = 101; });
  bad([](GenerationRequest& x) { x.sampling.temperature = -1; });
  bad([](GenerationRequest& x) { x.sampling.temperature = std::numeric_limits<float>::quiet_NaN(); });
  bad([](GenerationRequest& x) { x.sampling.top_p = 0; });
  bad([](GenerationRequest& x) { x.sampling.min_p = 2; });
  bad([](GenerationRequest& x) { x.sampling.repetition_penalty = 0; });
  bad([](GenerationRequest& x) { x.sampling.logit_bias[100] = 1; });
  bad([](GenerationRequest& x) { x.sampling.logit_bias[3] = std::numeric_limits<float>::quiet_NaN(); });
}

TEST(Admission, SamplingParamsCarryEverything) {
  auto r = request(3, 1);
  r.sampling.temperature = 0.7f;
  r.sampling.top_k = 5;
  r.sampling.logit_bias[2] = -3;
  r.logprobs = true;
  r.top_logprobs = 4;
  auto p = admission_sampling_params(r, 77);
  EXPECT_EQ(p.seed, 77u);
  EXPECT_EQ(p.top_k, 5);
  EXPECT_EQ(p.n_top_logprobs, 4);
  ASSERT_EQ(p.logit_bias.size(), 1u);
  r.sampling.seed = 5;
  EXPECT_EQ(admission_sampling_params(r, 77).seed, 5u);
}

TEST(EngineOptions, PolicyAndRanges) {
  EXPECT_EQ(scheduler_policy_parse("balanced"), SchedulerPolicy::balanced);
  EXPECT_EQ(scheduler_policy_parse("throughput"), SchedulerPolicy::throughput);
  EXPECT_THROW(scheduler_policy_parse("fast"), Error);
  EXPECT_THROW(scheduler_policy_parse(""), Error);
  EXPECT_NO_THROW(engine_options_validate(options()));
  auto bad = [](auto mutate) {
    auto o = options();
    mutate(o);
    EXPECT_THROW(engine_options_validate(o), Error);
  };
  bad([](EngineOptions& o) { o.max_concurrency = 0; });
  bad([](EngineOptions& o) { o.prefill_chunk_tokens = 0; });
  bad([](EngineOptions& o) { o.n_pages = 0; });
  bad([](EngineOptions& o) { o.terminal_value = -1; });
  bad([](EngineOptions& o) { o.terminal_age_price = std::numeric_limits<double>::infinity(); });
  bad([](EngineOptions& o) { o.terminal_value = std::numeric_limits<double>::quiet_NaN(); });
  auto zero = options();
  zero.terminal_value = 0;
  zero.terminal_age_price = 0;
  EXPECT_NO_THROW(engine_options_validate(zero));
}

}  // namespace
}  // namespace flare::engine
