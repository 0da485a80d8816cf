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
  return std::nullopt;
}

}  // namespace flare::text
