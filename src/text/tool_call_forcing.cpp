// Call shapes per tool-call format (tool_call_forcing.h), as the models' chat templates write them.
#include "text/tool_call_forcing.h"

#include <nlohmann/json.hpp>

namespace flare::text {

std::optional<ForcedToolCallText> forced_tool_call_text(std::string_view format, std::string_view name) {
  const std::string quoted = nlohmann::json(std::string(name)).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  if (format == "hermes" || format == "qwen" || format == "qwen3") {
    return ForcedToolCallText{"<tool_call>\n{\"name\": " + quoted + ", \"arguments\": ", "}\n</tool_call>"};
  }
  if (format == "llama3_json" || format == "llama3") {
    return ForcedToolCallText{"{\"name\": " + quoted + ", \"parameters\": ", "}"};
  }
  if (format == "deepseek_v3" || format == "deepseek") {
    return ForcedToolCallText{"<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>" + std::string(name) + "\n```json\n",
                              "\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>"};
  }
  if (format == "harmony") {
    // gpt-oss: a commentary-channel message to the function, as harmony_render writes past calls;
    // <|call|> ends it (and the response: the server stops on it).
    return ForcedToolCallText{"<|channel|>commentary to=functions." + std::string(name) + " <|constrain|>json<|message|>",
                              "<|call|>"};
  }
  return std::nullopt;
}

std::optional<ToolCallOpening> tool_call_opening(std::string_view format) {
  if (format == "hermes" || format == "qwen" || format == "qwen3") return ToolCallOpening{"<tool_call>", {}, {}, true, {}};
  if (format == "deepseek_v3" || format == "deepseek") return ToolCallOpening{"<｜tool▁call▁begin｜>", {}, {}, true, {}};
  // The prompt ends with "<|start|>assistant": the reply opens inside a header.
  if (format == "harmony") return ToolCallOpening{"to=functions.", "<|start|>", "<|message|>", true, "<|channel|>"};
  return std::nullopt;
}

ForcedToolCallText tool_call_after_opener(std::string_view format, std::string_view name, bool marker_seen) {
  const std::string quoted = nlohmann::json(std::string(name)).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  if (format == "deepseek_v3" || format == "deepseek") {
    return {"function<｜tool▁sep｜>" + std::string(name) + "\n```json\n", "\n```<｜tool▁call▁end｜>"};
  }
  if (format == "harmony") {
    // "<|channel|>commentary to=functions.NAME <|constrain|>json<|message|>", or with the recipient
    // before the channel, "to=functions.NAME<|channel|>commentary <|constrain|>json<|message|>".
    const std::string channel = marker_seen ? " " : "<|channel|>commentary ";
    return {std::string(name) + channel + "<|constrain|>json<|message|>", "<|call|>"};
  }
  return {"\n{\"name\": " + quoted + ", \"arguments\": ", "}\n</tool_call>"};  // hermes
}

}  // namespace flare::text
