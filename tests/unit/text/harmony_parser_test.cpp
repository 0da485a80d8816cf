// Harmony output parser: channels, tool calls, every chunk boundary (specials and calls split),
// hostile output degrading to content, and round trips through the prompt encoder.
#include <random>

#include <gtest/gtest.h>

#include "text/harmony.h"
#include "text/harmony_parser.h"

namespace flare::text {
namespace {

using Kind = HarmonyEvent::Kind;

HarmonyParsedOutput parse_pieces(const std::vector<std::string>& pieces, HarmonyParserOptions options = {},
                                 std::string* problem = nullptr) {
  HarmonyParser parser(options);
  std::vector<HarmonyEvent> events;
  for (const auto& piece : pieces) {
    auto more = parser.feed(piece);
    events.insert(events.end(), more.begin(), more.end());
  }
  auto rest = parser.finish();
  events.insert(events.end(), rest.begin(), rest.end());
  if (problem) *problem = parser.problem();
  return collect_harmony_events(events);
}

// Every split of `text` into two pieces, and into one-byte pieces, parses like the whole.
void expect_split_invariant(const std::string& text, HarmonyParserOptions options = {}) {
  HarmonyParsedOutput whole = harmony_parse_output(text, options);
  for (size_t cut = 0; cut <= text.size(); ++cut) {
    HarmonyParsedOutput split = parse_pieces({text.substr(0, cut), text.substr(cut)}, options);
    EXPECT_EQ(split.message, whole.message) << "cut at " << cut;
    EXPECT_EQ(split.finish, whole.finish) << "cut at " << cut;
  }
  std::vector<std::string> bytes;
  for (char c : text) bytes.emplace_back(1, c);
  EXPECT_EQ(parse_pieces(bytes, options).message, whole.message);
}

const std::string kReasonThenAnswer =
    "<|channel|>analysis<|message|>User asks: \"What is 2 + 2?\" Simple arithmetic.<|end|>"
    "<|start|>assistant<|channel|>final<|message|>2 + 2 = 4.<|return|>";
const std::string kToolCall =
    "<|channel|>analysis<|message|>Need to use function get_weather.<|end|>"
    "<|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>"
    "{\"location\":\"San Francisco\"}<|call|>";

TEST(HarmonyParser, ReasoningAndFinal) {
  std::string problem;
  auto parsed = parse_pieces({kReasonThenAnswer}, {}, &problem);
  EXPECT_EQ(parsed.message.reasoning, "User asks: \"What is 2 + 2?\" Simple arithmetic.");
  EXPECT_EQ(parsed.message.content, "2 + 2 = 4.");
  EXPECT_TRUE(parsed.message.tool_calls.empty());
  EXPECT_EQ(parsed.finish, HarmonyFinish::stop);
  EXPECT_EQ(problem, "");
}

TEST(HarmonyParser, ToolCall) {
  auto parsed = harmony_parse_output(kToolCall);
  EXPECT_EQ(parsed.message.reasoning, "Need to use function get_weather.");
  EXPECT_EQ(parsed.message.content, "");
  ASSERT_EQ(parsed.message.tool_calls.size(), 1u);
  EXPECT_EQ(parsed.message.tool_calls[0], (HarmonyToolCall{"get_weather", "{\"location\":\"San Francisco\"}"}));
  EXPECT_EQ(parsed.finish, HarmonyFinish::tool_calls);
}

TEST(HarmonyParser, RecipientInTheRoleAndTemplateContentType) {
  auto parsed = harmony_parse_output("<|channel|>analysis<|message|>x<|end|><|start|>assistant to=functions.f"
                                     "<|channel|>commentary json<|message|>{\"a\": 1}<|call|>");
  ASSERT_EQ(parsed.message.tool_calls.size(), 1u);
  EXPECT_EQ(parsed.message.tool_calls[0].name, "f");
  EXPECT_EQ(parsed.message.tool_calls[0].arguments, "{\"a\": 1}");
}

TEST(HarmonyParser, EventsInOrderAndMerged) {
  HarmonyParser parser;
  auto events = parser.feed(kToolCall);
  EXPECT_EQ(parser.finish_reason(), HarmonyFinish::tool_calls);
  auto rest = parser.finish();
  events.insert(events.end(), rest.begin(), rest.end());
  ASSERT_EQ(events.size(), 5u);
  EXPECT_EQ(events[0].kind, Kind::reasoning);
  EXPECT_EQ(events[1].kind, Kind::tool_call_start);
  EXPECT_EQ(events[1].name, "get_weather");
  EXPECT_EQ(events[1].index, 0);
  EXPECT_EQ(events[2].kind, Kind::arguments_delta);
  EXPECT_EQ(events[3].kind, Kind::tool_call_end);
  EXPECT_EQ(events[4].kind, Kind::end);
  EXPECT_EQ(events[4].finish, HarmonyFinish::tool_calls);
  EXPECT_TRUE(parser.finish().empty());
}

TEST(HarmonyParser, SplitAnywhere) {
  expect_split_invariant(kReasonThenAnswer);
  expect_split_invariant(kToolCall);
  HarmonyParserOptions streaming;
  streaming.stream_arguments = true;
  expect_split_invariant(kToolCall, streaming);
}

TEST(HarmonyParser, ContentStreamsBeforeTheMessageEnds) {
  HarmonyParser parser;
  auto events = parser.feed("<|channel|>final<|message|>Hello wor");
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].kind, Kind::content);
  EXPECT_EQ(events[0].text, "Hello wor");
  events = parser.feed("ld<|ret");  // the partial special is held back
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].text, "ld");
  events = parser.feed("urn|>");
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].kind, Kind::end);
  EXPECT_EQ(events[0].finish, HarmonyFinish::stop);
}

TEST(HarmonyParser, StreamedArgumentDeltas) {
  HarmonyParserOptions options;
  options.stream_arguments = true;
  HarmonyParser parser(options);
  auto events = parser.feed("<|channel|>commentary to=functions.f <|constrain|>json<|message|>{\"a\":");
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0].kind, Kind::tool_call_start);
  EXPECT_EQ(events[1].kind, Kind::arguments_delta);
  EXPECT_EQ(events[1].text, "{\"a\":");
  events = parser.feed(" 1}");
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].text, " 1}");
}

TEST(HarmonyParser, StopTokenConsumedByTheEngine) {
  // The engine drops the final stop token, so <|call|> / <|return|> may never be seen.
  auto call = harmony_parse_output("<|channel|>commentary to=functions.f <|constrain|>json<|message|>{}");
  ASSERT_EQ(call.message.tool_calls.size(), 1u);
  EXPECT_EQ(call.finish, HarmonyFinish::tool_calls);
  auto answer = harmony_parse_output("<|channel|>final<|message|>done");
  EXPECT_EQ(answer.message.content, "done");
  EXPECT_EQ(answer.finish, HarmonyFinish::stop);
}

TEST(HarmonyParser, PreambleIsContentAndBuiltinToolsAreReasoning) {
  auto parsed = harmony_parse_output(
      "<|channel|>commentary<|message|>Plan: look it up.<|end|>"
      "<|start|>assistant<|channel|>analysis to=browser.search <|constrain|>json<|message|>{\"query\":\"x\"}<|end|>"
      "<|start|>assistant<|channel|>final<|message|>Done.<|return|>");
  EXPECT_EQ(parsed.message.content, "Plan: look it up.Done.");
  EXPECT_EQ(parsed.message.reasoning, "{\"query\":\"x\"}");
  EXPECT_TRUE(parsed.message.tool_calls.empty());
}

TEST(HarmonyParser, PromptWithoutAssistantHeader) {
  HarmonyParserOptions options;
  options.prompt_opened_assistant = false;
  auto parsed = harmony_parse_output("<|start|>assistant<|channel|>final<|message|>hi<|end|>", options);
  EXPECT_EQ(parsed.message.content, "hi");
}

TEST(HarmonyParser, EmptyMessagesAndEmptyArguments) {
  std::string problem;
  auto parsed = parse_pieces({"<|channel|>analysis<|message|><|end|><|start|>assistant<|channel|>final<|message|>"
                              "<|end|><|start|>assistant<|channel|>commentary to=functions.f<|message|><|call|>"},
                             {}, &problem);
  EXPECT_EQ(parsed.message.reasoning, "");
  EXPECT_EQ(parsed.message.content, "");
  ASSERT_EQ(parsed.message.tool_calls.size(), 1u);
  EXPECT_EQ(parsed.message.tool_calls[0].arguments, "{}");
  EXPECT_EQ(problem, "");
  EXPECT_EQ(harmony_parse_output("").finish, HarmonyFinish::stop);
}

struct Hostile {
  const char* name;
  std::string text;
  std::string content;  // what must come out as content
};

TEST(HarmonyParser, HostileOutputDegradesToContent) {
  std::vector<Hostile> cases = {
      {"plain text, no header", "just text", ""},
      {"unknown channel", "<|channel|>secret<|message|>shown<|end|>", "shown"},
      {"no channel", "<|message|>bare<|end|>", "bare"},
      {"stray text between messages", "<|channel|>final<|message|>a<|end|>junk<|start|>assistant<|channel|>final<|message|>b",
       "ajunkb"},
      {"nested specials inside a message", "<|channel|>final<|message|>a<|channel|>b<|message|>c<|constrain|>d<|end|>",
       "a<|channel|>b<|message|>c<|constrain|>d"},
      {"bad JSON arguments", "<|channel|>commentary to=functions.f<|message|>{not json<|call|>", "{not json"},
      {"truncated tool call", "<|channel|>commentary to=functions.f<|message|>{\"a\":", "{\"a\":"},
      {"start inside a message", "<|channel|>final<|message|>a<|start|>assistant<|channel|>final<|message|>b", "ab"},
      {"start inside a header", "<|channel|>fin<|start|>assistant<|channel|>final<|message|>ok", "ok"},
      {"message from another role", "<|start|>functions.f to=assistant<|channel|>commentary<|message|>fake", "fake"},
  };
  for (auto& hostile : cases) {
    std::string problem;
    auto parsed = parse_pieces({hostile.text}, {}, &problem);
    EXPECT_NE(problem, "") << hostile.name;
    if (!hostile.content.empty()) EXPECT_EQ(parsed.message.content, hostile.content) << hostile.name;
    expect_split_invariant(hostile.text);
  }
  auto literal = harmony_parse_output("<|channel|>final<|message|>x<|foo|>y");
  EXPECT_EQ(literal.message.content, "x<|foo|>y");  // unknown specials are text
  // "plain text, no header": the first message's header never closes; it is dropped as a header.
  std::string problem;
  parse_pieces({"<|channel|>analy"}, {}, &problem);
  EXPECT_EQ(problem, "output ended inside a message header");
}

TEST(HarmonyParser, GarbageHeaderTooLongBecomesContent) {
  std::string garbage(2000, 'x');
  std::string problem;
  auto parsed = parse_pieces({garbage, "<|end|>"}, {}, &problem);
  EXPECT_EQ(parsed.message.content, garbage);
  EXPECT_EQ(problem, "message header too long");
  parsed = parse_pieces({garbage + "<|message|>body<|end|>"}, {}, &problem);
  EXPECT_EQ(parsed.message.content, garbage + "body");
}

TEST(HarmonyParser, TextAfterTheEndIsIgnored) {
  HarmonyParser parser;
  parser.feed("<|channel|>final<|message|>a<|return|>");
  EXPECT_TRUE(parser.feed("more").empty());
  EXPECT_TRUE(parser.finish().empty());
  EXPECT_EQ(parser.problem(), "text after the end of the response");
}

TEST(HarmonyParser, RandomGarbageNeverThrowsAndVeryLongInput) {
  std::mt19937 random(7);
  const std::vector<std::string> atoms = {"<|start|>", "<|end|>", "<|message|>", "<|channel|>", "<|constrain|>",
                                          "<|return|>", "<|call|>", "<|", "|>", "assistant", "final", "analysis",
                                          "commentary", " to=functions.f", "{", "}", "x", " ", "\xe2\x82"};
  for (int trial = 0; trial < 200; ++trial) {
    std::string text;
    int n_atoms = std::uniform_int_distribution<int>(0, 40)(random);
    for (int i = 0; i < n_atoms; ++i) text += atoms[random() % atoms.size()];
    HarmonyParser parser;
    size_t at = 0;
    while (at < text.size()) {
      size_t n = std::uniform_int_distribution<size_t>(1, 9)(random);
      EXPECT_NO_THROW(parser.feed(std::string_view(text).substr(at, n)));
      at += n;
    }
    EXPECT_NO_THROW(parser.finish());
  }
  std::string long_answer(1 << 20, 'a');
  HarmonyParser parser;
  parser.feed("<|channel|>final<|message|>");
  size_t n_content = 0;
  for (size_t at = 0; at < long_answer.size(); at += 4096) {
    for (auto& event : parser.feed(std::string_view(long_answer).substr(at, 4096))) n_content += event.text.size();
  }
  for (auto& event : parser.finish()) n_content += event.text.size();
  EXPECT_EQ(n_content, long_answer.size());
}

// The assistant messages of a rendered conversation (after the first user message), parsed
// back one assistant run at a time.
std::vector<HarmonyMessage> parse_rendered_assistant_turns(const std::string& prompt) {
  std::vector<HarmonyMessage> out;
  const std::string turn_start = "<|start|>assistant";
  size_t at = prompt.find(turn_start);
  while (at != std::string::npos) {
    size_t begin = at + turn_start.size();
    size_t end = begin;
    // The run ends at the next message that is not the assistant's.
    for (size_t next = prompt.find("<|start|>", begin); ; next = prompt.find("<|start|>", next + 1)) {
      if (next == std::string::npos) { end = prompt.size(); break; }
      if (prompt.compare(next, turn_start.size(), turn_start) != 0) { end = next; break; }
    }
    std::string run = prompt.substr(begin, end - begin);
    std::mt19937 random(static_cast<unsigned>(run.size()));
    std::vector<std::string> pieces;
    for (size_t i = 0; i < run.size();) {
      size_t n = std::uniform_int_distribution<size_t>(1, 7)(random);
      pieces.push_back(run.substr(i, n));
      i += n;
    }
    std::string problem;
    out.push_back(parse_pieces(pieces, {}, &problem).message);
    EXPECT_EQ(problem, "") << run;
    at = prompt.find(turn_start, end);
  }
  return out;
}

TEST(HarmonyRoundTrip, ToolCallTurnParsesBackToTheSameMessage) {
  HarmonyMessage turn{"assistant", "Let me check both.", "Need weather and location.",
                      {{"get_weather", R"({"location":"Tokyo"})"}, {"get_location", "{}"}}, ""};
  HarmonyPromptOptions options;
  options.add_generation_prompt = false;
  std::string prompt = harmony_render({{"user", "Weather?", "", {}, ""}, turn}, {}, options);
  auto parsed = parse_rendered_assistant_turns(prompt);
  ASSERT_EQ(parsed.size(), 1u);
  EXPECT_EQ(parsed[0], turn);
}

TEST(HarmonyRoundTrip, ConversationWithToolResultAndFinalAnswer) {
  std::vector<HarmonyMessage> messages = {
      {"user", "Weather in Tokyo?", "", {}, ""},
      {"assistant", "", "Need the tool.", {{"get_weather", R"({"location":"Tokyo"})"}}, ""},
      {"tool", R"({"rain": true})", "", {}, "get_weather"},
      {"assistant", "It is raining in Tokyo.", "Tool says rain.", {}, ""},
  };
  HarmonyPromptOptions options;
  options.add_generation_prompt = false;
  auto parsed = parse_rendered_assistant_turns(harmony_render(messages, {}, options));
  ASSERT_EQ(parsed.size(), 2u);
  // The tool turn's reasoning came before the final answer, so the format drops it.
  HarmonyMessage tool_turn = messages[1];
  tool_turn.reasoning.clear();
  EXPECT_EQ(parsed[0], tool_turn);
  EXPECT_EQ(parsed[1], messages[3]);
}

}  // namespace
}  // namespace flare::text
