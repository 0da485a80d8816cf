// Validation and normalization of OpenAI-shaped chat messages and tools (also the target
// shape of the Anthropic and Responses adapters), and prompt construction through the
// frontend's chat template. Content parts are joined into text; tool-call arguments become
// objects; assistant reasoning history travels as `reasoning_content`.
#pragma once

#include <string>
#include <vector>

#include "server/api.h"
#include "server/json_body.h"

namespace flare::server {

// messages: a non-empty array of {role, content, ...}; errors name "messages[i].field".
json normalize_chat_messages(const json& messages, const std::string& path = "messages");
// Text of a content value: a string, null, or an array of {type: "text", text} parts.
std::string content_text(const json& content, const std::string& path);
// tools: [{type: "function", function: {name, description?, parameters?}}] -> the same, checked.
json normalize_chat_tools(const json& tools, const std::string& path = "tools");

struct ToolChoice {
  enum class Mode : uint8_t { auto_, none, required, named } mode = Mode::auto_;
  std::string name;
};
// tool_choice: "auto" | "none" | "required" | {"type": "function", "function": {"name"}}.
ToolChoice read_tool_choice(const json& body, const json& tools);
// The functions a call must be of: the named one, or every declared tool (required).
std::vector<std::string> required_tool_names(const ToolChoice& choice, const json& tools);

// Renders and tokenizes. Template failures become 400s naming `messages_field`.
std::vector<engine::TokenId> render_chat_prompt(const AdapterContext& context, const json& messages, const json& tools,
                                        const json& template_kwargs, bool add_generation_prompt,
                                        const std::string& messages_field);
// Whether the template kwargs leave thinking on (enable_thinking / thinking).
bool thinking_enabled(const json& template_kwargs);
// A 400 naming `field` when template_kwargs.reasoning_effort is not one the frontend's prompt
// format accepts (Frontend::reasoning_efforts; formats that list none take any value).
void check_reasoning_effort(const Frontend& frontend, const json& template_kwargs, const std::string& field);

}  // namespace flare::server
