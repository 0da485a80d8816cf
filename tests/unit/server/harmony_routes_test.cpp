// gpt-oss (harmony) behind every chat route, with the demo tokenizer plus harmony's special tokens:
// which packages speak harmony, the prompts each API renders (reasoning effort, tools, tool results),
// reasoning_effort checks as 400s in each API's shape, conversations harmony cannot express as 400s,
// the stop tokens, and model output parsed into reasoning, content and tool calls token by token,
// streamed and not, at every split.
#include <memory>
#include <optional>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "common/error.h"
#include "fakes.h"
#include "server/harmony_chat.h"
#include "server/router.h"
#include "server/text_frontend.h"
#include "harmony_assets.h"
#include "test_assets.h"

namespace flare::server {
namespace {

using json = nlohmann::ordered_json;

using testing::harmony_assets;
using testing::harmony_frontend;

const std::string kSystem =
    "<|start|>system<|message|>You are ChatGPT, a large language model trained by OpenAI.\n"
    "Knowledge cutoff: 2024-06\nCurrent date: 2025-08-05\n\nReasoning: ";
const std::string kChannels = "\n\n# Valid channels: analysis, commentary, final. Channel must be included for every message.";

class HarmonyRoutes : public ::testing::Test {
 protected:
  HarmonyRoutes() : model(testing::fake_model()), router(harmony_frontend(), model, "", engine, metrics, ServerLimits{}) {}

  RouteResult post(const std::string& path, const json& body) {
    return router.route({"POST", path, {{"anthropic-version", "2023-06-01"}}, body.dump()});
  }

  std::string prompt_of(const std::string& path, const json& body) {
    RouteResult result = post(path, body);
    EXPECT_TRUE(result.job.has_value()) << result.response.body;
    if (!result.job) return {};
    return harmony_frontend().decode(result.job->requests.at(0).prompt_token_ids, false);
  }

  // A 400 without a job; returns the error body.
  json expect_400(const std::string& path, const json& body) {
    RouteResult result = post(path, body);
    EXPECT_FALSE(result.job.has_value()) << body.dump();
    EXPECT_EQ(result.response.status, 400) << result.response.body;
    return json::parse(result.response.body);
  }

  // Feeds the text's tokens one a step, then finishes the choice with `stop` on `stop_token`
  // (consumed by the engine, never detokenized); returns the streamed bytes or the final body.
  std::string run(GenerationJob& job, const std::string& output, const std::string& stop_token) {
    std::vector<TokenId> ids = harmony_frontend().encode(output, false);
    auto& responder = *job.responder;
    std::string out = responder.streaming() ? responder.stream_start() : "";
    for (TokenId id : ids) {
      engine::StepOutput step;
      step.tokens.push_back({id, 0.0f, {}});
      out += responder.on_output(0, step);
    }
    engine::StepOutput last;
    TokenId stop = harmony_frontend().encode(stop_token, false).at(0);
    last.tokens.push_back({stop, 0.0f, {}});
    last.finish_reason = engine::FinishReason::stop;
    last.stop_token_id = stop;
    last.request_finished = true;
    out += responder.on_output(0, last);
    EXPECT_TRUE(responder.done());
    return responder.streaming() ? out : responder.final_response().body;
  }

  ModelInfo model;
  testing::ScriptedEngine engine;
  Metrics metrics;
  Router router;
};

const json kWeatherTool = {{"type", "function"},
                           {"function", {{"name", "get_weather"}, {"description", "Weather for a city."},
                                         {"parameters", {{"type", "object"},
                                                         {"properties", {{"city", {{"type", "string"}}}}},
                                                         {"required", {"city"}}}}}}};

TEST(HarmonyFrontend, WhichPackagesSpeakHarmony) {
  EXPECT_TRUE(harmony_frontend().parser_reads_special_tokens());
  EXPECT_EQ(harmony_frontend().reasoning_efforts(), (std::vector<std::string>{"low", "medium", "high"}));
  // No template and harmony's tokens: harmony whatever the architecture.
  EXPECT_TRUE(make_text_frontend(harmony_assets("SomethingForCausalLM"))->parser_reads_special_tokens());
  // A template and another architecture: the template.
  TextFrontendAssets templated = harmony_assets("SomethingForCausalLM");
  templated.chat_template = "{{ messages[0].content }}";
  EXPECT_FALSE(make_text_frontend(templated)->parser_reads_special_tokens());
  // GptOssForCausalLM renders natively even beside a template.
  TextFrontendAssets gpt_oss = harmony_assets();
  gpt_oss.chat_template = "{{ messages[0].content }}";
  EXPECT_TRUE(make_text_frontend(gpt_oss)->parser_reads_special_tokens());
  // The demo model itself (ChatML, no harmony tokens) is not harmony.
  EXPECT_FALSE(make_text_frontend(testing::demo_assets())->parser_reads_special_tokens());
}

TEST(HarmonyFrontend, StopTokensAreReturnAndCall) {
  TextFrontendAssets assets = harmony_assets();
  auto frontend = make_text_frontend(assets);
  EXPECT_EQ(eos_token_ids(assets, *frontend), (std::vector<TokenId>{8192, 8198}));
  assets.generation_config_json = R"({"eos_token_id": [8192, 2]})";
  EXPECT_EQ(eos_token_ids(assets, *frontend), (std::vector<TokenId>{8192, 2, 8198}));
}

TEST(HarmonyFrontend, RendersTheConversation) {
  json messages = {{{"role", "system"}, {"content", "Be brief."}},
                   {{"role", "user"}, {"content", "Weather in Paris?"}},
                   {{"role", "assistant"}, {"content", ""}, {"reasoning_content", "Need the tool."},
                    {"tool_calls", {{{"id", "call_1"}, {"type", "function"},
                                     {"function", {{"name", "get_weather"}, {"arguments", {{"city", "Paris"}}}}}}}}},
                   {{"role", "tool"}, {"tool_call_id", "call_1"}, {"content", "{\"sunny\":true}"}}};
  std::string prompt = harmony_frontend().render_chat(messages, json::array({kWeatherTool}),
                                                      {{"reasoning_effort", "high"}, {"current_date", "2025-08-05"}}, true);
  std::string want = kSystem + "high" + kChannels +
                     "\nCalls to these tools must go to the commentary channel: 'functions'.<|end|>"
                     "<|start|>developer<|message|># Instructions\n\nBe brief.\n\n# Tools\n\n## functions\n\n"
                     "namespace functions {\n\n// Weather for a city.\ntype get_weather = (_: {\ncity: string,\n}) => any;\n\n"
                     "} // namespace functions<|end|>"
                     "<|start|>user<|message|>Weather in Paris?<|end|>"
                     "<|start|>assistant<|channel|>analysis<|message|>Need the tool.<|end|>"
                     "<|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>"
                     "{\"city\":\"Paris\"}<|call|>"
                     "<|start|>functions.get_weather to=assistant<|channel|>commentary<|message|>{\"sunny\":true}<|end|>"
                     "<|start|>assistant";
  EXPECT_EQ(prompt, want);
}

TEST(HarmonyFrontend, ToolResultsPairWithTheirCalls) {
  auto call = [](const char* id, const char* name) {
    json c = {{"type", "function"}, {"function", {{"name", name}, {"arguments", json::object()}}}};
    if (id) c["id"] = id;
    return c;
  };
  auto assistant = [](json calls) { return json{{"role", "assistant"}, {"content", ""}, {"tool_calls", calls}}; };
  auto tool = [](const char* id) {
    json t = {{"role", "tool"}, {"content", "ok"}};
    if (id) t["tool_call_id"] = id;
    return t;
  };
  const json user = {{"role", "user"}, {"content", "go"}};
  const json kwargs = {{"current_date", "2025-08-05"}};
  auto render = [&](json messages, bool generation_prompt = true) {
    return harmony_frontend().render_chat(messages, json::array(), kwargs, generation_prompt);
  };
  // By id, answered out of order; without ids, in the calls' order.
  std::string by_id = render({user, assistant({call("a", "first"), call("b", "second")}), tool("b"), tool("a")});
  EXPECT_LT(by_id.find("<|start|>functions.second to=assistant"), by_id.find("<|start|>functions.first to=assistant"));
  std::string in_order = render({user, assistant({call(nullptr, "first"), call(nullptr, "second")}), tool(nullptr), tool(nullptr)});
  EXPECT_LT(in_order.find("<|start|>functions.first to=assistant"), in_order.find("<|start|>functions.second to=assistant"));

  auto rejects = [&](json messages, const std::string& part, bool generation_prompt = true) {
    try {
      render(messages, generation_prompt);
      ADD_FAILURE() << "rendered " << messages.dump();
    } catch (const Error& error) {
      EXPECT_NE(std::string(error.what()).find(part), std::string::npos) << error.what();
    }
  };
  rejects({user, tool("a")}, "message 1 (tool) answers no tool call");
  rejects({user, assistant({call("a", "first")}), tool("zzz")}, "tool_call_id 'zzz', which matches no unanswered call");
  rejects({user, assistant({call("a", "first")}), tool("a"), tool("a")}, "message 3 (tool) answers no tool call");
  rejects({user, assistant({call("a", "first")}), user}, "the tool call 'a' to 'first' of message 1 (assistant) has no tool result before message 2 (user)");
  rejects({user, assistant({call("a", "first")})}, "has no tool result before the reply it asks for");
  // A conversation that ends with the call is a complete sample when no reply is asked for.
  EXPECT_NO_THROW(render({user, assistant({call("a", "first")})}, false));
  // Effort and options.
  EXPECT_THROW(harmony_frontend().render_chat(json::array({user}), json::array(), {{"reasoning_effort", "extreme"}}, true), Error);
  EXPECT_THROW(harmony_frontend().render_chat(json::array({user}), json::array(), {{"reasoning_effort", 3}}, true), Error);
  EXPECT_THROW(harmony_frontend().render_chat(json::array({user}), json::array(), json::array(), true), Error);
  std::string low = harmony_frontend().render_chat(json::array({user}), json::array(), {{"reasoning_effort", "low"}}, true);
  EXPECT_NE(low.find("\n\nReasoning: low\n\n"), std::string::npos);
  EXPECT_NE(low.find("Current date: 20"), std::string::npos);  // today, when not given
}

TEST_F(HarmonyRoutes, EveryApiRendersHarmonyWithItsEffortField) {
  json chat = {{"messages", {{{"role", "user"}, {"content", "Hi"}}}}, {"reasoning_effort", "high"},
               {"chat_template_kwargs", {{"current_date", "2025-08-05"}}}};
  EXPECT_EQ(prompt_of("/v1/chat/completions", chat),
            kSystem + "high" + kChannels + "<|end|><|start|>user<|message|>Hi<|end|><|start|>assistant");
  json responses = {{"input", "Hi"}, {"instructions", "Be brief."}, {"reasoning", {{"effort", "low"}}}};
  std::string prompt = prompt_of("/v1/responses", responses);
  EXPECT_NE(prompt.find("\n\nReasoning: low\n\n"), std::string::npos) << prompt;
  EXPECT_NE(prompt.find("<|start|>developer<|message|># Instructions\n\nBe brief.<|end|><|start|>user<|message|>Hi<|end|>"),
            std::string::npos) << prompt;
  json anthropic = {{"model", "demo"}, {"max_tokens", 16}, {"system", "Be brief."}, {"messages", {{{"role", "user"}, {"content", "Hi"}}}}};
  prompt = prompt_of("/v1/messages", anthropic);
  EXPECT_NE(prompt.find("\n\nReasoning: medium\n\n"), std::string::npos) << prompt;
  EXPECT_TRUE(prompt.ends_with("<|start|>user<|message|>Hi<|end|><|start|>assistant")) << prompt;
  // The tokenize endpoint renders the same prompt (how the e2e test reads it back).
  RouteResult tokenized = post("/tokenize", chat);
  ASSERT_EQ(tokenized.response.status, 200) << tokenized.response.body;
  auto ids = json::parse(tokenized.response.body)["tokens"].get<std::vector<TokenId>>();
  EXPECT_EQ(harmony_frontend().decode(ids, false), prompt_of("/v1/chat/completions", chat));
}

TEST_F(HarmonyRoutes, BadEffortsAre400sNamingTheField) {
  const json messages = {{{"role", "user"}, {"content", "Hi"}}};
  json error = expect_400("/v1/chat/completions", {{"messages", messages}, {"reasoning_effort", "extreme"}});
  EXPECT_EQ(error["error"]["param"], "reasoning_effort") << error;
  EXPECT_NE(error["error"]["message"].get<std::string>().find("'low', 'medium', 'high'"), std::string::npos) << error;
  error = expect_400("/v1/chat/completions", {{"messages", messages}, {"chat_template_kwargs", {{"reasoning_effort", "max"}}}});
  EXPECT_EQ(error["error"]["param"], "chat_template_kwargs.reasoning_effort") << error;
  error = expect_400("/v1/chat/completions", {{"messages", messages}, {"reasoning_effort", 2}});
  EXPECT_EQ(error["error"]["param"], "reasoning_effort") << error;
  error = expect_400("/v1/responses", {{"input", "Hi"}, {"reasoning", {{"effort", "minimal"}}}});
  EXPECT_EQ(error["error"]["param"], "reasoning.effort") << error;
  error = expect_400("/v1/responses", {{"input", "Hi"}, {"reasoning", "high"}});
  EXPECT_EQ(error["error"]["param"], "reasoning") << error;
  error = expect_400("/tokenize", {{"messages", messages}, {"reasoning_effort", "HIGH"}});
  EXPECT_EQ(error["error"]["param"], "reasoning_effort") << error;
  for (const char* effort : {"low", "medium", "high"}) {
    EXPECT_TRUE(post("/v1/chat/completions", {{"messages", messages}, {"reasoning_effort", effort}}).job.has_value());
    EXPECT_TRUE(post("/v1/responses", {{"input", "Hi"}, {"reasoning", {{"effort", effort}}}}).job.has_value());
  }
}

TEST_F(HarmonyRoutes, ConversationsHarmonyCannotExpressAre400s) {
  json error = expect_400("/v1/chat/completions",
                          {{"messages", {{{"role", "user"}, {"content", "Hi"}}, {{"role", "tool"}, {"tool_call_id", "x"}, {"content", "r"}}}}});
  EXPECT_EQ(error["error"]["param"], "messages") << error;
  EXPECT_NE(error["error"]["message"].get<std::string>().find("answers no tool call"), std::string::npos) << error;
  error = expect_400("/v1/chat/completions", {{"messages", {{{"role", "narrator"}, {"content", "Hi"}}}}});
  EXPECT_EQ(error["error"]["param"], "messages[0].role") << error;
  // Responses: an output for a call that was never made.
  error = expect_400("/v1/responses", {{"input", {{{"type", "function_call_output"}, {"call_id", "c1"}, {"output", "r"}}}}});
  EXPECT_EQ(error["error"]["param"], "input") << error;
  // Anthropic: a tool_use left without its tool_result before the next user text.
  json anthropic = {{"model", "demo"}, {"max_tokens", 16},
                    {"messages", {{{"role", "user"}, {"content", "Hi"}},
                                  {{"role", "assistant"}, {"content", {{{"type", "tool_use"}, {"id", "t1"}, {"name", "get_weather"}, {"input", json::object()}}}}},
                                  {{"role", "user"}, {"content", "and?"}}}}};
  error = expect_400("/v1/messages", anthropic);
  EXPECT_EQ(error["type"], "error") << error;
  EXPECT_NE(error["error"]["message"].get<std::string>().find("has no tool result"), std::string::npos) << error;
  // Requiring a call of an undeclared function is the client's mistake, named.
  error = expect_400("/v1/chat/completions", {{"messages", {{{"role", "user"}, {"content", "Hi"}}}},
                                              {"tools", {kWeatherTool}},
                                              {"tool_choice", {{"type", "function"}, {"function", {{"name", "nope"}}}}}});
  EXPECT_EQ(error["error"]["param"].get<std::string>().rfind("tool_choice", 0), 0u) << error;
}

const std::string kToolOutput =
    "<|channel|>analysis<|message|>Look it up.<|end|><|start|>assistant<|channel|>commentary to=functions.get_weather "
    "<|constrain|>json<|message|>{\"city\": \"Paris\"}";

TEST_F(HarmonyRoutes, ChatParsesReasoningContentAndToolCalls) {
  json body = {{"messages", {{{"role", "user"}, {"content", "Weather?"}}}}, {"tools", {kWeatherTool}}};
  RouteResult result = post("/v1/chat/completions", body);
  ASSERT_TRUE(result.job) << result.response.body;
  json reply = json::parse(run(*result.job, kToolOutput, "<|call|>"));
  const json& message = reply["choices"][0]["message"];
  EXPECT_EQ(message["reasoning_content"], "Look it up.") << reply;
  EXPECT_TRUE(message["content"].is_null()) << reply;
  EXPECT_EQ(message["tool_calls"][0]["function"]["name"], "get_weather") << reply;
  EXPECT_EQ(message["tool_calls"][0]["function"]["arguments"], "{\"city\": \"Paris\"}") << reply;
  EXPECT_EQ(reply["choices"][0]["finish_reason"], "tool_calls") << reply;

  body["stream"] = true;
  result = post("/v1/chat/completions", body);
  ASSERT_TRUE(result.job);
  std::string stream = run(*result.job, kToolOutput, "<|call|>");
  std::string reasoning, arguments, name;
  for (size_t at = 0; (at = stream.find("data: {", at)) != std::string::npos; ++at) {
    json chunk = json::parse(stream.substr(at + 6, stream.find("\n\n", at) - at - 6));
    if (chunk["choices"].empty()) continue;
    const json& delta = chunk["choices"][0]["delta"];
    if (delta.contains("reasoning_content")) reasoning += delta["reasoning_content"].get<std::string>();
    if (delta.contains("tool_calls")) {
      const json& function = delta["tool_calls"][0]["function"];
      if (function.contains("name")) name += function["name"].get<std::string>();
      arguments += function["arguments"].get<std::string>();
    }
  }
  EXPECT_EQ(reasoning, "Look it up.");
  EXPECT_EQ(name, "get_weather");
  EXPECT_EQ(arguments, "{\"city\": \"Paris\"}");
  EXPECT_NE(stream.find("\"finish_reason\":\"tool_calls\""), std::string::npos) << stream;
  EXPECT_EQ(stream.find("<|"), std::string::npos) << stream;  // no special token reaches the client
}

// tool_choice required or named: the request carries the forced-call constraint on every route
// (harmony_tool_call_test.cpp drives it), and the call it writes comes back as a tool call.
TEST_F(HarmonyRoutes, RequiredToolChoiceForcesACallOnEveryRoute) {
  const json messages = {{{"role", "user"}, {"content", "Weather?"}}};
  for (const json& choice : {json("required"), json{{"type", "function"}, {"function", {{"name", "get_weather"}}}}}) {
    RouteResult result = post("/v1/chat/completions", {{"messages", messages}, {"tools", {kWeatherTool}}, {"tool_choice", choice}});
    ASSERT_TRUE(result.job) << result.response.body;
    EXPECT_TRUE(result.job->requests.at(0).constraint) << choice;
    const std::string call =
        "<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{\"city\": \"Paris\"}";
    json reply = json::parse(run(*result.job, call, "<|call|>"));
    EXPECT_EQ(reply["choices"][0]["message"]["tool_calls"][0]["function"]["name"], "get_weather") << reply;
    EXPECT_EQ(reply["choices"][0]["finish_reason"], "tool_calls") << reply;
  }
  json responses = {{"input", "Weather?"}, {"tool_choice", "required"},
                    {"tools", {{{"type", "function"}, {"name", "get_weather"}, {"parameters", kWeatherTool["function"]["parameters"]}}}}};
  RouteResult result = post("/v1/responses", responses);
  ASSERT_TRUE(result.job) << result.response.body;
  EXPECT_TRUE(result.job->requests.at(0).constraint);
  json anthropic = {{"model", "demo"}, {"max_tokens", 64}, {"messages", messages}, {"tool_choice", {{"type", "any"}}},
                    {"tools", {{{"name", "get_weather"}, {"input_schema", kWeatherTool["function"]["parameters"]}}}}};
  result = post("/v1/messages", anthropic);
  ASSERT_TRUE(result.job) << result.response.body;
  EXPECT_TRUE(result.job->requests.at(0).constraint);
}

TEST_F(HarmonyRoutes, FinalAnswerOnEveryApi) {
  const std::string output = "<|channel|>analysis<|message|>Easy.<|end|><|start|>assistant<|channel|>final<|message|>Four.";
  RouteResult chat = post("/v1/chat/completions", {{"messages", {{{"role", "user"}, {"content", "2+2?"}}}}});
  ASSERT_TRUE(chat.job);
  json reply = json::parse(run(*chat.job, output, "<|return|>"));
  EXPECT_EQ(reply["choices"][0]["message"]["content"], "Four.") << reply;
  EXPECT_EQ(reply["choices"][0]["message"]["reasoning_content"], "Easy.") << reply;
  EXPECT_EQ(reply["choices"][0]["finish_reason"], "stop") << reply;

  RouteResult responses = post("/v1/responses", {{"input", "2+2?"}});
  ASSERT_TRUE(responses.job);
  reply = json::parse(run(*responses.job, output, "<|return|>"));
  ASSERT_EQ(reply["output"].size(), 2u) << reply;
  EXPECT_EQ(reply["output"][0]["type"], "reasoning") << reply;
  EXPECT_EQ(reply["output"][0]["content"][0]["text"], "Easy.") << reply;
  EXPECT_EQ(reply["output"][1]["content"][0]["text"], "Four.") << reply;

  RouteResult messages = post("/v1/messages", {{"model", "demo"}, {"max_tokens", 64}, {"messages", {{{"role", "user"}, {"content", "2+2?"}}}}});
  ASSERT_TRUE(messages.job);
  reply = json::parse(run(*messages.job, output, "<|return|>"));
  ASSERT_EQ(reply["content"].size(), 2u) << reply;
  EXPECT_EQ(reply["content"][0]["type"], "thinking") << reply;
  EXPECT_EQ(reply["content"][0]["thinking"], "Easy.") << reply;
  EXPECT_EQ(reply["content"][1]["text"], "Four.") << reply;
  EXPECT_EQ(reply["stop_reason"], "end_turn") << reply;
}

// The parser through the server's OutputParser at every split of a tool-calling output: the
// events add up to the same message wherever the text is cut.
TEST(HarmonyOutputParser, SameEventsAtEverySplit) {
  ParserOptions options;
  options.parse_tool_calls = true;
  const std::string output = kToolOutput + "<|call|>";
  auto collect = [&](size_t cut) {
    auto parser = make_harmony_output_parser(options);
    std::vector<ParsedEvent> events = parser->push(std::string_view(output).substr(0, cut));
    for (auto& e : parser->push(std::string_view(output).substr(cut))) events.push_back(std::move(e));
    for (auto& e : parser->finish()) events.push_back(std::move(e));
    // Text events may arrive in pieces: a piece that follows one of its kind adds no tag.
    std::string summary;
    std::optional<ParsedEvent::Kind> last;
    for (const auto& e : events) {
      using Kind = ParsedEvent::Kind;
      if (e.kind == Kind::reasoning) summary += (last == e.kind ? "" : "R:") + e.text;
      if (e.kind == Kind::content) summary += (last == e.kind ? "" : "C:") + e.text;
      if (e.kind == Kind::tool_call_begin) summary += "[" + e.tool_name;
      if (e.kind == Kind::tool_call_arguments) summary += (last == e.kind ? "" : "|") + e.text;
      if (e.kind == Kind::tool_call_end) summary += "]";
      last = e.kind;
    }
    return summary;
  };
  const std::string whole = collect(output.size());
  EXPECT_EQ(whole, "R:Look it up.[get_weather|{\"city\": \"Paris\"}]");
  for (size_t cut = 0; cut <= output.size(); ++cut) EXPECT_EQ(collect(cut), whole) << "cut at " << cut;
  // Without declared tools a call is shown as content, never dropped.
  auto plain = make_harmony_output_parser(ParserOptions{});
  std::string content;
  for (auto& e : plain->push(output)) content += e.kind == ParsedEvent::Kind::content ? e.text : "";
  for (auto& e : plain->finish()) content += e.kind == ParsedEvent::Kind::content ? e.text : "";
  EXPECT_EQ(content, "{\"city\": \"Paris\"}");
}

TEST(HarmonyOutputParser, HostileOutputNeverThrows) {
  ParserOptions options;
  options.parse_tool_calls = true;
  const std::string pieces[] = {"<|start|>", "<|end|>", "<|message|>", "<|channel|>", "<|call|>", "<|return|>",
                                "<|constrain|>", "to=functions.", "analysis", "final", "{", "}", "\"", "x", "<|",
                                "\xFF", "\n", " "};
  uint32_t state = 12345;
  for (int round = 0; round < 300; ++round) {
    auto parser = make_harmony_output_parser(options);
    for (int i = 0; i < 40; ++i) {
      state = state * 1103515245u + 12345u;
      EXPECT_NO_THROW(parser->push(pieces[(state >> 16) % std::size(pieces)]));
    }
    EXPECT_NO_THROW(parser->finish());
  }
}

}  // namespace
}  // namespace flare::server
