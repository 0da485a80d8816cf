// Strict tools under tool_choice "auto" (strict_tool_calls.h): free text until the format's
// opener, then a call whose name is declared and whose arguments follow the schema, then free
// text again. The "model" here writes scripted free text (or random tokens the rule allows) and,
// once a call has begun, any token the constraint allows, uniformly; the output is read back by the
// family's parser. Qwen3 (hermes, "<tool_call>" is one special token), harmony (the demo tokenizer
// with harmony's specials, and the real o200k vocabulary when FLARE_O200K_DIR is set), and the
// opener watch itself on a vocabulary made to split the opener every way.
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
#include "server/opener_watch.h"
#include "server/strict_tool_calls.h"
#include "test_assets.h"

namespace flare::server {
namespace {

using json = nlohmann::ordered_json;

const char* kTools = R"([
  {"type": "function", "function": {"name": "get_weather", "strict": true, "parameters": {"type": "object",
    "properties": {"city": {"type": "string"}, "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
                   "days": {"type": "integer"}},
    "required": ["city", "unit", "days"], "additionalProperties": false}}},
  {"type": "function", "function": {"name": "get_time", "parameters": {"type": "object",
    "properties": {"zone": {"type": "string"}}, "required": ["zone"]}}}])";

const Frontend& qwen3() {
  static const std::unique_ptr<Frontend> frontend = make_text_frontend(testing::fixture_assets("qwen3", "Qwen3ForCausalLM"));
  return *frontend;
}

engine::GenerationRequest chat_request(const Frontend& frontend, const json& tools, const std::string& tool_choice = "auto") {
  ModelInfo model = testing::fake_model();
  model.max_context_tokens = 4096;
  AdapterContext context{frontend, model};
  json body = json::parse(R"({"messages": [{"role": "user", "content": "Weather in Paris?"}], "max_tokens": 1000})");
  body["tools"] = tools;
  body["tool_choice"] = tool_choice;
  GenerationJob job = prepare_chat_completion(body, context);
  return std::move(job.requests.at(0));
}

// The tokens left when a call begins: a random walk inside a JSON string rarely picks a closing
// quote, so the budget is what closes the arguments, as max_tokens would.
constexpr int kCallBudget = 120;

// Writes `script` (free text: each piece must be allowed, and none may begin a call before its
// end), letting the constraint write each call the script opens, and returns every token.
// A piece ending in the opener begins a call: the walk then picks uniformly among the allowed
// tokens until the constraint lets go.
std::vector<TokenId> walk(const Frontend& frontend, const engine::TokenConstraint& constraint,
                          const std::vector<std::string>& script, std::mt19937& rng, int* n_calls_begun) {
  auto state = constraint.clone();
  std::vector<TokenId> out;
  for (const auto& piece : script) {
    for (TokenId token : frontend.encode(piece, false)) {
      EXPECT_FALSE(state->decides_end()) << "a call began inside '" << piece << "'";
      EXPECT_TRUE(testing::rule_allows(state->next(1000), token)) << piece;
      state->accept(token);
      out.push_back(token);
    }
    if (!state->decides_end()) continue;
    ++*n_calls_begun;
    for (int i = 0; i < kCallBudget && state->decides_end(); ++i) {
      std::vector<TokenId> allowed = testing::allowed_tokens(state->next(kCallBudget - i), 0);
      EXPECT_FALSE(allowed.empty());
      if (allowed.empty()) break;
      TokenId token = allowed[rng() % allowed.size()];
      state->accept(token);
      out.push_back(token);
    }
    EXPECT_FALSE(state->decides_end()) << "the call did not close";
    EXPECT_FALSE(state->finished());
  }
  return out;
}

void expect_valid_calls(const testing::ParsedOutput& out, int n_calls, const std::string& text) {
  ASSERT_EQ(out.n_calls(), n_calls) << text;
  for (const auto& call : out.calls) {
    json arguments = json::parse(call.arguments, nullptr, false);
    ASSERT_FALSE(arguments.is_discarded()) << text;
    bool declared = false;
    for (const auto& tool : json::parse(kTools)) {
      if (tool["function"]["name"] != call.name) continue;
      declared = true;
      EXPECT_TRUE(flare::testing::conforms(tool["function"]["parameters"], arguments)) << call.arguments << "\n" << text;
    }
    EXPECT_TRUE(declared) << call.name << "\n" << text;
  }
}

TEST(StrictToolsAuto, OnlyRequestsWithStrictToolsAreConstrained) {
  json tools = json::parse(kTools);
  EXPECT_TRUE(dynamic_cast<const StrictToolCallConstraint*>(chat_request(qwen3(), tools).constraint.get()));
  tools[0]["function"].erase("strict");
  EXPECT_FALSE(chat_request(qwen3(), tools).constraint);
  tools[0]["function"]["strict"] = false;
  EXPECT_FALSE(chat_request(qwen3(), tools).constraint);
  EXPECT_FALSE(chat_request(qwen3(), json::parse(kTools), "none").constraint);
  // Llama 3's calls are bare JSON objects, with no opener to watch for: not enforced.
  auto llama3 = make_text_frontend(testing::fixture_assets("llama3", "LlamaForCausalLM"));
  EXPECT_FALSE(chat_request(*llama3, json::parse(kTools)).constraint);
}

TEST(StrictToolsAuto, AStrictSchemaTheGrammarCannotEnforceIsA400) {
  json tools = json::parse(kTools);
  tools[0]["function"]["parameters"]["properties"]["city"]["not"] = {{"type", "null"}};
  try {
    chat_request(qwen3(), tools);
    ADD_FAILURE() << "'not' is not supported";
  } catch (const ApiError& error) {
    EXPECT_EQ(error.status(), 400);
    EXPECT_EQ(error.param(), "tools[0].function.parameters/properties/city/not");
  }
}

TEST(StrictToolsAuto, Qwen3CallsFollowTheSchemaBetweenFreeText) {
  const Frontend& frontend = qwen3();
  auto request = chat_request(frontend, json::parse(kTools));
  std::mt19937 rng(11);
  for (int run = 0; run < 12; ++run) {
    int n_begun = 0;
    auto tokens = walk(frontend, *request.constraint,
                       {"I will look it up. <tool_call>", "\n<tool_call>", "\nDone."}, rng, &n_begun);
    EXPECT_EQ(n_begun, 2);
    const std::string text = frontend.decode(tokens, false);
    testing::ParsedOutput out = testing::parse_output(frontend, tokens);
    expect_valid_calls(out, n_begun, text);
    EXPECT_NE(out.content.find("I will look it up."), std::string::npos) << text;
  }
}

// DeepSeek-V3: each call of a list opens with <｜tool▁call▁begin｜>; the list's own markers are free.
TEST(StrictToolsAuto, DeepSeekEachCallOfAListFollowsTheSchema) {
  auto frontend = make_text_frontend(testing::fixture_assets("deepseek_v3", "DeepseekV3ForCausalLM"));
  ASSERT_EQ(frontend->tool_call_format(), "deepseek_v3");
  auto request = chat_request(*frontend, json::parse(kTools));
  ASSERT_TRUE(request.constraint);
  std::mt19937 rng(15);
  for (int run = 0; run < 6; ++run) {
    int n_begun = 0;
    auto tokens = walk(*frontend, *request.constraint,
                       {"Checking.<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>", "\n<｜tool▁call▁begin｜>", "<｜tool▁calls▁end｜>"},
                       rng, &n_begun);
    EXPECT_EQ(n_begun, 2);
    const std::string text = frontend->decode(tokens, false);
    expect_valid_calls(testing::parse_output(*frontend, tokens), 2, text);
  }
}

// Random free tokens: whatever the model writes between calls, a call it begins is valid.
TEST(StrictToolsAuto, RandomFreeTextNeverLeavesACallHalfFree) {
  const Frontend& frontend = qwen3();
  auto request = chat_request(frontend, json::parse(kTools));
  auto vocabulary = frontend.token_vocabulary();
  const TokenId opener = frontend.encode("<tool_call>", false).at(0);
  std::mt19937 rng(12);
  for (int run = 0; run < 20; ++run) {
    auto state = request.constraint->clone();
    std::vector<TokenId> tokens;
    int n_begun = 0;
    size_t call_start = 0;
    auto call_rule = [&] { return state->next(kCallBudget - static_cast<int>(tokens.size() - call_start)); };
    while (tokens.size() < 300) {
      const bool in_call = state->decides_end();
      engine::TokenRule rule = in_call ? call_rule() : state->next(1000);
      TokenId token;
      if (in_call) {
        auto allowed = testing::allowed_tokens(rule, vocabulary->bytes.size());
        token = allowed[rng() % allowed.size()];
      } else if (rng() % 8 == 0) {
        token = opener;
        ++n_begun;
      } else {
        do token = TokenId(rng() % vocabulary->bytes.size());
        while (vocabulary->control[size_t(token)] || !testing::rule_allows(rule, token));
      }
      state->accept(token);
      tokens.push_back(token);
      if (!in_call && state->decides_end()) call_start = tokens.size() - 1;
    }
    while (state->decides_end()) {  // let the last call close
      auto allowed = testing::allowed_tokens(call_rule(), vocabulary->bytes.size());
      const TokenId token = allowed[rng() % allowed.size()];
      state->accept(token);
      tokens.push_back(token);
    }
    const std::string text = frontend.decode(tokens, false);
    expect_valid_calls(testing::parse_output(frontend, tokens), n_begun, text);
  }
}

TEST(StrictToolsAuto, HarmonyCallsInHeadersOnly) {
  const Frontend& frontend = testing::harmony_frontend();
  auto request = chat_request(frontend, json::parse(kTools));
  ASSERT_TRUE(request.constraint);
  std::mt19937 rng(13);
  for (int run = 0; run < 8; ++run) {
    int n_begun = 0;
    // Reasoning that mentions to=functions. is a message body, not a call; the commentary header's is.
    auto tokens = walk(frontend, *request.constraint,
                       {"<|channel|>analysis<|message|>I could send to=functions.get_weather now.<|end|>",
                        "<|start|>assistant<|channel|>commentary to=functions."},
                       rng, &n_begun);
    EXPECT_EQ(n_begun, 1);
    std::string text = frontend.decode(tokens, false);
    testing::ParsedOutput out = testing::parse_output(frontend, tokens);
    expect_valid_calls(out, 1, text);
    EXPECT_NE(out.reasoning.find("to=functions.get_weather now."), std::string::npos) << text;
    EXPECT_TRUE(text.ends_with("<|call|>")) << text;

    // The recipient before the channel: the constraint writes the channel after the name.
    n_begun = 0;
    tokens = walk(frontend, *request.constraint, {" to=functions."}, rng, &n_begun);
    EXPECT_EQ(n_begun, 1);
    text = frontend.decode(tokens, false);
    expect_valid_calls(testing::parse_output(frontend, tokens), 1, text);
    EXPECT_NE(text.find("<|channel|>commentary <|constrain|>json<|message|>"), std::string::npos) << text;

    // A final answer may say anything.
    n_begun = 0;
    tokens = walk(frontend, *request.constraint, {"<|channel|>final<|message|>Use to=functions.get_time."}, rng, &n_begun);
    EXPECT_EQ(n_begun, 0);
  }
}

TEST(StrictToolsAuto, ResponsesAndAnthropicPassStrictThrough) {
  const Frontend& frontend = qwen3();
  ModelInfo model = testing::fake_model();
  AdapterContext context{frontend, model};
  json responses = {{"input", "hi"}, {"tools", {{{"type", "function"}, {"name", "f"}, {"strict", true},
                                                 {"parameters", {{"type", "object"}}}}}}};
  EXPECT_TRUE(prepare_responses(responses, context).requests[0].constraint);
  responses["tools"][0]["strict"] = false;
  EXPECT_FALSE(prepare_responses(responses, context).requests[0].constraint);
  json anthropic = {{"model", "demo"}, {"max_tokens", 16}, {"messages", {{{"role", "user"}, {"content", "hi"}}}},
                    {"tools", {{{"name", "f"}, {"strict", true}, {"input_schema", {{"type", "object"}}}}}}};
  EXPECT_TRUE(prepare_anthropic_messages(anthropic, context).requests[0].constraint);
  anthropic["tools"][0]["strict"] = "yes";
  try {
    prepare_anthropic_messages(anthropic, context);
    ADD_FAILURE() << "strict must be a boolean";
  } catch (const ApiError& error) {
    EXPECT_EQ(error.status(), 400);
  }
}

// A vocabulary that splits "<tool_call>" every way: tokens that end the opener exactly open a
// call; tokens that would run past its end are refused while a partial match is open.
TEST(OpenerWatch, RefusesTokensThatStraddleTheOpener) {
  TokenVocabulary vocabulary;
  vocabulary.bytes = {"<", "tool", "<tool", "_call>", "_call>\n", "l>", ">x", "x", "<tool_call>", "a<tool_call>b", "_ca"};
  vocabulary.control.assign(vocabulary.bytes.size(), 0);
  OpenerWatch watch("<tool_call>", vocabulary);
  auto allows = [&](uint32_t state, TokenId token) {
    const auto& mask = watch.allowed(state);
    return !mask || (((*mask)[size_t(token) / 64] >> (token & 63)) & 1);
  };
  // Nothing matched: only a token holding the whole opener before its end straddles.
  EXPECT_FALSE(allows(0, 9));
  EXPECT_TRUE(allows(0, 8));
  auto step = watch.advance(0, "<tool");
  EXPECT_EQ(step.state, 5u);
  EXPECT_FALSE(step.opened);
  EXPECT_TRUE(allows(5, 3));   // "_call>" ends it exactly
  EXPECT_FALSE(allows(5, 4));  // "_call>\n" runs past it
  EXPECT_TRUE(watch.advance(5, "_call>").opened);
  step = watch.advance(watch.advance(5, "_ca").state, "l");
  EXPECT_EQ(step.state, 9u);   // "<tool_cal"
  EXPECT_TRUE(allows(9, 5));   // "l>" ends it exactly
  EXPECT_TRUE(watch.advance(9, "l>").opened);
  EXPECT_FALSE(allows(10, 6));  // ">x" runs past it
  EXPECT_TRUE(allows(10, 7));
  EXPECT_EQ(watch.advance(10, "x").state, 0u);
  // A mismatch falls back to the longest partial match: "<tool" then "<" starts again.
  EXPECT_EQ(watch.advance(5, "<").state, 1u);
  EXPECT_TRUE(watch.advance(0, "<tool_call>").opened);
  EXPECT_FALSE(watch.advance(0, "a<tool_call>b").opened);
}

// The real gpt-oss vocabulary (201,088 tokens, built by tests/e2e/o200k_tokenizer.sh).
TEST(StrictToolsAutoO200k, HarmonyCallsFollowTheSchema) {
  const char* dir = std::getenv("FLARE_O200K_DIR");
  if (dir == nullptr || *dir == '\0') GTEST_SKIP() << "FLARE_O200K_DIR is unset (tests/e2e/o200k_tokenizer.sh sets it)";
  TextFrontendAssets assets;
  assets.tokenizer_json = testing::read_file(std::filesystem::path(dir) / "tokenizer.json");
  assets.tokenizer_config_json = testing::read_file(std::filesystem::path(dir) / "tokenizer_config.json");
  assets.architecture = "GptOssForCausalLM";
  auto frontend = make_text_frontend(assets);
  auto request = chat_request(*frontend, json::parse(kTools));
  std::mt19937 rng(14);
  for (int run = 0; run < 4; ++run) {
    int n_begun = 0;
    auto tokens = walk(*frontend, *request.constraint,
                       {"<|channel|>analysis<|message|>Maybe to=functions.get_time.<|end|>",
                        "<|start|>assistant<|channel|>commentary to=functions."},
                       rng, &n_begun);
    EXPECT_EQ(n_begun, 1);
    expect_valid_calls(testing::parse_output(*frontend, tokens), 1, frontend->decode(tokens, false));
  }
}

}  // namespace
}  // namespace flare::server
