// Harmony prompt encoder: the published system/developer layout, TypeScript tool declarations,
// assistant history (reasoning dropped after a final answer), tool results, OpenAI adapters.
#include <gtest/gtest.h>

#include "common/error.h"
#include "text/harmony.h"

namespace flare::text {
namespace {

using nlohmann::ordered_json;

HarmonyTool weather_tool() {
  HarmonyTool tool;
  tool.name = "get_current_weather";
  tool.description = "Gets the current weather in the provided location.";
  tool.parameters = ordered_json::parse(R"({"type": "object", "properties": {
      "location": {"type": "string", "description": "The city and state, e.g. San Francisco, CA"},
      "format": {"type": "string", "enum": ["celsius", "fahrenheit"], "default": "celsius"}},
      "required": ["location"]})");
  return tool;
}

HarmonyPromptOptions dated(std::string effort = "medium") {
  HarmonyPromptOptions options;
  options.current_date = "2025-06-28";
  options.reasoning_effort = std::move(effort);
  return options;
}

TEST(HarmonyRender, SystemMessageWithToolsMatchesTheSpec) {
  EXPECT_EQ(harmony_system_content(dated("high"), true),
            "You are ChatGPT, a large language model trained by OpenAI.\nKnowledge cutoff: 2024-06\n"
            "Current date: 2025-06-28\n\nReasoning: high\n\n# Valid channels: analysis, commentary, final. "
            "Channel must be included for every message.\nCalls to these tools must go to the commentary "
            "channel: 'functions'.");
}

TEST(HarmonyRender, SystemMessageWithoutToolsOrDate) {
  HarmonyPromptOptions options;
  std::string content = harmony_system_content(options, false);
  EXPECT_EQ(content.find("Current date"), std::string::npos);
  EXPECT_NE(content.find("Reasoning: medium\n"), std::string::npos);
  EXPECT_EQ(content.find("Calls to these tools"), std::string::npos);
}

TEST(HarmonyRender, BadReasoningEffortThrows) {
  EXPECT_THROW(harmony_system_content(dated("extreme"), false), Error);
}

TEST(HarmonyRender, FunctionsNamespaceMatchesTheSpecExample) {
  HarmonyTool location{"get_location", "Gets the location of the user.", nullptr};
  HarmonyTool many{"get_multiple_weathers", "Gets the current weather in the provided list of locations.",
                   ordered_json::parse(R"({"type": "object", "properties": {
      "locations": {"type": "array", "items": {"type": "string"},
                    "description": "List of city and state, e.g. [\"San Francisco, CA\", \"New York, NY\"]"},
      "format": {"type": "string", "enum": ["celsius", "fahrenheit"], "default": "celsius"}},
      "required": ["locations"]})")};
  EXPECT_EQ(harmony_functions_namespace({location, weather_tool(), many}),
            "namespace functions {\n\n"
            "// Gets the location of the user.\ntype get_location = () => any;\n\n"
            "// Gets the current weather in the provided location.\ntype get_current_weather = (_: {\n"
            "// The city and state, e.g. San Francisco, CA\nlocation: string,\n"
            "format?: \"celsius\" | \"fahrenheit\", // default: celsius\n}) => any;\n\n"
            "// Gets the current weather in the provided list of locations.\ntype get_multiple_weathers = (_: {\n"
            "// List of city and state, e.g. [\"San Francisco, CA\", \"New York, NY\"]\nlocations: string[],\n"
            "format?: \"celsius\" | \"fahrenheit\", // default: celsius\n}) => any;\n\n"
            "} // namespace functions");
}

TEST(HarmonyRender, TypeScriptTypes) {
  auto type = [](const char* schema) { return harmony_typescript_type(ordered_json::parse(schema)); };
  EXPECT_EQ(type(R"({"type": "integer"})"), "number");
  EXPECT_EQ(type(R"({"type": "boolean"})"), "boolean");
  EXPECT_EQ(type(R"({"type": ["string", "null"]})"), "string | null");
  EXPECT_EQ(type(R"({"type": "string", "nullable": true})"), "string | null");
  EXPECT_EQ(type(R"({"enum": [1, 2]})"), "1 | 2");
  EXPECT_EQ(type(R"({"const": "x"})"), "\"x\"");
  EXPECT_EQ(type(R"({"anyOf": [{"type": "number"}, {"type": "string"}]})"), "number | string");
  EXPECT_EQ(type(R"({"type": "array", "items": {"enum": ["a", "b"]}})"), "(\"a\" | \"b\")[]");
  EXPECT_EQ(type(R"({"type": "array"})"), "any[]");
  EXPECT_EQ(type(R"({"type": "object"})"), "object");
  EXPECT_EQ(type(R"({})"), "any");
  EXPECT_EQ(type(R"("not a schema")"), "any");
  EXPECT_EQ(type(R"({"type": "object", "properties": {"inner": {"type": "object", "properties": {
                       "x": {"type": "number", "description": "X\nsecond line"}}, "required": ["x"]}}})"),
            "{\ninner?: {\n  // X\n  // second line\n  x: number,\n},\n}");
}

TEST(HarmonyRender, FullConversationWithToolCallAndResult) {
  std::vector<HarmonyMessage> messages = {
      {"system", "Use a friendly tone.", "", {}, ""},
      {"user", "What is the weather like in SF?", "", {}, ""},
      {"assistant", "", "Need to use function get_weather.", {{"get_current_weather", R"({"location":"San Francisco"})"}}, ""},
      {"tool", R"({"sunny": true, "temperature": 20})", "", {}, "get_current_weather"},
  };
  std::string prompt = harmony_render(messages, {weather_tool()}, dated("high"));
  std::string expected =
      "<|start|>system<|message|>" + harmony_system_content(dated("high"), true) + "<|end|>" +
      "<|start|>developer<|message|># Instructions\n\nUse a friendly tone.\n\n# Tools\n\n## functions\n\n" +
      harmony_functions_namespace({weather_tool()}) + "<|end|>" +
      "<|start|>user<|message|>What is the weather like in SF?<|end|>"
      "<|start|>assistant<|channel|>analysis<|message|>Need to use function get_weather.<|end|>"
      "<|start|>assistant<|channel|>commentary to=functions.get_current_weather <|constrain|>json<|message|>"
      "{\"location\":\"San Francisco\"}<|call|>"
      "<|start|>functions.get_current_weather to=assistant<|channel|>commentary<|message|>"
      "{\"sunny\": true, \"temperature\": 20}<|end|><|start|>assistant";
  EXPECT_EQ(prompt, expected);
}

TEST(HarmonyRender, NoDeveloperMessageWithoutInstructionsOrTools) {
  std::string prompt = harmony_render({{"user", "What is 2 + 2?", "", {}, ""}}, {}, dated());
  EXPECT_EQ(prompt, "<|start|>system<|message|>" + harmony_system_content(dated(), false) +
                        "<|end|><|start|>user<|message|>What is 2 + 2?<|end|><|start|>assistant");
}

TEST(HarmonyRender, ReasoningOfFinishedTurnsIsDropped) {
  std::vector<HarmonyMessage> messages = {
      {"user", "What is 2 + 2?", "", {}, ""},
      {"assistant", "2 + 2 = 4.", "Simple arithmetic.", {}, ""},
      {"user", "What about 9 / 2?", "", {}, ""},
  };
  std::string prompt = harmony_render(messages, {}, dated());
  EXPECT_EQ(prompt.find("Simple arithmetic"), std::string::npos);
  EXPECT_NE(prompt.find("<|start|>assistant<|channel|>final<|message|>2 + 2 = 4.<|end|>"
                        "<|start|>user<|message|>What about 9 / 2?<|end|><|start|>assistant"),
            std::string::npos);
}

TEST(HarmonyRender, ToolTurnReasoningDroppedOnlyOnceAFinalAnswerFollows) {
  std::vector<HarmonyMessage> messages = {
      {"user", "Weather?", "", {}, ""},
      {"assistant", "", "call the tool", {{"get_current_weather", "{}"}}, ""},
      {"tool", "sunny", "", {}, ""},
  };
  EXPECT_NE(harmony_render(messages, {weather_tool()}, dated()).find("call the tool"), std::string::npos);
  messages.push_back({"assistant", "It is sunny.", "tool said sunny", {}, ""});
  messages.push_back({"user", "Thanks", "", {}, ""});
  std::string prompt = harmony_render(messages, {weather_tool()}, dated());
  EXPECT_EQ(prompt.find("call the tool"), std::string::npos);
  EXPECT_EQ(prompt.find("tool said sunny"), std::string::npos);
  // The tool message named its function from the call before it.
  EXPECT_NE(prompt.find("<|start|>functions.get_current_weather to=assistant<|channel|>commentary<|message|>sunny"),
            std::string::npos);
}

TEST(HarmonyRender, CompletedSampleKeepsReasoningAndEndsWithReturn) {
  std::vector<HarmonyMessage> messages = {{"user", "Hi", "", {}, ""}, {"assistant", "Hello!", "greet", {}, ""}};
  HarmonyPromptOptions options = dated();
  options.add_generation_prompt = false;
  std::string prompt = harmony_render(messages, {}, options);
  EXPECT_TRUE(prompt.ends_with("<|start|>assistant<|channel|>analysis<|message|>greet<|end|>"
                               "<|start|>assistant<|channel|>final<|message|>Hello!<|return|>"));
}

TEST(HarmonyRender, PreambleGoesToCommentary) {
  std::vector<HarmonyMessage> messages = {{"user", "Go", "", {}, ""},
                                          {"assistant", "Checking.", "", {{"get_location", ""}}, ""}};
  std::string prompt = harmony_render(messages, {}, dated());
  EXPECT_NE(prompt.find("<|start|>assistant<|channel|>commentary<|message|>Checking.<|end|>"
                        "<|start|>assistant<|channel|>commentary to=functions.get_location <|constrain|>json"
                        "<|message|>{}<|call|>"),
            std::string::npos);
}

TEST(HarmonyRender, BadMessagesThrow) {
  EXPECT_THROW(harmony_render({{"robot", "x", "", {}, ""}}, {}, dated()), Error);
  EXPECT_THROW(harmony_render({{"tool", "x", "", {}, ""}}, {}, dated()), Error);
}

TEST(HarmonyRender, OpenAiMessagesAndTools) {
  auto messages = harmony_messages_from_openai(ordered_json::parse(R"([
      {"role": "developer", "content": [{"type": "text", "text": "Be brief."}]},
      {"role": "user", "content": "Weather in Tokyo?"},
      {"role": "assistant", "content": null, "reasoning_content": "use the tool",
       "tool_calls": [{"id": "call_1", "type": "function",
                       "function": {"name": "get_current_weather", "arguments": "{\"location\":\"Tokyo\"}"}},
                      {"id": "call_2", "type": "function", "function": {"name": "get_location", "arguments": {}}}]},
      {"role": "tool", "tool_call_id": "call_1", "content": "rain"},
      {"role": "tool", "tool_call_id": "call_2", "content": "Tokyo"}])"));
  ASSERT_EQ(messages.size(), 5u);
  EXPECT_EQ(messages[0].content, "Be brief.");
  EXPECT_EQ(messages[2].reasoning, "use the tool");
  ASSERT_EQ(messages[2].tool_calls.size(), 2u);
  EXPECT_EQ(messages[2].tool_calls[0].arguments, R"({"location":"Tokyo"})");
  EXPECT_EQ(messages[2].tool_calls[1].arguments, "{}");
  EXPECT_EQ(messages[3].tool_name, "get_current_weather");
  EXPECT_EQ(messages[4].tool_name, "get_location");

  auto tools = harmony_tools_from_openai(ordered_json::parse(R"([{"type": "function", "function":
      {"name": "f", "description": "d", "parameters": {"type": "object", "properties": {}}}}])"));
  ASSERT_EQ(tools.size(), 1u);
  EXPECT_EQ(harmony_functions_namespace(tools), "namespace functions {\n\n// d\ntype f = () => any;\n\n} // namespace functions");
  EXPECT_THROW(harmony_messages_from_openai(ordered_json::parse(R"({"role": "user"})")), Error);
  EXPECT_THROW(harmony_messages_from_openai(ordered_json::parse(R"([{"content": "x"}])")), Error);
  EXPECT_THROW(harmony_tools_from_openai(ordered_json::parse(R"([{"type": "function"}])")), Error);
}

}  // namespace
}  // namespace flare::text
