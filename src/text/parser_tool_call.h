// Streaming tool-call parsers: turn a model's generated text (fed as detokenized deltas) into
// content deltas and tool calls, for the formats the supported models emit:
//   hermes       <tool_call>{"name": ..., "arguments": {...}}</tool_call>   (Qwen, Hermes)
//   llama3_json  {"name": ..., "parameters": {...}} as the whole output, optionally after
//                <|python_tag|>, several separated by ';'                       (Llama 3.x)
//   deepseek_v3  <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>NAME
//                ```json ARGS ```<｜tool▁call▁end｜>...<｜tool▁calls▁end｜>      (DeepSeek V3)
// Markers split across deltas are held back until they resolve. A tool call is emitted when
// its closing marker arrives (start, one arguments fragment, end), so malformed JSON can still
// degrade to plain content instead of failing the request. One parser per request.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace flare::text {

struct ToolCallEvent {
  enum class Kind { content, tool_call_start, arguments_delta, tool_call_end };
  Kind kind;
  std::string text;  // content, or an arguments fragment (JSON text)
  int index = 0;     // tool call index within the response
  std::string id;    // tool_call_start only
  std::string name;  // tool_call_start only
};

struct ToolCall {
  std::string id;
  std::string name;
  std::string arguments;  // JSON text of an object
};

struct ToolCallParserOptions {
  // Makes the id of the index-th call; default "call_" + 24 random alphanumerics.
  std::function<std::string(int index)> make_id;
};

class ToolCallParser {
 public:
  virtual ~ToolCallParser() = default;
  virtual std::vector<ToolCallEvent> feed(std::string_view delta) = 0;
  // End of generation: unfinished markers or calls become content.
  virtual std::vector<ToolCallEvent> finish() = 0;
};

// Names: "hermes" (also "qwen", "qwen3"), "llama3_json" (also "llama3"), "deepseek_v3"
// (also "deepseek"). Throws flare::Error (usage) for an unknown name.
std::unique_ptr<ToolCallParser> make_tool_call_parser(std::string_view name, ToolCallParserOptions options = {});

// Whole-output helper: content plus the calls, from a list of events.
struct ParsedToolOutput {
  std::string content;
  std::vector<ToolCall> tool_calls;
};
ParsedToolOutput collect_tool_calls(const std::vector<ToolCallEvent>& events);

}  // namespace flare::text
