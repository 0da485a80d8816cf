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

// nullopt for a format without a known call shape (or an empty format name).
std::optional<ForcedToolCallText> forced_tool_call_text(std::string_view format, std::string_view name);

}  // namespace flare::text
