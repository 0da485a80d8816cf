// OpenAI chat-completions messages and tools to harmony's native types (harmony.h).
#include <unordered_map>

#include "common/error.h"
#include "text/harmony.h"

namespace flare::text {

namespace {

using nlohmann::ordered_json;

// A string, or content parts whose text is joined; anything else is empty.
std::string text_of(const ordered_json& value) {
  if (value.is_string()) return value.get<std::string>();
  std::string out;
  if (value.is_array()) {
    for (const auto& part : value) {
      if (part.is_string()) out += part.get<std::string>();
      else if (part.is_object() && part.contains("text") && part["text"].is_string()) out += part["text"].get<std::string>();
    }
  }
  return out;
}

std::string reasoning_of(const ordered_json& message) {
  for (const char* key : {"reasoning_content", "reasoning", "thinking"}) {
    if (message.contains(key)) {
      std::string text = text_of(message[key]);
      if (!text.empty()) return text;
    }
  }
  return {};
}

// Arguments arrive as JSON text (the API's shape) or, from some clients, as an object.
std::string arguments_of(const ordered_json& function) {
  if (!function.contains("arguments")) return "{}";
  const auto& arguments = function["arguments"];
  if (arguments.is_string()) return arguments.get<std::string>();
  return arguments.dump();
}

}  // namespace

std::vector<HarmonyMessage> harmony_messages_from_openai(const ordered_json& messages) {
  if (!messages.is_array()) fail_input("harmony: messages must be an array");
  std::vector<HarmonyMessage> out;
  std::unordered_map<std::string, std::string> call_names;  // tool_call_id -> function name
  for (const auto& item : messages) {
    if (!item.is_object() || !item.contains("role") || !item["role"].is_string()) {
      fail_input("harmony: each message must be an object with a string role");
    }
    HarmonyMessage message;
    message.role = item["role"].get<std::string>();
    if (item.contains("content")) message.content = text_of(item["content"]);
    if (message.role == "assistant") {
      message.reasoning = reasoning_of(item);
      if (item.contains("tool_calls") && item["tool_calls"].is_array()) {
        for (const auto& call : item["tool_calls"]) {
          const ordered_json& function = call.is_object() && call.contains("function") ? call["function"] : call;
          if (!function.is_object() || !function.contains("name") || !function["name"].is_string()) {
            fail_input("harmony: a tool call needs a function name");
          }
          HarmonyToolCall parsed{function["name"].get<std::string>(), arguments_of(function)};
          if (call.contains("id") && call["id"].is_string()) call_names[call["id"].get<std::string>()] = parsed.name;
          message.tool_calls.push_back(std::move(parsed));
        }
      }
    } else if (message.role == "tool") {
      if (item.contains("tool_call_id") && item["tool_call_id"].is_string()) {
        auto found = call_names.find(item["tool_call_id"].get<std::string>());
        if (found != call_names.end()) message.tool_name = found->second;
      }
      if (message.tool_name.empty() && item.contains("name") && item["name"].is_string()) {
        message.tool_name = item["name"].get<std::string>();
      }
    }
    out.push_back(std::move(message));
  }
  return out;
}

std::vector<HarmonyTool> harmony_tools_from_openai(const ordered_json& tools) {
  std::vector<HarmonyTool> out;
  if (tools.is_null()) return out;
  if (!tools.is_array()) fail_input("harmony: tools must be an array");
  for (const auto& tool : tools) {
    const ordered_json& function = tool.is_object() && tool.contains("function") ? tool["function"] : tool;
    if (!function.is_object() || !function.contains("name") || !function["name"].is_string()) {
      fail_input("harmony: each tool needs a function name");
    }
    HarmonyTool parsed;
    parsed.name = function["name"].get<std::string>();
    if (function.contains("description") && function["description"].is_string()) {
      parsed.description = function["description"].get<std::string>();
    }
    if (function.contains("parameters")) parsed.parameters = function["parameters"];
    out.push_back(std::move(parsed));
  }
  return out;
}

}  // namespace flare::text
