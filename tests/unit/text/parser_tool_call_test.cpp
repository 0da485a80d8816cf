// Tool-call parsers: Hermes/Qwen, Llama 3 JSON and DeepSeek V3 forms, markers split across
// deltas at every position, malformed JSON degrading to content, and the OpenAI/Anthropic shapes.
#include <random>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "common/error.h"
#include "text/parser_tool_call.h"
#include "text/parser_tool_formats.h"

namespace flare::text {
namespace {

ToolCallParserOptions fixed_ids() {
  ToolCallParserOptions options;
  options.make_id = [](int index) { return "call_" + std::to_string(index); };
  return options;
}

std::vector<ToolCallEvent> run_pieces(const std::string& parser_name, const std::vector<std::string>& pieces) {
  auto parser = make_tool_call_parser(parser_name, fixed_ids());
  std::vector<ToolCallEvent> events;
  for (const std::string& piece : pieces) {
    auto more = parser->feed(piece);
    events.insert(events.end(), more.begin(), more.end());
  }
  auto rest = parser->finish();
  events.insert(events.end(), rest.begin(), rest.end());
  return events;
}

ParsedToolOutput parse_whole(const std::string& parser_name, const std::string& text) {
  return collect_tool_calls(run_pieces(parser_name, {text}));
}

void expect_same(const ParsedToolOutput& a, const ParsedToolOutput& b, const std::string& label) {
  EXPECT_EQ(a.content, b.content) << label;
  ASSERT_EQ(a.tool_calls.size(), b.tool_calls.size()) << label;
  for (size_t i = 0; i < a.tool_calls.size(); ++i) {
    EXPECT_EQ(a.tool_calls[i].name, b.tool_calls[i].name) << label;
    EXPECT_EQ(a.tool_calls[i].arguments, b.tool_calls[i].arguments) << label;
    EXPECT_EQ(a.tool_calls[i].id, b.tool_calls[i].id) << label;
  }
}

// Every two-way split and byte-at-a-time feeding give the same result as one delta.
void expect_split_invariant(const std::string& parser_name, const std::string& text) {
  ParsedToolOutput whole = parse_whole(parser_name, text);
  for (size_t cut = 0; cut <= text.size(); ++cut) {
    expect_same(collect_tool_calls(run_pieces(parser_name, {text.substr(0, cut), text.substr(cut)})), whole,
                parser_name + " cut " + std::to_string(cut));
  }
  std::vector<std::string> bytes;
  for (char c : text) bytes.emplace_back(1, c);
  expect_same(collect_tool_calls(run_pieces(parser_name, bytes)), whole, parser_name + " bytes");
}

TEST(HermesToolCalls, ParsesCallsAndContent) {
  std::string text =
      "Let me check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"location\": \"Paris\", \"days\": 2}}\n"
      "</tool_call>\n<tool_call>\n{\"name\": \"search\", \"arguments\": {\"query\": \"é \\\"q\\\"\"}}\n</tool_call>";
  ParsedToolOutput out = parse_whole("hermes", text);
  EXPECT_EQ(out.content, "Let me check.\n");
  ASSERT_EQ(out.tool_calls.size(), 2u);
  EXPECT_EQ(out.tool_calls[0].id, "call_0");
  EXPECT_EQ(out.tool_calls[0].name, "get_weather");
  EXPECT_EQ(out.tool_calls[0].arguments, "{\"location\":\"Paris\",\"days\":2}");
  EXPECT_EQ(out.tool_calls[1].name, "search");
  EXPECT_EQ(out.tool_calls[1].arguments, "{\"query\":\"é \\\"q\\\"\"}");
  expect_split_invariant("hermes", text);
}

TEST(HermesToolCalls, StringArgumentsAndParameters) {
  ParsedToolOutput out = parse_whole("qwen", "<tool_call>{\"name\": \"f\", \"arguments\": \"{\\\"a\\\": 1}\"}</tool_call>");
  ASSERT_EQ(out.tool_calls.size(), 1u);
  EXPECT_EQ(out.tool_calls[0].arguments, "{\"a\": 1}");
  out = parse_whole("hermes", "<tool_call>{\"name\": \"g\", \"parameters\": {}}</tool_call>");
  ASSERT_EQ(out.tool_calls.size(), 1u);
  EXPECT_EQ(out.tool_calls[0].arguments, "{}");
  out = parse_whole("hermes", "<tool_call>{\"name\": \"h\"}</tool_call>");
  ASSERT_EQ(out.tool_calls.size(), 1u);
  EXPECT_EQ(out.tool_calls[0].arguments, "{}");
}

TEST(HermesToolCalls, MalformedDegradesToContent) {
  for (std::string text : {"<tool_call>{\"name\": \"f\", \"arguments\": {</tool_call>",
                           "<tool_call>not json</tool_call>",
                           "<tool_call>{\"arguments\": {}}</tool_call>",
                           "<tool_call>{\"name\": 5}</tool_call>",
                           "<tool_call>[1,2]</tool_call>",
                           "<tool_call>{\"name\": \"f\", \"arguments\": \"not json\"}</tool_call>",
                           "<tool_call>{\"name\": \"f\", \"arguments\": {\"a\": 1}}",  // never closed
                           "<tool_ca"}) {
    ParsedToolOutput out = parse_whole("hermes", text);
    EXPECT_TRUE(out.tool_calls.empty()) << text;
    EXPECT_EQ(out.content, text);
    expect_split_invariant("hermes", text);
  }
}

TEST(HermesToolCalls, MixedValidAndInvalidCalls) {
  std::string text = "<tool_call>{\"name\": \"ok\", \"arguments\": {}}</tool_call><tool_call>{bad}</tool_call>";
  ParsedToolOutput out = parse_whole("hermes", text);
  ASSERT_EQ(out.tool_calls.size(), 1u);
  EXPECT_EQ(out.tool_calls[0].name, "ok");
  EXPECT_EQ(out.content, "<tool_call>{bad}</tool_call>");
}

TEST(HermesToolCalls, PlainTextStreamsImmediately) {
  auto parser = make_tool_call_parser("hermes", fixed_ids());
  auto events = parser->feed("Hello <b>world</b> <tool");
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].text, "Hello <b>world</b> ");  // "<tool" is held back
  events = parser->feed("box>");
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].text, "<toolbox>");
}

TEST(Llama3JsonToolCalls, ParsesBareJsonCalls) {
  std::string text = "{\"name\": \"get_weather\", \"parameters\": {\"location\": \"Paris\"}}";
  ParsedToolOutput out = parse_whole("llama3_json", text);
  EXPECT_EQ(out.content, "");
  ASSERT_EQ(out.tool_calls.size(), 1u);
  EXPECT_EQ(out.tool_calls[0].name, "get_weather");
  EXPECT_EQ(out.tool_calls[0].arguments, "{\"location\":\"Paris\"}");
  expect_split_invariant("llama3_json", text);

  std::string several = "<|python_tag|>{\"name\": \"a\", \"parameters\": {\"x\": \";\"}}; {\"name\": \"b\", \"arguments\": {}}";
  out = parse_whole("llama3_json", several);
  ASSERT_EQ(out.tool_calls.size(), 2u);
  EXPECT_EQ(out.tool_calls[0].arguments, "{\"x\":\";\"}");
  EXPECT_EQ(out.tool_calls[1].name, "b");
  expect_split_invariant("llama3_json", several);
}

TEST(Llama3JsonToolCalls, TextAndMalformedJsonAreContent) {
  for (std::string text : {"The weather is nice.", "{\"not\": \"a call\"}", "{\"name\": \"f\", \"parameters\": ",
                           "  {broken", "<|python_tag", "{\"name\": \"a\"}; garbage"}) {
    ParsedToolOutput out = parse_whole("llama3_json", text);
    EXPECT_TRUE(out.tool_calls.empty()) << text;
    EXPECT_EQ(out.content, text);
    expect_split_invariant("llama3_json", text);
  }
}

TEST(DeepSeekV3ToolCalls, ParsesToolCallTokens) {
  std::string text =
      "Checking.<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n```json\n"
      "{\"location\": \"Paris\"}\n```<｜tool▁call▁end｜>\n<｜tool▁call▁begin｜>function<｜tool▁sep｜>search\n"
      "```json\n{\"query\": \"x\"}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>";
  ParsedToolOutput out = parse_whole("deepseek_v3", text);
  EXPECT_EQ(out.content, "Checking.");
  ASSERT_EQ(out.tool_calls.size(), 2u);
  EXPECT_EQ(out.tool_calls[0].name, "get_weather");
  EXPECT_EQ(out.tool_calls[0].arguments, "{\"location\":\"Paris\"}");
  EXPECT_EQ(out.tool_calls[1].name, "search");
  expect_split_invariant("deepseek_v3", text);
}

TEST(DeepSeekV3ToolCalls, MalformedCallIsContent) {
  std::string text = "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>f\n```json\n{oops}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>";
  ParsedToolOutput out = parse_whole("deepseek_v3", text);
  EXPECT_TRUE(out.tool_calls.empty());
  EXPECT_NE(out.content.find("{oops}"), std::string::npos);
  expect_split_invariant("deepseek_v3", text);
}

TEST(ToolCallParsers, FactoryRejectsUnknownNames) {
  EXPECT_THROW(make_tool_call_parser("nope"), Error);
  EXPECT_NO_THROW(make_tool_call_parser("deepseek"));
  EXPECT_NO_THROW(make_tool_call_parser("llama3"));
}

TEST(ToolCallParsers, DefaultIdsAreUnique) {
  auto parser = make_tool_call_parser("hermes");
  auto events = parser->feed("<tool_call>{\"name\": \"a\"}</tool_call><tool_call>{\"name\": \"b\"}</tool_call>");
  ParsedToolOutput out = collect_tool_calls(events);
  ASSERT_EQ(out.tool_calls.size(), 2u);
  EXPECT_EQ(out.tool_calls[0].id.rfind("call_", 0), 0u);
  EXPECT_EQ(out.tool_calls[0].id.size(), 29u);
  EXPECT_NE(out.tool_calls[0].id, out.tool_calls[1].id);
}

TEST(ToolCallParsers, HostileRandomInputNeverThrows) {
  std::mt19937 rng(11);
  const std::vector<std::string> atoms = {"<tool_call>", "</tool_call>", "{", "}", "\"name\"", ":", "\"f\"", ",",
                                          "\"arguments\"", "<｜tool▁calls▁begin｜>", "<｜tool▁call▁begin｜>",
                                          "<｜tool▁sep｜>", "<｜tool▁call▁end｜>", "```json\n", "\n", "\\", "x",
                                          "<|python_tag|>", ";", "\xff"};
  for (const std::string name : {"hermes", "llama3_json", "deepseek_v3"}) {
    for (int trial = 0; trial < 200; ++trial) {
      std::string text;
      size_t n = rng() % 40;
      for (size_t i = 0; i < n; ++i) text += atoms[rng() % atoms.size()];
      std::vector<std::string> pieces;
      for (size_t i = 0; i < text.size();) {
        size_t len = 1 + rng() % 7;
        pieces.push_back(text.substr(i, len));
        i += len;
      }
      EXPECT_NO_THROW({
        ParsedToolOutput out = collect_tool_calls(run_pieces(name, pieces));
        for (const ToolCall& call : out.tool_calls) EXPECT_FALSE(call.name.empty());
      }) << name << ": " << text;
    }
  }
}

TEST(ToolCallFormats, OpenAiDeltasAndAnthropicBlocks) {
  auto events = run_pieces("hermes", {"<tool_call>{\"name\": \"f\", \"arguments\": {\"a\": [1]}}</tool_call>"});
  ASSERT_EQ(events.size(), 3u);
  EXPECT_EQ(openai_tool_call_delta(events[0]).dump(),
            R"({"index":0,"id":"call_0","type":"function","function":{"name":"f","arguments":""}})");
  EXPECT_EQ(openai_tool_call_delta(events[1]).dump(), R"({"index":0,"function":{"arguments":"{\"a\":[1]}"}})");
  EXPECT_TRUE(openai_tool_call_delta(events[2]).is_null());

  ParsedToolOutput out = collect_tool_calls(events);
  EXPECT_EQ(openai_tool_calls(out.tool_calls).dump(),
            R"([{"id":"call_0","type":"function","function":{"name":"f","arguments":"{\"a\":[1]}"}}])");
  EXPECT_EQ(anthropic_tool_use_block(out.tool_calls[0]).dump(), R"({"type":"tool_use","id":"call_0","name":"f","input":{"a":[1]}})");
  auto start = anthropic_tool_use_events(events[0], 1);
  ASSERT_EQ(start.size(), 1u);
  EXPECT_EQ(start[0]["type"], "content_block_start");
  EXPECT_EQ(start[0]["content_block"]["type"], "tool_use");
  auto delta = anthropic_tool_use_events(events[1], 1);
  EXPECT_EQ(delta[0]["delta"]["partial_json"], "{\"a\":[1]}");
  EXPECT_EQ(anthropic_tool_use_events(events[2], 1)[0]["type"], "content_block_stop");
}

}  // namespace
}  // namespace flare::text
