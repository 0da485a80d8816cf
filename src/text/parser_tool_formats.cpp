// Tool calls in OpenAI and Anthropic shapes (see parser_tool_formats.h).
#include "text/parser_tool_formats.h"

#include <nlohmann/json.hpp>

namespace flare::text {

using ordered_json = nlohmann::ordered_json;

ordered_json openai_tool_call_delta(const ToolCallEvent& event) {
  if (event.kind == ToolCallEvent::Kind::tool_call_start) {
    return {{"index", event.index},
            {"id", event.id},
            {"type", "function"},
            {"function", {{"name", event.name}, {"arguments", ""}}}};
  }
  if (event.kind == ToolCallEvent::Kind::arguments_delta) {
    return {{"index", event.index}, {"function", {{"arguments", event.text}}}};
  }
  return nullptr;
}

ordered_json openai_tool_calls(const std::vector<ToolCall>& calls) {
  ordered_json out = ordered_json::array();
  for (const ToolCall& call : calls) {
    out.push_back({{"id", call.id}, {"type", "function"}, {"function", {{"name", call.name}, {"arguments", call.arguments}}}});
  }
  return out;
}

ordered_json anthropic_tool_use_block(const ToolCall& call) {
  ordered_json input = ordered_json::parse(call.arguments, nullptr, false);
  if (input.is_discarded() || !input.is_object()) input = ordered_json::object();
  return {{"type", "tool_use"}, {"id", call.id}, {"name", call.name}, {"input", input}};
}

std::vector<ordered_json> anthropic_tool_use_events(const ToolCallEvent& event, int block_index) {
  switch (event.kind) {
    case ToolCallEvent::Kind::tool_call_start:
      return {{{"type", "content_block_start"},
               {"index", block_index},
               {"content_block", {{"type", "tool_use"}, {"id", event.id}, {"name", event.name}, {"input", ordered_json::object()}}}}};
    case ToolCallEvent::Kind::arguments_delta:
      return {{{"type", "content_block_delta"},
               {"index", block_index},
               {"delta", {{"type", "input_json_delta"}, {"partial_json", event.text}}}}};
    case ToolCallEvent::Kind::tool_call_end:
      return {{{"type", "content_block_stop"}, {"index", block_index}}};
    case ToolCallEvent::Kind::content: break;
  }
  return {};
}

}  // namespace flare::text
