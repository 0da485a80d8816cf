// Chat message and tool normalization, prompt rendering (chat_messages.h).
#include "server/chat_messages.h"

#include <algorithm>

#include "common/error.h"
#include "server/adapter_util.h"
#include "server/frontend.h"

namespace flare::server {

std::string content_text(const json& content, const std::string& path) {
  if (content.is_null()) return {};
  if (content.is_string()) return content.get<std::string>();
  if (!content.is_array()) fail_field(path, "must be a string or an array of content parts");
  std::string text;
  for (size_t i = 0; i < content.size(); ++i) {
    const json& part = content[i];
    std::string part_path = index_path(path, i);
    if (!part.is_object()) fail_field(part_path, "must be an object");
    std::string type = get_string(part, "type", part_path).value_or("");
    if (type == "text" || type == "input_text" || type == "output_text") {
      auto part_text = get_string(part, "text", part_path);
      if (!part_text) fail_field(field_path(part_path, "text"), "is required");
      if (!text.empty()) text += "\n";
      text += *part_text;
    } else if (type == "image_url" || type == "input_image" || type == "image" || type == "input_audio") {
      fail_field(field_path(part_path, "type"), "'{}' is not supported: this model accepts text only", type);
    } else {
      fail_field(field_path(part_path, "type"), "must be 'text'");
    }
  }
  return text;
}

namespace {

json normalize_tool_calls(const json& calls, const std::string& path) {
  if (!calls.is_array()) fail_field(path, "must be an array");
  json result = json::array();
  for (size_t i = 0; i < calls.size(); ++i) {
    std::string call_path = index_path(path, i);
    const json& call = require_object(calls[i], call_path);
    auto it = call.find("function");
    if (it == call.end() || !it->is_object()) fail_field(field_path(call_path, "function"), "must be an object");
    std::string function_path = field_path(call_path, "function");
    auto name = get_string(*it, "name", function_path);
    if (!name || name->empty()) fail_field(field_path(function_path, "name"), "is required");
    json arguments = it->contains("arguments") ? (*it)["arguments"] : json("{}");
    json function = {{"name", *name}, {"arguments", parse_tool_arguments(arguments, field_path(function_path, "arguments"))}};
    result.push_back({{"id", get_string(call, "id", call_path).value_or(make_random_id("call_"))},
                      {"type", "function"},
                      {"function", std::move(function)}});
  }
  return result;
}

json normalize_message(const json& message, const std::string& path) {
  require_object(message, path);
  auto role = get_string(message, "role", path);
  if (!role) fail_field(field_path(path, "role"), "is required");
  static const char* roles[] = {"system", "developer", "user", "assistant", "tool"};
  if (std::find(std::begin(roles), std::end(roles), *role) == std::end(roles)) {
    fail_field(field_path(path, "role"), "must be one of system, developer, user, assistant, tool");
  }
  json result = {{"role", *role == "developer" ? "system" : *role}};
  bool has_content = message.contains("content") && !message["content"].is_null();
  if (!has_content && *role != "assistant") fail_field(field_path(path, "content"), "is required");
  result["content"] = content_text(has_content ? message["content"] : json(), field_path(path, "content"));
  if (auto name = get_string(message, "name", path)) result["name"] = *name;
  if (*role == "assistant") {
    auto reasoning = get_string(message, "reasoning_content", path);
    if (!reasoning) reasoning = get_string(message, "reasoning", path);
    if (reasoning) result["reasoning_content"] = *reasoning;
    if (message.contains("tool_calls") && !message["tool_calls"].is_null()) {
      result["tool_calls"] = normalize_tool_calls(message["tool_calls"], field_path(path, "tool_calls"));
    }
  }
  if (*role == "tool") {
    auto id = get_string(message, "tool_call_id", path);
    if (id) result["tool_call_id"] = *id;
  }
  return result;
}

}  // namespace

json normalize_chat_messages(const json& messages, const std::string& path) {
  if (!messages.is_array()) fail_field(path, "must be an array of messages");
  if (messages.empty()) fail_field(path, "must contain at least one message");
  json result = json::array();
  for (size_t i = 0; i < messages.size(); ++i) result.push_back(normalize_message(messages[i], index_path(path, i)));
  return result;
}

json normalize_chat_tools(const json& tools, const std::string& path) {
  if (tools.is_null()) return json::array();
  if (!tools.is_array()) fail_field(path, "must be an array");
  json result = json::array();
  for (size_t i = 0; i < tools.size(); ++i) {
    std::string tool_path = index_path(path, i);
    const json& tool = require_object(tools[i], tool_path);
    std::string type = get_string(tool, "type", tool_path).value_or("function");
    if (type != "function") fail_field(field_path(tool_path, "type"), "must be 'function'");
    auto it = tool.find("function");
    if (it == tool.end() || !it->is_object()) fail_field(field_path(tool_path, "function"), "must be an object");
    std::string function_path = field_path(tool_path, "function");
    auto name = get_string(*it, "name", function_path);
    if (!name || name->empty()) fail_field(field_path(function_path, "name"), "is required");
    json function = {{"name", *name}};
    if (auto description = get_string(*it, "description", function_path)) function["description"] = *description;
    if (it->contains("parameters") && !(*it)["parameters"].is_null()) {
      if (!(*it)["parameters"].is_object()) fail_field(field_path(function_path, "parameters"), "must be an object");
      function["parameters"] = (*it)["parameters"];
    }
    // Strict tools have their arguments enforced (tool_call_constraint.h); templates see the flag as sent.
    if (auto strict = get_bool(*it, "strict", function_path)) function["strict"] = *strict;
    result.push_back({{"type", "function"}, {"function", std::move(function)}});
  }
  return result;
}

ToolChoice read_tool_choice(const json& body, const json& tools) {
  ToolChoice choice;
  auto it = body.find("tool_choice");
  if (it == body.end() || it->is_null()) return choice;
  if (it->is_string()) {
    const auto& mode = it->get_ref<const std::string&>();
    if (mode == "auto") choice.mode = ToolChoice::Mode::auto_;
    else if (mode == "none") choice.mode = ToolChoice::Mode::none;
    else if (mode == "required") choice.mode = ToolChoice::Mode::required;
    else fail_field("tool_choice", "must be 'auto', 'none', 'required' or a named function");
  } else if (it->is_object()) {
    const json* function = it->contains("function") ? &(*it)["function"] : nullptr;
    auto name = function && function->is_object() ? get_string(*function, "name", "tool_choice.function")
                                                   : get_string(*it, "name", "tool_choice");
    if (!name) fail_field("tool_choice.function.name", "is required");
    choice.mode = ToolChoice::Mode::named;
    choice.name = *name;
  } else {
    fail_field("tool_choice", "must be a string or an object");
  }
  if (choice.mode == ToolChoice::Mode::required || choice.mode == ToolChoice::Mode::named) {
    if (tools.empty()) fail_field("tool_choice", "requires tools");
  }
  if (choice.mode == ToolChoice::Mode::named) {
    bool found = false;
    for (const auto& tool : tools) found = found || tool["function"]["name"] == choice.name;
    if (!found) fail_field("tool_choice", "names '{}', which is not among the declared tools", choice.name);
  }
  return choice;
}

std::vector<std::string> required_tool_names(const ToolChoice& choice, const json& tools) {
  if (choice.mode == ToolChoice::Mode::named) return {choice.name};
  std::vector<std::string> names;
  for (const auto& tool : tools) names.push_back(tool["function"]["name"].get<std::string>());
  return names;
}

bool thinking_enabled(const json& template_kwargs) {
  for (const char* key : {"enable_thinking", "thinking"}) {
    auto it = template_kwargs.find(key);
    if (it != template_kwargs.end() && it->is_boolean()) return it->get<bool>();
  }
  return true;
}

void check_reasoning_effort(const Frontend& frontend, const json& template_kwargs, const std::string& field) {
  auto it = template_kwargs.find("reasoning_effort");
  if (it == template_kwargs.end() || it->is_null()) return;
  std::vector<std::string> efforts = frontend.reasoning_efforts();
  if (efforts.empty()) return;
  std::string names;
  for (const auto& effort : efforts) names += (names.empty() ? "'" : ", '") + effort + "'";
  if (!it->is_string() || std::find(efforts.begin(), efforts.end(), it->get<std::string>()) == efforts.end()) {
    fail_field(field, "must be one of {} for this model, not {}", names, it->dump());
  }
}

std::vector<engine::TokenId> render_chat_prompt(const AdapterContext& context, const json& messages, const json& tools,
                                        const json& template_kwargs, bool add_generation_prompt,
                                        const std::string& messages_field) {
  std::string prompt;
  try {
    prompt = context.frontend.render_chat(messages, tools, template_kwargs, add_generation_prompt);
  } catch (const Error& error) {
    throw ApiError(400, messages_field, std::string("the chat template rejected the conversation: ") + error.what());
  }
  return context.frontend.encode(prompt, context.frontend.chat_prompt_needs_special_tokens());
}

}  // namespace flare::server
