// Harmony prompt encoder: system and developer headers, then the conversation (harmony.h).
#include "text/harmony.h"

#include "common/error.h"

namespace flare::text {

namespace {

void append_message(std::string& out, std::string_view header, std::string_view content,
                    std::string_view end = kHarmonyEnd) {
  out += kHarmonyStart;
  out += header;
  out += kHarmonyMessage;
  out += content;
  out += end;
}

std::string channel_header(std::string_view role, std::string_view channel) {
  return std::string(role) + std::string(kHarmonyChannel) + std::string(channel);
}

// Instructions are the client's system and developer messages, in order.
std::string developer_content(const std::vector<HarmonyMessage>& messages, const std::vector<HarmonyTool>& tools) {
  std::string instructions;
  for (const auto& message : messages) {
    if (message.role != "system" && message.role != "developer") continue;
    if (message.content.empty()) continue;
    if (!instructions.empty()) instructions += "\n\n";
    instructions += message.content;
  }
  std::string out;
  if (!instructions.empty()) out = "# Instructions\n\n" + instructions;
  if (!tools.empty()) {
    if (!out.empty()) out += "\n\n";
    out += "# Tools\n\n## functions\n\n" + harmony_functions_namespace(tools);
  }
  return out;
}

// Index of the last assistant message that gave a final answer (content, no tool calls); -1: none.
// Reasoning before it belongs to finished turns and is dropped.
long last_final_index(const std::vector<HarmonyMessage>& messages) {
  for (size_t i = messages.size(); i > 0; --i) {
    const auto& message = messages[i - 1];
    if (message.role == "assistant" && message.tool_calls.empty() && !message.content.empty()) {
      return static_cast<long>(i - 1);
    }
  }
  return -1;
}

// Tool messages name their function; when the client left it out, the latest call before it.
std::string tool_author(const std::vector<HarmonyMessage>& messages, size_t index) {
  if (!messages[index].tool_name.empty()) return "functions." + messages[index].tool_name;
  for (size_t i = index; i > 0; --i) {
    const auto& earlier = messages[i - 1];
    if (earlier.role == "assistant" && !earlier.tool_calls.empty()) return "functions." + earlier.tool_calls.back().name;
  }
  fail_usage("harmony: tool message {} has no function name and follows no tool call", index);
}

void append_assistant(std::string& out, const HarmonyMessage& message, bool keep_reasoning, bool completed_sample) {
  if (keep_reasoning && !message.reasoning.empty()) {
    append_message(out, channel_header("assistant", "analysis"), message.reasoning);
  }
  if (!message.tool_calls.empty()) {
    // Content beside tool calls is a preamble: commentary shown to the user.
    if (!message.content.empty()) append_message(out, channel_header("assistant", "commentary"), message.content);
    for (const auto& call : message.tool_calls) {
      std::string header = channel_header("assistant", "commentary") + " to=functions." + call.name + " " +
                           std::string(kHarmonyConstrain) + "json";
      append_message(out, header, call.arguments.empty() ? "{}" : call.arguments, kHarmonyCall);
    }
    return;
  }
  if (!message.content.empty() || message.reasoning.empty()) {
    append_message(out, channel_header("assistant", "final"), message.content,
                   completed_sample ? kHarmonyReturn : kHarmonyEnd);
  }
}

}  // namespace

std::string harmony_system_content(const HarmonyPromptOptions& options, bool has_tools) {
  const std::string& effort = options.reasoning_effort;
  if (effort != "low" && effort != "medium" && effort != "high") {
    fail_usage("harmony: reasoning_effort must be low, medium or high, not '{}'", effort);
  }
  std::string out = options.model_identity + "\n";
  out += "Knowledge cutoff: " + options.knowledge_cutoff + "\n";
  if (!options.current_date.empty()) out += "Current date: " + options.current_date + "\n";
  out += "\nReasoning: " + effort + "\n\n";
  out += "# Valid channels: analysis, commentary, final. Channel must be included for every message.";
  if (has_tools) out += "\nCalls to these tools must go to the commentary channel: 'functions'.";
  return out;
}

std::string harmony_render(const std::vector<HarmonyMessage>& messages, const std::vector<HarmonyTool>& tools,
                           const HarmonyPromptOptions& options) {
  std::string out;
  append_message(out, "system", harmony_system_content(options, !tools.empty()));
  std::string developer = developer_content(messages, tools);
  if (!developer.empty()) append_message(out, "developer", developer);

  long last_final = last_final_index(messages);
  for (size_t i = 0; i < messages.size(); ++i) {
    const auto& message = messages[i];
    if (message.role == "system" || message.role == "developer") continue;  // in the developer message
    if (message.role == "user") {
      append_message(out, "user", message.content);
    } else if (message.role == "assistant") {
      bool completed_sample = !options.add_generation_prompt && i + 1 == messages.size();
      bool keep_reasoning = static_cast<long>(i) > last_final || completed_sample;
      append_assistant(out, message, keep_reasoning, completed_sample);
    } else if (message.role == "tool") {
      append_message(out, tool_author(messages, i) + " to=assistant" + std::string(kHarmonyChannel) + "commentary",
                     message.content);
    } else {
      fail_usage("harmony: unknown message role '{}'", message.role);
    }
  }
  if (options.add_generation_prompt) {
    out += kHarmonyStart;
    out += "assistant";
  }
  return out;
}

}  // namespace flare::text
