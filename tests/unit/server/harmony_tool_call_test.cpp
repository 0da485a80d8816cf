// Forced tool calls for gpt-oss (harmony): tool_choice "required" or a named function writes the
// reply as one commentary message "<|channel|>commentary to=functions.NAME <|constrain|>json
// <|message|>{...}<|call|>", on the chat, Responses and Anthropic routes. The constraint must let
// through exactly that shape (a declared name, arguments following the schema) and nothing else
// (a final answer, reasoning first, an undeclared name, arguments of the wrong type), and random
// walks under it must parse back, through the harmony parser, into one call whose arguments
// validate. The walks run over the demo tokenizer with harmony's specials here, and over the real
// o200k vocabulary when FLARE_O200K_DIR names a built o200k tokenizer (tests/e2e/o200k_tokenizer.sh).
#include <cstdlib>
#include <filesystem>
#include <random>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "../text/schema_conformance.h"
#include "constraint_drive.h"
#include "fakes.h"
#include "harmony_assets.h"
#include "server/adapters.h"
#include "server/api_error.h"
#include "server/tool_call_constraint.h"

namespace flare::server {
namespace {

using json = nlohmann::ordered_json;
using testing::harmony_frontend;

const char* kTools = R"([
  {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object",
    "properties": {"city": {"type": "string"}, "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
                   "days": {"type": "integer"}, "tags": {"type": "array", "items": {"type": "string"}}},
    "required": ["city", "unit"], "additionalProperties": false}}},
  {"type": "function", "function": {"name": "get_time", "parameters": {"type": "object",
    "properties": {"zone": {"type": ["string", "null"]}, "precise": {"type": "boolean"}}, "required": ["zone", "precise"]}}}])";

engine::GenerationRequest chat_request(const Frontend& frontend, const std::string& tool_choice, int max_tokens) {
  ModelInfo model = testing::fake_model();
  model.max_context_tokens = 4096;
  AdapterContext context{frontend, model};
  json body = json::parse(R"({"messages": [{"role": "user", "content": "Weather in Paris?"}]})");
  body["tools"] = json::parse(kTools);
  body["tool_choice"] = json::parse(tool_choice);
  body["max_tokens"] = max_tokens;
  GenerationJob job = prepare_chat_completion(body, context);
  return std::move(job.requests.at(0));
}

// One call of an allowed function, no content or reasoning, arguments that follow its schema.
void expect_one_valid_call(const Frontend& frontend, const std::vector<TokenId>& tokens,
                           const std::vector<std::string>& allowed) {
  const std::string text = frontend.decode(tokens, false);
  testing::ParsedOutput out = testing::parse_output(frontend, tokens);
  ASSERT_EQ(out.n_calls(), 1) << text;
  EXPECT_TRUE(out.content.empty() && out.reasoning.empty()) << text;
  const auto& call = out.calls[0];
  EXPECT_NE(std::find(allowed.begin(), allowed.end(), call.name), allowed.end()) << text;
  json arguments = json::parse(call.arguments, nullptr, false);
  ASSERT_FALSE(arguments.is_discarded()) << text;
  for (const auto& tool : json::parse(kTools)) {
    if (tool["function"]["name"] != call.name) continue;
    EXPECT_TRUE(flare::testing::conforms(tool["function"]["parameters"], arguments)) << text;
  }
  EXPECT_TRUE(text.starts_with("<|channel|>commentary to=functions." + call.name + " <|constrain|>json<|message|>")) << text;
  EXPECT_TRUE(text.ends_with("<|call|>")) << text;
}

// Walks under "required" and a named function at budgets from the tightest up.
void random_walks(const Frontend& frontend, int n_runs, uint32_t seed) {
  std::mt19937 rng(seed);
  int n_picked[2] = {};
  for (int max_tokens : {0, 4, 16, 64}) {
    auto required = chat_request(frontend, R"("required")", 400);
    const int shortest = dynamic_cast<const ToolCallConstraint&>(*required.constraint).min_tokens();
    required = chat_request(frontend, R"("required")", shortest + max_tokens);
    auto named = chat_request(frontend, R"({"type": "function", "function": {"name": "get_weather"}})", 400);
    const int named_budget = dynamic_cast<const ToolCallConstraint&>(*named.constraint).min_tokens() + max_tokens;
    named = chat_request(frontend, R"({"type": "function", "function": {"name": "get_weather"}})", named_budget);
    for (int run = 0; run < n_runs; ++run) {
      auto tokens = testing::drive(*required.constraint, required.max_tokens, rng);
      expect_one_valid_call(frontend, tokens, {"get_weather", "get_time"});
      ++n_picked[frontend.decode(tokens, false).find("get_weather") != std::string::npos];
      tokens = testing::drive(*named.constraint, named_budget, rng);
      expect_one_valid_call(frontend, tokens, {"get_weather"});
    }
  }
  EXPECT_GT(n_picked[0], 0);  // "required" picked each function at least once
  EXPECT_GT(n_picked[1], 0);
}

TEST(HarmonyForcedToolCall, RandomWalksParseIntoOneValidCall) { random_walks(harmony_frontend(), 6, 1); }

TEST(HarmonyForcedToolCall, AcceptsTheCallAndNothingElse) {
  const Frontend& frontend = harmony_frontend();
  auto required = chat_request(frontend, R"("required")", 200);
  auto named = chat_request(frontend, R"({"type": "function", "function": {"name": "get_time"}})", 200);
  auto tokens = [&](const std::string& text) { return frontend.encode(text, false); };
  const std::string weather =
      R"(<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{"city": "Paris", "unit": "celsius"}<|call|>)";
  const std::string time = R"(<|channel|>commentary to=functions.get_time <|constrain|>json<|message|>{"zone": null, "precise": true}<|call|>)";
  EXPECT_TRUE(testing::constraint_accepts(*required.constraint, tokens(weather), 200));
  EXPECT_TRUE(testing::constraint_accepts(*required.constraint, tokens(time), 200));
  EXPECT_TRUE(testing::constraint_accepts(*named.constraint, tokens(time), 200));
  EXPECT_FALSE(testing::constraint_accepts(*named.constraint, tokens(weather), 200)) << "not the named function";
  const std::string refused[] = {
      "<|channel|>final<|message|>It is sunny.<|return|>",                     // an answer instead of a call
      "<|channel|>analysis<|message|>Let me call it.<|end|>",                  // reasoning first
      "<|channel|>commentary<|message|>Checking.<|end|>",                      // a preamble
      "<|channel|>commentary to=functions.get_stock <|constrain|>json<|message|>{}<|call|>",  // undeclared
      R"(<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{"city": 5, "unit": "celsius"}<|call|>)",
      R"(<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{"city": "Paris"}<|call|>)",  // unit missing
      R"(<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{"city": "P", "unit": "kelvin"}<|call|>)",
      R"(<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{"city": "P", "unit": "celsius", "x": 1}<|call|>)",
      R"(<|channel|>commentary to=functions.get_time <|constrain|>json<|message|>{"zone": null, "precise": true}<|end|>)",
      R"(<|channel|>commentary to=functions.get_time <|constrain|>json<|message|>{"zone": null, "precise": true}<|return|>)",
      R"(<|channel|>commentary to=functions.get_time <|constrain|>json<|message|><|return|>)",
  };
  for (const auto& text : refused) EXPECT_FALSE(testing::constraint_accepts(*required.constraint, tokens(text), 200)) << text;
}

TEST(HarmonyForcedToolCall, EveryApiForcesTheCall) {
  const Frontend& frontend = harmony_frontend();
  ModelInfo model = testing::fake_model();
  AdapterContext context{frontend, model};
  std::mt19937 rng(7);
  json tools = json::parse(kTools);
  json responses = {{"input", "Weather?"}, {"max_output_tokens", 200}, {"tool_choice", "required"}, {"tools", json::array()}};
  for (const auto& tool : tools) {
    responses["tools"].push_back({{"type", "function"}, {"name", tool["function"]["name"]}, {"parameters", tool["function"]["parameters"]}});
  }
  GenerationJob job = prepare_responses(responses, context);
  ASSERT_TRUE(job.requests[0].constraint);
  expect_one_valid_call(frontend, testing::drive(*job.requests[0].constraint, 200, rng), {"get_weather", "get_time"});
  responses["tool_choice"] = {{"type", "function"}, {"name", "get_time"}};
  job = prepare_responses(responses, context);
  expect_one_valid_call(frontend, testing::drive(*job.requests[0].constraint, 200, rng), {"get_time"});

  json anthropic = {{"model", "demo"}, {"max_tokens", 200}, {"messages", {{{"role", "user"}, {"content", "Weather?"}}}},
                    {"tool_choice", {{"type", "any"}}}, {"tools", json::array()}};
  for (const auto& tool : tools) {
    anthropic["tools"].push_back({{"name", tool["function"]["name"]}, {"input_schema", tool["function"]["parameters"]}});
  }
  job = prepare_anthropic_messages(anthropic, context);
  ASSERT_TRUE(job.requests[0].constraint);
  expect_one_valid_call(frontend, testing::drive(*job.requests[0].constraint, 200, rng), {"get_weather", "get_time"});
  anthropic["tool_choice"] = {{"type", "tool"}, {"name", "get_weather"}};
  job = prepare_anthropic_messages(anthropic, context);
  expect_one_valid_call(frontend, testing::drive(*job.requests[0].constraint, 200, rng), {"get_weather"});
}

TEST(HarmonyForcedToolCall, BudgetTooSmallForTheCallIsA400) {
  try {
    chat_request(harmony_frontend(), R"("required")", 8);
    ADD_FAILURE() << "max_tokens 8 cannot hold a harmony call";
  } catch (const ApiError& error) {
    EXPECT_EQ(error.status(), 400);
    EXPECT_EQ(error.param(), "max_tokens");
  }
}

// The real gpt-oss vocabulary (201,088 tokens, built by tests/e2e/o200k_tokenizer.sh).
TEST(HarmonyForcedToolCallO200k, RandomWalksParseIntoOneValidCall) {
  const char* dir = std::getenv("FLARE_O200K_DIR");
  if (dir == nullptr || *dir == '\0') GTEST_SKIP() << "FLARE_O200K_DIR is unset (tests/e2e/o200k_tokenizer.sh sets it)";
  TextFrontendAssets assets;
  assets.tokenizer_json = testing::read_file(std::filesystem::path(dir) / "tokenizer.json");
  assets.tokenizer_config_json = testing::read_file(std::filesystem::path(dir) / "tokenizer_config.json");
  assets.architecture = "GptOssForCausalLM";
  auto frontend = make_text_frontend(assets);
  ASSERT_EQ(frontend->vocab_size(), 201088);
  random_walks(*frontend, 3, 2);
}

}  // namespace
}  // namespace flare::server
