// The text a model writes around one tool call's arguments, per tool-call format (the formats of
// parser_tool_call.h), so that constrained decoding can write it for the model: the prefix up to
// the arguments, the arguments (a JSON object, generated under a JSON constraint), the suffix.
// What the format's parser then reads back is one call of `name` with those arguments.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace flare::text {

struct ForcedToolCallText {
  std::string prefix;  // hermes: "<tool_call>\n{\"name\": \"NAME\", \"arguments\": "
  std::string suffix;  // hermes: "}\n</tool_call>"
};

// Formats: hermes (qwen, qwen3), llama3_json (llama3), deepseek_v3 (deepseek), and harmony (gpt-oss:
// "<|channel|>commentary to=functions.NAME <|constrain|>json<|message|>" ... "<|call|>", written
// right after the prompt's "<|start|>assistant", so the call is the reply's first message).

// nullopt for a format without a known call shape (or an empty format name).
std::optional<ForcedToolCallText> forced_tool_call_text(std::string_view format, std::string_view name);

// Where a call begins in free text (tool_choice "auto" with strict tools), for the formats whose
// calls open with a fixed string that ordinary text does not write: hermes "<tool_call>",
// deepseek_v3 "<｜tool▁call▁begin｜>" (each call of a list), harmony "to=functions." inside a
// message header. llama3_json has none (a call is a bare JSON object, like an answer would be).
struct ToolCallOpening {
  std::string opener;
  // When non-empty, the opener counts only after `armed_by` (and is watched from the start when
  // armed_at_start) until `disarmed_by`: harmony's headers, "<|start|>" ... "<|message|>".
  std::string armed_by, disarmed_by;
  bool armed_at_start = true;
  // Seen between arming and the opener, it selects the second continuation (harmony: the header
  // named its channel already, "<|channel|>commentary to=functions." rather than "to=functions.").
  std::string marker;
};
std::optional<ToolCallOpening> tool_call_opening(std::string_view format);

// The text from the opener to the arguments, and after them, for `name`; marker_seen: see above.
// Opener + prefix + arguments + suffix is a call the format's parser reads.
ForcedToolCallText tool_call_after_opener(std::string_view format, std::string_view name, bool marker_seen);

}  // namespace flare::text
