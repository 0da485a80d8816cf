// Tool calls in the shapes the HTTP APIs send them: OpenAI chat-completion `tool_calls`
// (streamed deltas and whole messages) and Anthropic `tool_use` content blocks (whole blocks
// and streaming events). Pure functions over ToolCallEvent / ToolCall.
#pragma once

#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "text/parser_tool_call.h"

namespace flare::text {

// One element of `choices[].delta.tool_calls` for a start or arguments event; null otherwise.
//   start:     {"index", "id", "type": "function", "function": {"name", "arguments": ""}}
//   arguments: {"index", "function": {"arguments": FRAGMENT}}
nlohmann::ordered_json openai_tool_call_delta(const ToolCallEvent& event);
// `message.tool_calls` of a non-streamed response.
nlohmann::ordered_json openai_tool_calls(const std::vector<ToolCall>& calls);

// {"type": "tool_use", "id", "name", "input": {...}}; arguments that are not a JSON object
// give an empty input.
nlohmann::ordered_json anthropic_tool_use_block(const ToolCall& call);
// Streaming: content_block_start (tool_use with empty input), content_block_delta
// (input_json_delta) and content_block_stop events for the block at `block_index`.
std::vector<nlohmann::ordered_json> anthropic_tool_use_events(const ToolCallEvent& event, int block_index);

}  // namespace flare::text
