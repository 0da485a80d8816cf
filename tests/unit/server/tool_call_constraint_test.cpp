// Forced tool calls (tool_call_constraint.h) and key order, through the chat, Anthropic and
// Responses adapters with the byte-level fake frontend and the real Qwen3 tokenizer and template.
// The constraint is driven like a random-weight model would drive it (a uniform pick among the
// allowed tokens, under budgets from tight to loose): every run must end in exactly one call of
// an allowed function, with JSON-object arguments that follow its parameters schema, that the
// model family's parser reads back.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "../text/schema_conformance.h"
#include "fakes.h"
#include "server/adapters.h"
#include "server/text_frontend.h"
#include "server/tool_call_constraint.h"

namespace flare::server {
namespace {

using json = nlohmann::ordered_json;
namespace fs = std::filesystem;

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

std::string read_maybe_xz(const fs::path& path) {
  if (fs::exists(path)) return read_file(path);
  std::string command = "xz -dc '" + path.string() + ".xz'";
  std::FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) return {};
  std::string out;
  char buffer[1 << 16];
  for (size_t n; (n = std::fread(buffer, 1, sizeof(buffer), pipe)) > 0;) out.append(buffer, n);
  ::pclose(pipe);
  return out;
}

const Frontend& qwen3() {
  static const std::unique_ptr<Frontend> frontend = [] {
    fs::path dir = fs::path(FLARE_TEST_DATA) / "tokenizers" / "qwen3";
    TextFrontendAssets assets;
    assets.tokenizer_json = read_maybe_xz(dir / "tokenizer.json");
    assets.tokenizer_config_json = read_maybe_xz(dir / "tokenizer_config.json");
    assets.architecture = "Qwen3ForCausalLM";
    return make_text_frontend(assets);
  }();
  return *frontend;
}

ModelInfo model_info() {
  ModelInfo model = testing::fake_model();
  model.max_context_tokens = 4096;
  return model;
}

// What a random-weight model does under the constraint: any allowed token, uniformly.
std::vector<TokenId> drive(const engine::TokenConstraint& constraint, int32_t max_tokens, std::mt19937& rng) {
  auto state = constraint.clone();
  std::vector<TokenId> out;
  while (static_cast<int32_t>(out.size()) < max_tokens && !state->finished()) {
    engine::TokenRule rule = state->next(max_tokens - static_cast<int32_t>(out.size()));
    EXPECT_NE(rule.kind, engine::TokenRule::Kind::any);
    std::vector<TokenId> allowed = rule.tokens;
    if (rule.kind == engine::TokenRule::Kind::mask) {  // a grammar's mask: its bits and its extra tokens
      for (size_t w = 0; w < rule.mask->size(); ++w) {
        for (uint64_t bits = (*rule.mask)[w]; bits != 0; bits &= bits - 1) allowed.push_back(TokenId(w * 64 + __builtin_ctzll(bits)));
      }
    }
    EXPECT_FALSE(allowed.empty());
    if (allowed.empty()) break;
    TokenId token = allowed[rng() % allowed.size()];
    state->accept(token);
    out.push_back(token);
  }
  EXPECT_TRUE(state->finished()) << "the call did not close within " << max_tokens << " tokens";
  return out;
}

struct Call {
  std::string content, name, arguments;
  int n_calls = 0;
};

Call parse_output(const Frontend& frontend, const std::vector<TokenId>& tokens, bool prompt_opened_reasoning = false) {
  auto detokenizer = frontend.make_detokenizer(true);
  ParserOptions options;
  options.parse_tool_calls = true;
  options.prompt_opened_reasoning = prompt_opened_reasoning;
  auto parser = frontend.make_parser(options);
  Call call;
  auto take = [&](const std::vector<ParsedEvent>& events) {
    for (const auto& event : events) {
      if (event.kind == ParsedEvent::Kind::content) call.content += event.text;
      if (event.kind == ParsedEvent::Kind::tool_call_begin) {
        ++call.n_calls;
        call.name = event.tool_name;
      }
      if (event.kind == ParsedEvent::Kind::tool_call_arguments) call.arguments += event.text;
    }
  };
  for (TokenId id : tokens) take(parser->push(detokenizer->push(id)));  // streamed token by token
  take(parser->push(detokenizer->flush()));
  take(parser->finish());
  return call;
}

const char* kTools = R"([
  {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}},
  {"type": "function", "function": {"name": "get_time", "parameters": {"type": "object", "properties": {"zone": {"type": "string"}}}}}])";

// Tools whose arguments have required keys of every supported type.
const char* kTypedTools = R"([
  {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object",
    "properties": {"city": {"type": "string"}, "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
                   "days": {"type": "integer"}, "hourly": {"type": "boolean"},
                   "where": {"type": "object", "properties": {"lat": {"type": "number"}, "lon": {"type": "number"}},
                             "required": ["lat", "lon"]},
                   "tags": {"type": "array", "items": {"type": "string"}}},
    "required": ["city", "unit", "days"]}}},
  {"type": "function", "function": {"name": "get_time", "parameters": {"type": "object",
    "properties": {"zone": {"type": ["string", "null"]}, "precise": {"type": "boolean"}}, "required": ["zone", "precise"]}}}])";

// `tools`: the request's tools, whose schema the arguments must follow.
void expect_one_call(const Call& call, const std::vector<std::string>& allowed, const std::string& context,
                     const char* tools = kTools) {
  EXPECT_EQ(call.n_calls, 1) << context;
  EXPECT_NE(std::find(allowed.begin(), allowed.end(), call.name), allowed.end()) << call.name << " " << context;
  json arguments = json::parse(call.arguments, nullptr, false);
  EXPECT_TRUE(!arguments.is_discarded() && arguments.is_object()) << call.arguments << " " << context;
  EXPECT_EQ(call.content.find_first_not_of(" \n"), std::string::npos) << call.content << " " << context;
  for (const auto& tool : json::parse(tools)) {
    if (tool["function"]["name"] != call.name || arguments.is_discarded()) continue;
    EXPECT_TRUE(flare::testing::conforms(tool["function"]["parameters"], arguments)) << call.arguments << " " << context;
  }
}

engine::GenerationRequest chat_request(const Frontend& frontend, const std::string& tool_choice, int max_tokens,
                                       const std::string& tools = kTools) {
  ModelInfo model = model_info();
  AdapterContext context{frontend, model};
  json body = json::parse(R"({"messages": [{"role": "user", "content": "Weather in Paris?"}]})");
  body["tools"] = json::parse(tools);
  body["tool_choice"] = json::parse(tool_choice);
  body["max_tokens"] = max_tokens;
  GenerationJob job = prepare_chat_completion(body, context);
  return std::move(job.requests.at(0));
}

TEST(ForcedToolCall, FakeFrontendWritesExactlyOneCall) {
  testing::FakeFrontend frontend;
  std::mt19937 rng(1);
  for (int max_tokens : {62, 63, 65, 70, 90, 200}) {  // 62: the shortest call, get_time's
    auto request = chat_request(frontend, R"("required")", max_tokens);
    ASSERT_TRUE(request.constraint);
    for (int run = 0; run < 40; ++run) {
      auto tokens = drive(*request.constraint, max_tokens, rng);
      ASSERT_LE(static_cast<int>(tokens.size()), max_tokens);
      std::string text = frontend.decode(tokens, true);
      ASSERT_TRUE(text.starts_with("<tool_call>\n{\"name\": \"get_")) << text;
      ASSERT_TRUE(text.ends_with("}\n</tool_call>")) << text;
      expect_one_call(parse_output(frontend, tokens), {"get_weather", "get_time"}, text);
    }
  }
}

TEST(ForcedToolCall, Qwen3NamedAndRequiredParseBack) {
  const Frontend& frontend = qwen3();
  std::mt19937 rng(2);
  for (int max_tokens : {20, 24, 32, 64}) {
    auto required = chat_request(frontend, R"("required")", max_tokens);
    auto named = chat_request(frontend, R"({"type": "function", "function": {"name": "get_time"}})", max_tokens);
    for (int run = 0; run < 3; ++run) {
      auto tokens = drive(*required.constraint, max_tokens, rng);
      expect_one_call(parse_output(frontend, tokens), {"get_weather", "get_time"}, frontend.decode(tokens, false));
      tokens = drive(*named.constraint, max_tokens, rng);
      expect_one_call(parse_output(frontend, tokens), {"get_time"}, frontend.decode(tokens, false));
    }
  }
}

// The random walk over the real vocabulary: whatever tokens a model picks, the arguments have
// every required key, no other, and the declared types, down to the tightest budget.
TEST(ForcedToolCall, Qwen3ArgumentsFollowTheSchema) {
  const Frontend& frontend = qwen3();
  std::mt19937 rng(6);
  int n_calls[2] = {};
  // 41: the shortest call, get_time's; 52: get_weather's, the shortest named one.
  for (int max_tokens : {41, 44, 52, 56, 64, 128}) {
    auto required = chat_request(frontend, R"("required")", max_tokens, kTypedTools);
    const int named_max_tokens = std::max(max_tokens, 52);
    auto named = chat_request(frontend, R"({"type": "function", "function": {"name": "get_weather"}})",
                              named_max_tokens, kTypedTools);
    for (int run = 0; run < 4; ++run) {
      auto tokens = drive(*required.constraint, max_tokens, rng);
      Call call = parse_output(frontend, tokens);
      expect_one_call(call, {"get_weather", "get_time"}, frontend.decode(tokens, false), kTypedTools);
      ++n_calls[call.name == "get_weather"];
      tokens = drive(*named.constraint, named_max_tokens, rng);
      expect_one_call(parse_output(frontend, tokens), {"get_weather"}, frontend.decode(tokens, false), kTypedTools);
    }
  }
  EXPECT_GT(n_calls[0], 0);  // both functions were picked under "required"
  EXPECT_GT(n_calls[1], 0);
}

// Required keys lengthen the shortest call: a budget that cannot hold them is the same 400 as one
// that cannot hold "{}", and the shortest budget that can still writes them all.
TEST(ForcedToolCall, RequiredKeysSetTheSmallestMaxTokens) {
  testing::FakeFrontend frontend;  // byte-level: one token per byte
  const std::string named = R"({"type": "function", "function": {"name": "get_time"}})";
  // <tool_call>\n{"name": "get_time", "arguments": ... }\n</tool_call>: 60 bytes around the
  // arguments, which are at least {"zone":"","precise":true} (26).
  int smallest = 0;
  for (int max_tokens = 60; max_tokens < 100 && smallest == 0; ++max_tokens) {
    try {
      chat_request(frontend, named, max_tokens, kTypedTools);
      smallest = max_tokens;
    } catch (const ApiError& error) {
      EXPECT_EQ(error.status(), 400);
      EXPECT_EQ(error.param(), "max_tokens");
    }
  }
  auto free_request = chat_request(frontend, named, 200);  // no required keys: "{}"
  EXPECT_EQ(smallest, dynamic_cast<const ToolCallConstraint&>(*free_request.constraint).min_tokens() + 24);
  std::mt19937 rng(9);
  auto request = chat_request(frontend, named, smallest, kTypedTools);
  for (int run = 0; run < 20; ++run) {
    auto tokens = drive(*request.constraint, smallest, rng);
    const std::string text = frontend.decode(tokens, true);
    EXPECT_NE(text.find(R"("arguments": {"zone":"","precise":true})"), std::string::npos) << text;
    expect_one_call(parse_output(frontend, tokens), {"get_time"}, text, kTypedTools);
  }
}

// Schemas the recognizer cannot or will not enforce still force a call: free JSON there.
TEST(ForcedToolCall, HostileSchemasStillForceACall) {
  testing::FakeFrontend frontend;
  json deep = json::object();
  for (int level = 0; level < 500; ++level) deep = {{"type", "object"}, {"properties", {{"a", deep}}}, {"required", {"a"}}};
  json huge = json::array();
  for (int i = 0; i < 20000; ++i) huge.push_back("value" + std::to_string(i));
  const std::vector<json> schemas = {
      deep,
      {{"type", "object"}, {"properties", {{"e", {{"enum", huge}}}}}, {"required", {"e"}}},
      json::parse(R"({"type": "object", "properties": {"a": {"type": 5}, "b": {"$ref": "#/x"}, "c": {"oneOf": []}}})"),
      json::parse(R"({"type": "object", "properties": [], "required": "a"})"),
      json::parse(R"({"type": "object", "properties": {"a": {"type": "string", "pattern": "^x"}}, "required": ["a"]})"),
  };
  std::mt19937 rng(10);
  for (const auto& schema : schemas) {
    json tools = json::array({{{"type", "function"}, {"function", {{"name", "f"}, {"parameters", schema}}}}});
    auto request = chat_request(frontend, R"("required")", 400, tools.dump());
    ASSERT_TRUE(request.constraint);
    for (int run = 0; run < 5; ++run) {
      auto tokens = drive(*request.constraint, 400, rng);
      expect_one_call(parse_output(frontend, tokens), {"f"}, frontend.decode(tokens, true), "[]");
    }
  }
}

TEST(ForcedToolCall, ClosesAReasoningBlockThePromptOpened) {
  const Frontend& frontend = qwen3();
  engine::GenerationRequest request;
  request.max_tokens = 40;
  force_tool_call(frontend, {"get_weather"}, json::array(), true, "tool_choice", "max_tokens", request);
  std::mt19937 rng(3);
  auto tokens = drive(*request.constraint, request.max_tokens, rng);
  EXPECT_TRUE(frontend.decode(tokens, false).starts_with("</think>\n\n<tool_call>\n{\"name\": \"get_weather\""));
  // No tool declares parameters here: the arguments are any JSON object.
  expect_one_call(parse_output(frontend, tokens, true), {"get_weather"}, frontend.decode(tokens, false), "[]");
}

TEST(ForcedToolCall, AnthropicAndResponsesUseTheSameMechanism) {
  testing::FakeFrontend frontend;
  ModelInfo model = model_info();
  AdapterContext context{frontend, model};
  std::mt19937 rng(4);
  json anthropic = json::parse(R"({"model": "demo", "max_tokens": 80, "messages": [{"role": "user", "content": "hi"}],
      "tools": [{"name": "get_weather", "input_schema": {"type": "object"}}, {"name": "get_time", "input_schema": {"type": "object"}}],
      "tool_choice": {"type": "tool", "name": "get_time"}})");
  GenerationJob job = prepare_anthropic_messages(anthropic, context);
  ASSERT_TRUE(job.requests[0].constraint);
  expect_one_call(parse_output(frontend, drive(*job.requests[0].constraint, 80, rng)), {"get_time"}, "anthropic tool", "[]");
  anthropic["tool_choice"] = {{"type", "any"}};
  job = prepare_anthropic_messages(anthropic, context);
  ASSERT_TRUE(job.requests[0].constraint);
  anthropic["tool_choice"] = {{"type", "auto"}};
  EXPECT_FALSE(prepare_anthropic_messages(anthropic, context).requests[0].constraint);

  json responses = json::parse(R"({"input": "hi", "max_output_tokens": 80,
      "tools": [{"type": "function", "name": "get_weather", "parameters": {"type": "object"}}],
      "tool_choice": "required"})");
  job = prepare_responses(responses, context);
  ASSERT_TRUE(job.requests[0].constraint);
  expect_one_call(parse_output(frontend, drive(*job.requests[0].constraint, 80, rng)), {"get_weather"}, "responses", "[]");
  responses["tool_choice"] = {{"type", "function"}, {"name", "get_weather"}};
  EXPECT_TRUE(prepare_responses(responses, context).requests[0].constraint);
}

TEST(ForcedToolCall, UnenforceableRequestsAreBadRequests) {
  testing::FakeFrontend frontend;
  try {
    chat_request(frontend, R"("required")", 20);
    ADD_FAILURE() << "max_tokens 20 cannot hold a call";
  } catch (const ApiError& error) {
    EXPECT_EQ(error.status(), 400);
    EXPECT_EQ(error.param(), "max_tokens");
  }
  EXPECT_FALSE(chat_request(frontend, R"("auto")", 20).constraint);
  EXPECT_FALSE(chat_request(frontend, R"("none")", 20).constraint);

  // A model without a known tool-call format cannot be made to call.
  fs::path demo = fs::path(FLARE_SOURCE_DIR) / "assets" / "demo-model";
  TextFrontendAssets assets;
  assets.tokenizer_json = read_file(demo / "tokenizer.json");
  assets.tokenizer_config_json = read_file(demo / "tokenizer_config.json");
  assets.architecture = "GPTNeoXForCausalLM";
  assets.chat_template = "{% for m in messages %}{{ m.content }}{% endfor %}";
  auto plain = make_text_frontend(assets);
  try {
    chat_request(*plain, R"("required")", 64);
    ADD_FAILURE() << "no tool-call format";
  } catch (const ApiError& error) {
    EXPECT_EQ(error.status(), 400);
    EXPECT_EQ(error.param(), "tool_choice");
  }
}

// The masks judge tokens by the bytes the vocabulary table says they write; the client sees the
// streaming detokenizer's text. The two must agree on any sequence of ordinary tokens.
TEST(ForcedToolCall, VocabularyBytesAreWhatTheDetokenizerWrites) {
  std::mt19937 rng(5);
  const Frontend& frontend = qwen3();
  auto vocabulary = frontend.token_vocabulary();
  ASSERT_EQ(vocabulary.get(), frontend.token_vocabulary().get()) << "built once";
  ASSERT_EQ(vocabulary->bytes.size(), static_cast<size_t>(frontend.vocab_size()));
  for (int run = 0; run < 200; ++run) {
    std::vector<TokenId> ids;
    std::string expected;
    while (ids.size() < 12) {
      auto id = static_cast<TokenId>(rng() % vocabulary->bytes.size());
      if (vocabulary->control[static_cast<size_t>(id)]) continue;
      ids.push_back(id);
      expected += vocabulary->bytes[static_cast<size_t>(id)];
    }
    auto detokenizer = frontend.make_detokenizer(true);
    std::string streamed;
    for (TokenId id : ids) streamed += detokenizer->push(id);
    streamed += detokenizer->flush();
    // Invalid UTF-8 (split characters left unfinished) is replaced by the detokenizer; compare
    // only sequences that are valid text.
    try {
      (void)nlohmann::json(expected).dump();  // throws on invalid UTF-8
    } catch (const nlohmann::json::exception&) {
      continue;
    }
    EXPECT_EQ(streamed, expected);
  }
  EXPECT_EQ(vocabulary->bytes[static_cast<size_t>(vocabulary->by_bytes.at(" {"))], " {");
  EXPECT_TRUE(vocabulary->control[static_cast<size_t>(frontend.encode("<tool_call>", false).at(0))]);
}

// Bodies keep the client's key order into the template: a tool schema with "required" before
// "properties" and properties in non-alphabetical order, and call arguments {"b", "a"}.
TEST(KeyOrder, ToolSchemasAndArgumentsReachThePromptAsWritten) {
  const Frontend& frontend = qwen3();
  ModelInfo model = model_info();
  AdapterContext context{frontend, model};
  const std::string schema = R"({"type": "object", "required": ["zeta"], "properties": {"zeta": {"type": "string"}, "alpha": {"type": "integer"}}})";
  json body = json::parse(R"({"messages": [{"role": "user", "content": "x"},
      {"role": "assistant", "content": "", "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{\"b\": 1, \"a\": 2}"}}]},
      {"role": "tool", "tool_call_id": "c1", "content": "ok"}],
      "tools": [{"function": {"parameters": )" + schema + R"(, "description": "d", "name": "f"}, "type": "function"}]})");
  GenerationJob job = prepare_chat_completion(body, context);
  std::string prompt = frontend.decode(job.requests[0].prompt_token_ids, false);
  EXPECT_NE(prompt.find("\"parameters\": " + schema), std::string::npos) << prompt;
  // The tool declaration's own keys follow the OpenAI shape, whatever order the client used.
  EXPECT_NE(prompt.find(R"({"type": "function", "function": {"name": "f", "description": "d", "parameters": )"), std::string::npos) << prompt;
  EXPECT_NE(prompt.find(R"("arguments": {"b": 1, "a": 2})"), std::string::npos) << prompt;

  // The Anthropic adapter keeps an input_schema's order too.
  json anthropic = json::parse(R"({"model": "demo", "max_tokens": 8, "messages": [{"role": "user", "content": "x"}],
      "tools": [{"name": "f", "input_schema": )" + schema + "}]}");
  job = prepare_anthropic_messages(anthropic, context);
  prompt = frontend.decode(job.requests[0].prompt_token_ids, false);
  EXPECT_NE(prompt.find(schema), std::string::npos) << prompt;
}

}  // namespace
}  // namespace flare::server
