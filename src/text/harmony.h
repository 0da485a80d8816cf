// The gpt-oss "harmony" conversation format: a native prompt encoder (used instead of a Jinja
// chat template) and the conversation types it reads. The streaming output parser is in
// harmony_parser.h. Message layout:  <|start|>{header}<|message|>{content}<|end|>
// where the header is a role (or a tool name), optionally "<|channel|>NAME", " to=RECIPIENT"
// and "<|constrain|>TYPE". Rendering follows OpenAI's published harmony format:
//   system     model identity, knowledge cutoff, current date, reasoning effort, valid channels
//   developer  "# Instructions" (the client's system/developer messages) and "# Tools" with the
//              functions as a TypeScript-like `namespace functions { ... }`
//   assistant  reasoning on `analysis`, content on `final`, tool calls on `commentary` to
//              functions.NAME with <|constrain|>json, ended by <|call|>
//   tool       "<|start|>functions.NAME to=assistant<|channel|>commentary<|message|>..."
// Prior reasoning is dropped the way the format says: analysis before the last final-channel
// answer is not sent back; analysis after it (a tool-calling turn still in progress) is.
// The server renders gpt-oss chats with these (server/harmony_chat.h), after checking that every
// tool result answers a call.
// Pure functions; thread-safe.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace flare::text {

inline constexpr std::string_view kHarmonyStart = "<|start|>";
inline constexpr std::string_view kHarmonyEnd = "<|end|>";
inline constexpr std::string_view kHarmonyMessage = "<|message|>";
inline constexpr std::string_view kHarmonyChannel = "<|channel|>";
inline constexpr std::string_view kHarmonyConstrain = "<|constrain|>";
inline constexpr std::string_view kHarmonyReturn = "<|return|>";
inline constexpr std::string_view kHarmonyCall = "<|call|>";

struct HarmonyToolCall {
  std::string name;       // function name, without the "functions." namespace
  std::string arguments;  // JSON text of an object
  bool operator==(const HarmonyToolCall&) const = default;
};

struct HarmonyMessage {
  std::string role;       // system, developer, user, assistant, tool
  std::string content;    // assistant: the final answer, or a preamble when it has tool calls
  std::string reasoning;  // assistant: the analysis channel
  std::vector<HarmonyToolCall> tool_calls;  // assistant
  std::string tool_name;  // tool: the function whose result this is
  bool operator==(const HarmonyMessage&) const = default;
};

struct HarmonyTool {
  std::string name;
  std::string description;
  nlohmann::ordered_json parameters;  // JSON Schema of the arguments object; null: none
};

struct HarmonyPromptOptions {
  std::string current_date;               // YYYY-MM-DD; empty: the line is left out
  std::string reasoning_effort = "medium";  // low, medium, high
  std::string knowledge_cutoff = "2024-06";
  std::string model_identity = "You are ChatGPT, a large language model trained by OpenAI.";
  // End with "<|start|>assistant". Without it, a trailing assistant message is rendered as a
  // completed sample (its reasoning kept, ended by <|return|>).
  bool add_generation_prompt = true;
};

// Renders the whole prompt. Throws flare::Error (usage) for a bad reasoning effort, an unknown
// role, or a tool message whose function cannot be named.
std::string harmony_render(const std::vector<HarmonyMessage>& messages, const std::vector<HarmonyTool>& tools,
                           const HarmonyPromptOptions& options);

// Pieces of harmony_render, exposed for tests.
std::string harmony_system_content(const HarmonyPromptOptions& options, bool has_tools);
// "namespace functions {\n\n...} // namespace functions"
std::string harmony_functions_namespace(const std::vector<HarmonyTool>& tools);
// One JSON-Schema as a TypeScript type ("string", "\"a\" | \"b\"", "number[]", "{ ... }").
std::string harmony_typescript_type(const nlohmann::ordered_json& schema, int depth = 0);

// OpenAI chat-completions shapes to the native ones. Assistant reasoning is read from
// `reasoning_content`, `reasoning` or `thinking`; content given as parts is joined text;
// tool messages are named from the `tool_call_id` of an earlier call (else `name`).
// Throws flare::Error (failure) on shapes that are not messages or tools.
std::vector<HarmonyMessage> harmony_messages_from_openai(const nlohmann::ordered_json& messages);
std::vector<HarmonyTool> harmony_tools_from_openai(const nlohmann::ordered_json& tools);

}  // namespace flare::text
