// Request parsing and validation for every endpoint, error shapes per API, auth, limits.
#include <sys/resource.h>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "fakes.h"
#include "server/auth.h"
#include "server/connection_limits.h"
#include "server/json_body.h"
#include "server/router.h"

namespace flare::server {
namespace {

using json = nlohmann::ordered_json;
using testing::FakeFrontend;
using testing::ScriptedEngine;

class RouterTest : public ::testing::Test {
 protected:
  RouterTest() : model(testing::fake_model()), router(frontend, model, api_key, engine, metrics, limits()) {}
  static ServerLimits limits() {
    ServerLimits l;
    l.max_body_bytes = 64 << 10;
    l.max_json_depth = 16;
    return l;
  }
  RouteResult post(const std::string& path, const std::string& body, std::map<std::string, std::string> headers = {}) {
    HttpRequest request{"POST", path, std::move(headers), body};
    return router.route(request);
  }
  RouteResult get(const std::string& path, std::map<std::string, std::string> headers = {}) {
    return router.route({"GET", path, std::move(headers), ""});
  }
  // Expects an error; returns the parsed body.
  json expect_error(const RouteResult& result, int status) {
    EXPECT_FALSE(result.job.has_value());
    EXPECT_EQ(result.response.status, status) << result.response.body;
    return json::parse(result.response.body);
  }
  json expect_openai_400(const std::string& path, const std::string& body, const std::string& field) {
    json error = expect_error(post(path, body), 400);
    EXPECT_EQ(error["error"]["type"], "invalid_request_error") << error;
    EXPECT_NE(error["error"]["message"].get<std::string>().find(field), std::string::npos) << error;
    return error;
  }

  FakeFrontend frontend;
  ModelInfo model;
  ScriptedEngine engine;
  Metrics metrics;
  std::string api_key;
  Router router;
};

TEST(JsonBody, RejectsMalformedDeepAndOversize) {
  JsonLimits limits{100, 4};
  EXPECT_THROW(parse_json_body("{\"a\":", limits), ApiError);
  EXPECT_THROW(parse_json_body("", limits), ApiError);
  EXPECT_THROW(parse_json_body("[[[[[1]]]]]", limits), ApiError);
  EXPECT_NO_THROW(parse_json_body("[[[[1]]]]", limits));
  EXPECT_NO_THROW(parse_json_body("[\"[[[[[[[[[\"]", limits));  // brackets inside strings do not count
  try {
    parse_json_body(std::string(200, ' '), limits);
    FAIL();
  } catch (const ApiError& error) {
    EXPECT_EQ(error.status(), 413);
  }
  EXPECT_EQ(json_nesting_depth(std::string(100000, '['), 64), 65);  // stops early
}

TEST(JsonBody, TypedFieldsNameTheField) {
  json body = json::parse(R"({"n": 1.5, "big": 1e400, "huge": 99999999999999999999, "neg": -3, "s": 3})",
                          nullptr, false);
  if (!body.is_discarded()) {
    EXPECT_THROW(get_int(body, "n", 1, 10), ApiError);
    EXPECT_THROW(get_int(body, "huge", 1, 10), ApiError);
    EXPECT_THROW(get_int(body, "neg", 1, 10), ApiError);
    EXPECT_THROW(get_string(body, "s"), ApiError);
  }
  json ok = {{"n", 2.0}};
  EXPECT_EQ(get_int(ok, "n", 1, 10), 2);
  try {
    get_number(json{{"temperature", 5}}, "temperature", 0, 2);
    FAIL();
  } catch (const ApiError& error) {
    EXPECT_EQ(error.param(), "temperature");
    EXPECT_EQ(error.status(), 400);
  }
}

TEST(Auth, ConstantTimeCompareAndHeaders) {
  EXPECT_TRUE(constant_time_equal("secret", "secret"));
  EXPECT_FALSE(constant_time_equal("secreT", "secret"));
  EXPECT_FALSE(constant_time_equal("secret1", "secret"));
  EXPECT_FALSE(constant_time_equal("", "secret"));
  EXPECT_FALSE(constant_time_equal("secret", ""));
  ApiKeyAuth auth("k-123");
  EXPECT_TRUE(auth.allows("Bearer k-123", ""));
  EXPECT_TRUE(auth.allows("bearer  k-123 ", ""));
  EXPECT_TRUE(auth.allows("", "k-123"));
  EXPECT_FALSE(auth.allows("Bearer k-12", ""));
  EXPECT_FALSE(auth.allows("Basic k-123", ""));
  EXPECT_FALSE(auth.allows("", ""));
  EXPECT_TRUE(ApiKeyAuth("").allows("", ""));
}

TEST(Auth, KeyFileTrimsAndEmptyDisables) {
  std::string path = std::string(FLARE_BINARY_DIR) + "/server_test_key.txt";
  FILE* file = fopen(path.c_str(), "w");
  fputs("  abc \n", file);
  fclose(file);
  EXPECT_EQ(read_api_key_file(path), "abc");
  file = fopen(path.c_str(), "w");
  fclose(file);
  EXPECT_EQ(read_api_key_file(path), "");
  EXPECT_THROW(read_api_key_file(path + ".missing"), Error);
}

TEST_F(RouterTest, HealthModelsAndUnknownRoutes) {
  EXPECT_EQ(get("/health").response.status, 200);
  json models = json::parse(get("/v1/models").response.body);
  ASSERT_EQ(models["data"].size(), 1u);
  EXPECT_EQ(models["data"][0]["id"], "demo");
  EXPECT_EQ(models["data"][0]["root"], "flare/demo-15m");
  EXPECT_EQ(get("/v1/models/flare/demo-15m").response.status, 200);
  expect_error(get("/v1/nothing"), 404);
  expect_error(get("/v1/chat/completions"), 405);
  json anthropic_404 = expect_error(post("/v1/messages/unknown", "{}"), 404);
  EXPECT_EQ(anthropic_404["type"], "error");
}

TEST_F(RouterTest, AuthErrorsUseEachApiShape) {
  Router locked(frontend, model, "sekrit", engine, metrics, limits());
  auto openai = locked.route({"POST", "/v1/chat/completions", {}, "{}"});
  EXPECT_EQ(openai.response.status, 401);
  json body = json::parse(openai.response.body);
  EXPECT_EQ(body["error"]["code"], "invalid_api_key");
  auto anthropic = locked.route({"POST", "/v1/messages", {{"x-api-key", "wrong"}}, "{}"});
  EXPECT_EQ(anthropic.response.status, 401);
  body = json::parse(anthropic.response.body);
  EXPECT_EQ(body["type"], "error");
  EXPECT_EQ(body["error"]["type"], "authentication_error");
  EXPECT_EQ(locked.route({"GET", "/health", {}, ""}).response.status, 200);
  EXPECT_EQ(locked.route({"GET", "/v1/models", {{"authorization", "Bearer sekrit"}}, ""}).response.status, 200);
  EXPECT_EQ(locked.route({"GET", "/v1/models", {{"x-api-key", "sekrit"}}, ""}).response.status, 200);
}

TEST_F(RouterTest, ChatBadInputSuite) {
  const std::string path = "/v1/chat/completions";
  const std::string user = R"("messages": [{"role": "user", "content": "hi"}])";
  expect_openai_400(path, "{not json", "malformed JSON");
  expect_openai_400(path, "[1, 2]", "object");
  expect_openai_400(path, std::string(20, '[') + std::string(20, ']'), "nesting");
  expect_error(post(path, std::string(70 << 10, ' ')), 413);
  expect_openai_400(path, "{}", "messages");
  expect_openai_400(path, R"({"messages": []})", "messages");
  expect_openai_400(path, R"({"messages": "hi"})", "messages");
  expect_openai_400(path, R"({"messages": [{"role": "wizard", "content": "x"}]})", "messages[0].role");
  expect_openai_400(path, R"({"messages": [{"role": "user"}]})", "messages[0].content");
  expect_openai_400(path, R"({"messages": [{"role": "user", "content": 5}]})", "messages[0].content");
  expect_openai_400(path, R"({"messages": [{"role": "user", "content": [{"type": "image_url"}]}]})", "messages[0].content[0].type");
  expect_openai_400(path, "{" + user + R"(, "max_tokens": 0})", "max_tokens");
  expect_openai_400(path, "{" + user + R"(, "max_tokens": -5})", "max_tokens");
  expect_openai_400(path, "{" + user + R"(, "max_tokens": 1e30})", "max_tokens");
  expect_openai_400(path, "{" + user + R"(, "max_tokens": "10"})", "max_tokens");
  expect_openai_400(path, "{" + user + R"(, "temperature": 3})", "temperature");
  expect_openai_400(path, "{" + user + R"(, "temperature": "hot"})", "temperature");
  expect_openai_400(path, "{" + user + R"(, "top_p": 0})", "top_p");
  expect_openai_400(path, "{" + user + R"(, "n": 0})", "n");
  expect_openai_400(path, "{" + user + R"(, "n": 1000})", "n");
  expect_openai_400(path, "{" + user + R"(, "stop": 7})", "stop");
  expect_openai_400(path, "{" + user + R"(, "stop": ["a", 1]})", "stop[1]");
  expect_openai_400(path, "{" + user + R"(, "logit_bias": {"x": 1}})", "logit_bias.x");
  expect_openai_400(path, "{" + user + R"(, "logit_bias": {"5": 500}})", "logit_bias.5");
  expect_openai_400(path, "{" + user + R"(, "logit_bias": {"999999": 1}})", "logit_bias.999999");
  expect_openai_400(path, "{" + user + R"(, "top_logprobs": 3})", "top_logprobs");
  expect_openai_400(path, "{" + user + R"(, "logprobs": true, "top_logprobs": 50})", "top_logprobs");
  expect_openai_400(path, "{" + user + R"(, "stream_options": {"include_usage": true}})", "stream_options");
  expect_openai_400(path, "{" + user + R"(, "tool_choice": "required"})", "tool_choice");
  expect_openai_400(path, "{" + user + R"(, "tools": [{"type": "function", "function": {}}]})", "tools[0].function.name");
  expect_openai_400(path, "{" + user + R"(, "tools": [{"type": "function", "function": {"name": "a"}}], "tool_choice": {"type": "function", "function": {"name": "b"}}})", "tool_choice");
  expect_openai_400(path, "{" + user + R"(, "seed": "x"})", "seed");
  expect_openai_400(path, "{" + user + R"(, "chat_template_kwargs": 3})", "chat_template_kwargs");
  expect_openai_400(path, R"({"messages": [{"role": "assistant", "content": null, "tool_calls": [{"function": {"name": "f", "arguments": "{bad"}}]}]})",
                    "messages[0].tool_calls[0].function.arguments");
  expect_openai_400(path, R"({"messages": [{"role": "user", "content": "TEMPLATE_ERROR"}]})", "template");
  json not_found = expect_error(post(path, "{" + user + R"(, "model": "gpt-4"})"), 404);
  EXPECT_EQ(not_found["error"]["code"], "model_not_found");
  // A prompt longer than the context is a capacity error naming the setting that raises it.
  json too_long = expect_error(post(path, R"({"messages": [{"role": "user", "content": ")" + std::string(600, 'x') + "\"}]}"), 400);
  std::string message = too_long["error"]["message"];
  EXPECT_NE(message.find("needs"), std::string::npos) << message;
  EXPECT_NE(message.find("--kv-cache-limit"), std::string::npos) << message;
}

TEST_F(RouterTest, ChatBuildsOneInternalRequest) {
  auto result = post("/v1/chat/completions", R"({
    "model": "flare/demo-15m",
    "messages": [{"role": "system", "content": "be brief"},
                 {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]},
                 {"role": "assistant", "content": "x", "reasoning_content": "thought",
                  "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{\"q\": 1}"}}]},
                 {"role": "tool", "tool_call_id": "c1", "content": "42"}],
    "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}],
    "temperature": 0.5, "top_p": 0.9, "top_k": 5, "min_p": 0.1, "seed": 7, "n": 2,
    "max_completion_tokens": 10000, "stop": ["END"], "stop_token_ids": [3],
    "logprobs": true, "top_logprobs": 2, "logit_bias": {"65": -100}, "ignore_eos": true,
    "chat_template_kwargs": {"enable_thinking": false}})");
  ASSERT_TRUE(result.job.has_value()) << result.response.body;
  ASSERT_EQ(result.job->requests.size(), 1u);
  const auto& request = result.job->requests[0];
  EXPECT_FLOAT_EQ(request.sampling.temperature, 0.5f);
  EXPECT_EQ(request.sampling.top_k, 5);
  EXPECT_EQ(request.sampling.seed, 7u);
  EXPECT_EQ(request.n, 2);
  EXPECT_EQ(request.top_logprobs, 2);
  EXPECT_TRUE(request.ignore_eos);
  EXPECT_EQ(request.stop_strings, std::vector<std::string>{"END"});
  EXPECT_EQ(request.stop_token_ids, std::vector<TokenId>{3});
  EXPECT_FLOAT_EQ(request.sampling.logit_bias.at(65), -100.0f);
  // max tokens clamped to the context left after the prompt
  EXPECT_EQ(request.max_tokens, model.max_context_tokens - static_cast<int32_t>(request.prompt_token_ids.size()));
  std::string prompt = frontend.decode(request.prompt_token_ids, true);
  EXPECT_NE(prompt.find("user: a\nb"), std::string::npos) << prompt;
  EXPECT_NE(prompt.find("[reasoning thought]"), std::string::npos) << prompt;
  EXPECT_NE(prompt.find("/no_think"), std::string::npos) << prompt;
  EXPECT_EQ(frontend.last_messages[2]["tool_calls"][0]["function"]["arguments"]["q"], 1);
}

TEST_F(RouterTest, SamplingDefaultsAndPackageRanges) {
  model.sampling_defaults.temperature = 0.7f;
  model.sampling_defaults.top_k = 20;
  model.sampling_ranges.top_k_max = 50;
  model.sampling_ranges.temperature_max = 1.5f;
  auto omitted = post("/v1/chat/completions", R"({"messages": [{"role": "user", "content": "hi"}]})");
  ASSERT_TRUE(omitted.job);
  EXPECT_FLOAT_EQ(omitted.job->requests[0].sampling.temperature, 0.7f);
  EXPECT_EQ(omitted.job->requests[0].sampling.top_k, 20);
  auto clamped = post("/v1/chat/completions",
                      R"({"messages": [{"role": "user", "content": "hi"}], "temperature": 2, "top_k": 200})");
  ASSERT_TRUE(clamped.job);
  EXPECT_FLOAT_EQ(clamped.job->requests[0].sampling.temperature, 1.5f);
  EXPECT_EQ(clamped.job->requests[0].sampling.top_k, 50);
}

TEST_F(RouterTest, CompletionsPromptForms) {
  auto text = post("/v1/completions", R"({"prompt": "abc", "max_tokens": 4})");
  ASSERT_TRUE(text.job) << text.response.body;
  EXPECT_EQ(text.job->requests[0].prompt_token_ids, (std::vector<TokenId>{testing::kBos, 'a', 'b', 'c'}));
  EXPECT_EQ(text.job->requests[0].max_tokens, 4);
  auto ids = post("/v1/completions", R"({"prompt": [1, 2, 3]})");
  ASSERT_TRUE(ids.job);
  EXPECT_EQ(ids.job->requests[0].prompt_token_ids, (std::vector<TokenId>{1, 2, 3}));
  EXPECT_EQ(ids.job->requests[0].max_tokens, 16);
  auto list = post("/v1/completions", R"({"prompt": ["a", [5, 6]], "echo": true, "logprobs": 1})");
  ASSERT_TRUE(list.job);
  ASSERT_EQ(list.job->requests.size(), 2u);
  EXPECT_TRUE(list.job->requests[1].prompt_logprobs);
  expect_openai_400("/v1/completions", R"({})", "prompt");
  expect_openai_400("/v1/completions", R"({"prompt": []})", "prompt");
  expect_openai_400("/v1/completions", R"({"prompt": [1, -2]})", "prompt[1]");
  expect_openai_400("/v1/completions", R"({"prompt": [1, 100000]})", "prompt[1]");
  expect_openai_400("/v1/completions", R"({"prompt": ["a", {}]})", "prompt[1]");
  expect_openai_400("/v1/completions", R"({"prompt": "a", "logprobs": 99})", "logprobs");
  expect_openai_400("/v1/completions", R"({"prompt": "a", "best_of": 3})", "best_of");
  expect_openai_400("/v1/completions", R"({"prompt": "a", "suffix": "z"})", "suffix");
}

TEST_F(RouterTest, AnthropicParsingAndErrors) {
  auto result = post("/v1/messages", R"({
    "model": "demo", "max_tokens": 32, "system": [{"type": "text", "text": "sys"}],
    "messages": [{"role": "user", "content": "weather?"},
                 {"role": "assistant", "content": [{"type": "thinking", "thinking": "hmm", "signature": "s"},
                                                   {"type": "tool_use", "id": "t1", "name": "w", "input": {"c": "x"}}]},
                 {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "sunny"}]}],
    "tools": [{"name": "w", "input_schema": {"type": "object"}}],
    "stop_sequences": ["###"], "thinking": {"type": "enabled", "budget_tokens": 100}})",
                     {{"anthropic-version", "2023-06-01"}});
  ASSERT_TRUE(result.job) << result.response.body;
  EXPECT_EQ(result.style, ApiStyle::anthropic);
  EXPECT_EQ(result.job->requests[0].max_tokens, 32);
  EXPECT_EQ(result.job->requests[0].stop_strings, std::vector<std::string>{"###"});
  const json& messages = frontend.last_messages;
  EXPECT_EQ(messages[0]["role"], "system");
  EXPECT_EQ(messages[2]["reasoning_content"], "hmm");
  EXPECT_EQ(messages[2]["tool_calls"][0]["function"]["arguments"]["c"], "x");
  EXPECT_EQ(messages[3]["role"], "tool");
  EXPECT_EQ(messages[3]["content"], "sunny");

  auto check = [&](const std::string& body, const std::string& field) {
    json error = expect_error(post("/v1/messages", body), 400);
    EXPECT_EQ(error["type"], "error");
    EXPECT_EQ(error["error"]["type"], "invalid_request_error");
    EXPECT_NE(error["error"]["message"].get<std::string>().find(field), std::string::npos) << error;
  };
  check(R"({"model": "demo", "messages": [{"role": "user", "content": "x"}]})", "max_tokens");
  check(R"({"max_tokens": 5, "messages": [{"role": "user", "content": "x"}]})", "model");
  check(R"({"model": "demo", "max_tokens": 5, "messages": []})", "messages");
  check(R"({"model": "demo", "max_tokens": 5, "messages": [{"role": "system", "content": "x"}]})", "messages[0].role");
  check(R"({"model": "demo", "max_tokens": 5, "messages": [{"role": "user", "content": [{"type": "tool_use"}]}]})", "messages[0].content[0].type");
  check(R"({"model": "demo", "max_tokens": 5, "temperature": 1.5, "messages": [{"role": "user", "content": "x"}]})", "temperature");
  check(R"({"model": "demo", "max_tokens": 5, "thinking": {"type": "maybe"}, "messages": [{"role": "user", "content": "x"}]})", "thinking.type");
  check(R"({"model": "demo", "max_tokens": 5, "messages": [{"role": "user", "content": "x"}], "tools": [{"name": "a"}]})", "tools[0].input_schema");
  json bad_version = expect_error(post("/v1/messages", "{}", {{"anthropic-version", "yesterday"}}), 400);
  EXPECT_EQ(bad_version["type"], "error");
  json unknown = expect_error(post("/v1/messages", R"({"model": "nope", "max_tokens": 5, "messages": [{"role": "user", "content": "x"}]})"), 404);
  EXPECT_EQ(unknown["error"]["type"], "not_found_error");
}

TEST_F(RouterTest, ResponsesParsing) {
  auto text = post("/v1/responses", R"({"input": "hi", "instructions": "be nice", "max_output_tokens": 8})");
  ASSERT_TRUE(text.job) << text.response.body;
  EXPECT_EQ(text.job->requests[0].max_tokens, 8);
  EXPECT_EQ(frontend.last_messages[0]["role"], "system");
  auto items = post("/v1/responses", R"({"input": [
      {"role": "user", "content": [{"type": "input_text", "text": "q"}]},
      {"type": "reasoning", "summary": [{"type": "summary_text", "text": "think"}]},
      {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"},
      {"type": "function_call_output", "call_id": "c1", "output": "done"}],
      "tools": [{"type": "function", "name": "f", "parameters": {"type": "object"}}]})");
  ASSERT_TRUE(items.job) << items.response.body;
  EXPECT_EQ(frontend.last_messages[1]["reasoning_content"], "think");
  EXPECT_EQ(frontend.last_messages[1]["tool_calls"][0]["id"], "c1");
  EXPECT_EQ(frontend.last_messages[2]["role"], "tool");
  expect_openai_400("/v1/responses", R"({})", "input");
  expect_openai_400("/v1/responses", R"({"input": []})", "input");
  expect_openai_400("/v1/responses", R"({"input": [{"type": "mystery"}]})", "input[0].type");
  expect_openai_400("/v1/responses", R"({"input": "x", "previous_response_id": "resp_1"})", "previous_response_id");
  expect_openai_400("/v1/responses", R"({"input": "x", "tools": [{"type": "web_search"}]})", "tools[0].type");
  expect_openai_400("/v1/responses", R"({"input": "x", "max_output_tokens": 0})", "max_output_tokens");
}

TEST_F(RouterTest, TokenizeAndDetokenize) {
  json tokens = json::parse(post("/tokenize", R"({"prompt": "ab"})").response.body);
  EXPECT_EQ(tokens["tokens"], json({testing::kBos, 'a', 'b'}));
  EXPECT_EQ(tokens["count"], 3);
  EXPECT_EQ(tokens["max_model_len"], 512);
  json chat = json::parse(post("/tokenize", R"({"messages": [{"role": "user", "content": "x"}], "add_generation_prompt": false, "return_token_strs": true})").response.body);
  EXPECT_EQ(frontend.decode(chat["tokens"].get<std::vector<TokenId>>(), true), "user: x\n");
  EXPECT_EQ(chat["token_strs"][0], "u");
  json text = json::parse(post("/detokenize", R"({"tokens": [104, 105]})").response.body);
  EXPECT_EQ(text["prompt"], "hi");
  expect_openai_400("/tokenize", R"({})", "prompt");
  expect_openai_400("/detokenize", R"({"tokens": [1, "x"]})", "tokens[1]");
  expect_openai_400("/detokenize", R"({"tokens": [-1]})", "tokens[0]");
}

TEST_F(RouterTest, MetricsExposition) {
  metrics.record_request("/v1/chat/completions", 200);
  metrics.record_time_to_first_token(0.03);
  auto result = get("/metrics");
  EXPECT_EQ(result.response.status, 200);
  const std::string& text = result.response.body;
  EXPECT_NE(text.find("flare_requests_total{endpoint=\"/v1/chat/completions\",status=\"200\"} 1"), std::string::npos);
  EXPECT_NE(text.find("flare_time_to_first_token_seconds_bucket{le=\"0.04\"} 1"), std::string::npos) << text;
  EXPECT_NE(text.find("flare_time_to_first_token_seconds_count 1"), std::string::npos);
  EXPECT_NE(text.find("flare_kv_pages_free{model=\"demo\"} 100"), std::string::npos);
  EXPECT_NE(text.find("# TYPE flare_prefix_cache_hit_rate gauge"), std::string::npos);
}

TEST(Limits, DerivedFromContextAndConcurrency) {
  ModelInfo model = testing::fake_model();
  model.max_context_tokens = 32768;
  model.max_concurrency = 8;
  ServerLimits limits = derive_limits(model);
  EXPECT_EQ(limits.max_body_bytes, 32768u * 16u + (1u << 20));
  EXPECT_EQ(limits.max_connections, 1024 - 256);  // the default open-file limit less the reserve
  model.max_context_tokens = 10'000'000;
  EXPECT_EQ(derive_limits(model).max_body_bytes, 64u << 20);
  // The cap follows the open-file limit, within 16..65,536, and always holds every active
  // request twice over.
  EXPECT_EQ(derive_limits(model, 20'000).max_connections, 20'000 - 256);
  EXPECT_EQ(derive_limits(model, 10'000'000).max_connections, 65'536);
  EXPECT_EQ(derive_limits(model, 40).max_connections, 2 * 8 + 32);
  EXPECT_EQ(connection_cap(40), 30);  // a quarter kept back
  EXPECT_EQ(connection_cap(8), 16);
  EXPECT_EQ(connection_cap(200), 150);
}

TEST(Limits, RaisingTheOpenFileLimitReachesTheHardLimit) {
  rlimit before{};
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &before), 0);
  const int64_t now = raise_open_file_limit();
  rlimit after{};
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &after), 0);
  EXPECT_EQ(static_cast<int64_t>(after.rlim_cur), now);
  EXPECT_GE(after.rlim_cur, before.rlim_cur);
  if (before.rlim_max != RLIM_INFINITY && before.rlim_max <= (1u << 20)) {
    EXPECT_EQ(after.rlim_cur, before.rlim_max);
  }
}

}  // namespace
}  // namespace flare::server
