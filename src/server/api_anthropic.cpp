// POST /v1/messages: Anthropic Messages -> GenerationRequest (system, content blocks, tool_use
// / tool_result, thinking blocks become OpenAI-shaped chat messages for the template), and
// engine outputs -> a message JSON or the exact SSE sequence: message_start,
// (content_block_start, content_block_delta*, content_block_stop)*, message_delta with
// stop_reason and usage, message_stop.
#include "server/adapters.h"
#include "server/adapter_util.h"
#include "server/chat_messages.h"
#include "server/frontend.h"
#include "server/sampling.h"
#include "server/strict_tool_calls.h"
#include "server/tool_call_constraint.h"

namespace flare::server {
namespace {

using Kind = ParsedEvent::Kind;

std::string block_text(const json& block, const std::string& path, const char* key) {
  auto text = get_string(block, key, path);
  if (!text) fail_field(field_path(path, key), "is required");
  return *text;
}

// tool_result content: a string or text blocks.
std::string tool_result_text(const json& block, const std::string& path) {
  if (!block.contains("content")) return {};
  const json& content = block["content"];
  if (content.is_string() || content.is_null()) return content.is_null() ? "" : content.get<std::string>();
  return content_text(content, field_path(path, "content"));
}

void convert_message(const json& message, const std::string& path, json& out) {
  require_object(message, path);
  auto role = get_string(message, "role", path);
  if (!role || (*role != "user" && *role != "assistant")) fail_field(field_path(path, "role"), "must be 'user' or 'assistant'");
  if (!message.contains("content")) fail_field(field_path(path, "content"), "is required");
  const json& content = message["content"];
  std::string content_path = field_path(path, "content");
  if (content.is_string()) {
    out.push_back({{"role", *role}, {"content", content}});
    return;
  }
  if (!content.is_array()) fail_field(content_path, "must be a string or an array of content blocks");
  std::string text, thinking;
  json tool_calls = json::array();
  for (size_t i = 0; i < content.size(); ++i) {
    std::string block_path = index_path(content_path, i);
    const json& block = require_object(content[i], block_path);
    std::string type = get_string(block, "type", block_path).value_or("");
    if (type == "text") {
      text += block_text(block, block_path, "text");
    } else if (type == "thinking" && *role == "assistant") {
      thinking += block_text(block, block_path, "thinking");
    } else if (type == "redacted_thinking" && *role == "assistant") {
      continue;
    } else if (type == "tool_use" && *role == "assistant") {
      auto input = block.contains("input") ? block["input"] : json::object();
      if (!input.is_object()) fail_field(field_path(block_path, "input"), "must be an object");
      tool_calls.push_back({{"id", block_text(block, block_path, "id")}, {"type", "function"},
                            {"function", {{"name", block_text(block, block_path, "name")}, {"arguments", input}}}});
    } else if (type == "tool_result" && *role == "user") {
      out.push_back({{"role", "tool"}, {"tool_call_id", block_text(block, block_path, "tool_use_id")},
                     {"content", tool_result_text(block, block_path)}});
    } else if (type == "image" || type == "document") {
      fail_field(field_path(block_path, "type"), "'{}' is not supported: this model accepts text only", type);
    } else {
      fail_field(field_path(block_path, "type"), "'{}' is not a valid {} content block", type, *role);
    }
  }
  if (*role == "user" && text.empty() && !out.empty() && out.back()["role"] == "tool") return;
  json converted = {{"role", *role}, {"content", text}};
  if (!thinking.empty()) converted["reasoning_content"] = thinking;
  if (!tool_calls.empty()) converted["tool_calls"] = std::move(tool_calls);
  out.push_back(std::move(converted));
}

json convert_tools(const json& body) {
  json tools = json::array();
  auto it = body.find("tools");
  if (it == body.end() || it->is_null()) return tools;
  if (!it->is_array()) fail_field("tools", "must be an array");
  for (size_t i = 0; i < it->size(); ++i) {
    std::string path = index_path("tools", i);
    const json& tool = require_object((*it)[i], path);
    auto name = get_string(tool, "name", path);
    if (!name || name->empty()) fail_field(field_path(path, "name"), "is required");
    json function = {{"name", *name}};
    if (auto description = get_string(tool, "description", path)) function["description"] = *description;
    auto schema = tool.find("input_schema");
    if (schema == tool.end() || !schema->is_object()) fail_field(field_path(path, "input_schema"), "must be an object");
    function["parameters"] = *schema;
    if (auto strict = get_bool(tool, "strict", path)) function["strict"] = *strict;  // structured-outputs tools
    tools.push_back({{"type", "function"}, {"function", std::move(function)}});
  }
  return tools;
}

// tool_choice {type: auto|any|tool|none, name?} -> tools kept for the template. Returns whether
// a tool call is required (any, tool): then `tools` holds the functions it may be of.
bool apply_tool_choice(const json& body, json& tools, bool& parallel) {
  auto it = body.find("tool_choice");
  if (it == body.end() || it->is_null()) return false;
  if (!it->is_object()) fail_field("tool_choice", "must be an object");
  std::string type = get_string(*it, "type", "tool_choice").value_or("");
  parallel = !get_bool(*it, "disable_parallel_tool_use", "tool_choice").value_or(false);
  if (type == "auto") return false;
  if (type == "none") {
    tools = json::array();
  } else if (type == "any") {
    if (tools.empty()) fail_field("tool_choice", "requires tools");
  } else if (type == "tool") {
    auto name = get_string(*it, "name", "tool_choice");
    if (!name) fail_field("tool_choice.name", "is required");
    json named = json::array();
    for (const auto& tool : tools) if (tool["function"]["name"] == *name) named.push_back(tool);
    if (named.empty()) fail_field("tool_choice.name", "'{}' is not among the declared tools", *name);
    tools = std::move(named);
  } else {
    fail_field("tool_choice.type", "must be 'auto', 'any', 'tool' or 'none'");
  }
  return type == "any" || type == "tool";
}

class MessagesResponder final : public ResponderBase {
 public:
  MessagesResponder(const AdapterContext& context, const engine::GenerationRequest& request,
                    const ChoiceOptions& options, bool stream, std::string model_name, bool parallel)
      : ResponderBase(context.frontend, {request}, options, stream), model_name_(std::move(model_name)),
        id_(make_random_id("msg_")), parallel_(parallel) {}

  std::string stream_start() override {
    json message = {{"id", id_}, {"type", "message"}, {"role", "assistant"}, {"content", json::array()},
                    {"model", model_name_}, {"stop_reason", nullptr}, {"stop_sequence", nullptr},
                    {"usage", usage_json(0)}};
    return sse_event("message_start", {{"type", "message_start"}, {"message", message}});
  }

  std::string on_output(size_t request_index, const engine::StepOutput& output) override {
    int32_t index = -1;
    ChoiceDelta delta = consume(request_index, output, index);
    if (!stream_) return {};
    std::string out;
    for (const auto& event : delta.events) out += stream_event(event);
    if (done_) {
      if (choice(0).finish_reason() == engine::FinishReason::error) {
        return out + sse_event("error", json::parse(generation_error_body(ApiStyle::anthropic, choice(0))));
      }
      out += close_block();
      out += sse_event("message_delta", {{"type", "message_delta"},
                                         {"delta", {{"stop_reason", stop_reason()}, {"stop_sequence", stop_sequence()}}},
                                         {"usage", usage_json(usage_.n_generated_tokens)}});
      out += sse_event("message_stop", {{"type", "message_stop"}});
    }
    return out;
  }

  HttpResponse final_response() override {
    const ChoiceStream& stream = choice(0);
    if (stream.finish_reason() == engine::FinishReason::error) {
      return generation_error_response(ApiStyle::anthropic, stream);
    }
    json content = json::array();
    if (!stream.reasoning().empty()) content.push_back({{"type", "thinking"}, {"thinking", stream.reasoning()}, {"signature", ""}});
    if (!stream.content().empty()) content.push_back({{"type", "text"}, {"text", stream.content()}});
    for (const auto& call : stream.tool_calls()) {
      json input = json::parse(call.arguments, nullptr, false);
      content.push_back({{"type", "tool_use"}, {"id", call.id}, {"name", call.name},
                         {"input", input.is_object() ? input : json::object()}});
      if (!parallel_) break;
    }
    json body = {{"id", id_}, {"type", "message"}, {"role", "assistant"}, {"model", model_name_},
                 {"content", std::move(content)}, {"stop_reason", stop_reason()}, {"stop_sequence", stop_sequence()},
                 {"usage", usage_json(usage_.n_generated_tokens)}};
    return {200, "application/json", dump_json(body), {}};
  }

  std::string stream_error(const std::string& message) override {
    return sse_event("error", json::parse(error_body(ApiStyle::anthropic, 500, message)));
  }

 private:
  json usage_json(int32_t n_output) const {
    return {{"input_tokens", usage_.n_prompt_tokens - usage_.n_cached_prompt_tokens},
            {"output_tokens", n_output},
            {"cache_read_input_tokens", usage_.n_cached_prompt_tokens},
            {"cache_creation_input_tokens", 0}};
  }
  json stop_reason() const {
    const ChoiceStream& stream = choice(0);
    switch (stream.finish_reason()) {
      case engine::FinishReason::length: return "max_tokens";
      case engine::FinishReason::abort: return "end_turn";
      default:
        if (!stream.matched_stop_string().empty()) return "stop_sequence";
        return stream.tool_calls().empty() ? "end_turn" : "tool_use";
    }
  }
  json stop_sequence() const {
    const auto& matched = choice(0).matched_stop_string();
    return matched.empty() ? json() : json(matched);
  }

  std::string open_block(Kind kind, const ChoiceEvent& event) {
    std::string out = close_block();
    json block;
    if (kind == Kind::content) block = {{"type", "text"}, {"text", ""}};
    else if (kind == Kind::reasoning) block = {{"type", "thinking"}, {"thinking", ""}};
    else {
      const ToolCall& call = choice(0).tool_calls()[event.tool_index];
      block = {{"type", "tool_use"}, {"id", call.id}, {"name", call.name}, {"input", json::object()}};
    }
    block_open_ = true;
    block_kind_ = kind;
    return out + sse_event("content_block_start",
                           {{"type", "content_block_start"}, {"index", block_index_}, {"content_block", block}});
  }

  std::string close_block() {
    if (!block_open_) return {};
    block_open_ = false;
    std::string out;
    if (block_kind_ == Kind::reasoning) {
      out = sse_event("content_block_delta", {{"type", "content_block_delta"}, {"index", block_index_},
                                              {"delta", {{"type", "signature_delta"}, {"signature", ""}}}});
    }
    out += sse_event("content_block_stop", {{"type", "content_block_stop"}, {"index", block_index_}});
    ++block_index_;
    return out;
  }

  std::string delta_event(json delta) const {
    return sse_event("content_block_delta", {{"type", "content_block_delta"}, {"index", block_index_}, {"delta", delta}});
  }

  std::string stream_event(const ChoiceEvent& event) {
    if (event.tool_index > 0 && !parallel_) return {};
    switch (event.kind) {
      case Kind::content:
      case Kind::reasoning: {
        std::string out;
        if (!block_open_ || block_kind_ != event.kind) out = open_block(event.kind, event);
        json delta = event.kind == Kind::content ? json{{"type", "text_delta"}, {"text", event.text}}
                                                 : json{{"type", "thinking_delta"}, {"thinking", event.text}};
        return out + delta_event(delta);
      }
      case Kind::tool_call_begin: return open_block(Kind::tool_call_begin, event);
      case Kind::tool_call_arguments:
        if (!block_open_ || block_kind_ != Kind::tool_call_begin) return {};
        return delta_event({{"type", "input_json_delta"}, {"partial_json", event.text}});
      case Kind::tool_call_end: return block_kind_ == Kind::tool_call_begin ? close_block() : std::string();
    }
    return {};
  }

  std::string model_name_, id_;
  bool parallel_;
  bool block_open_ = false;
  Kind block_kind_ = Kind::content;
  int32_t block_index_ = 0;
};

}  // namespace

GenerationJob prepare_anthropic_messages(const json& body, const AdapterContext& context) {
  require_object(body, "");
  auto model_name = get_string(body, "model");
  check_model_name(context.model, model_name, true);
  auto max_tokens = get_int(body, "max_tokens", 1, INT32_MAX);
  if (!max_tokens) fail_field("max_tokens", "is required");
  json messages = json::array();
  if (body.contains("system") && !body["system"].is_null()) {
    messages.push_back({{"role", "system"}, {"content", content_text(body["system"], "system")}});
  }
  auto it = body.find("messages");
  if (it == body.end() || !it->is_array() || it->empty()) fail_field("messages", "must be a non-empty array");
  for (size_t i = 0; i < it->size(); ++i) convert_message((*it)[i], index_path("messages", i), messages);
  json tools = convert_tools(body);
  bool parallel = true;
  const bool tool_required = apply_tool_choice(body, tools, parallel);
  json kwargs = json::object();
  if (auto thinking = body.find("thinking"); thinking != body.end() && !thinking->is_null()) {
    require_object(*thinking, "thinking");
    std::string type = get_string(*thinking, "type", "thinking").value_or("");
    if (type != "enabled" && type != "disabled") fail_field("thinking.type", "must be 'enabled' or 'disabled'");
    get_int(*thinking, "budget_tokens", 1, INT32_MAX, "thinking");
    kwargs["enable_thinking"] = type == "enabled";
  }
  engine::GenerationRequest request;
  request.prompt_token_ids = render_chat_prompt(context, messages, tools, kwargs, true, "messages");
  // Anthropic's temperature range is [0, 1].
  if (body.contains("temperature")) get_number(body, "temperature", 0.0, 1.0);
  read_sampling_fields(body, context.model, context.frontend.vocab_size(), request);
  read_stop_field(body, "stop_sequences", request);
  apply_max_tokens(context.model, max_tokens, request, "messages");
  bool stream = get_bool(body, "stream").value_or(false);
  const bool prompt_opened_reasoning = context.frontend.prompt_opens_reasoning(request.prompt_token_ids);
  if (tool_required) {
    force_tool_call(context.frontend, required_tool_names({ToolChoice::Mode::required, {}}, tools), tools,
                    prompt_opened_reasoning, "tool_choice", "max_tokens", request);
  } else {
    enforce_strict_tools(context.frontend, tools, prompt_opened_reasoning, "tools", request);
  }

  ChoiceOptions options;
  options.parser.thinking_enabled = thinking_enabled(kwargs);
  options.parser.prompt_opened_reasoning = prompt_opened_reasoning;
  options.parser.parse_tool_calls = !tools.empty();
  options.stop_strings = request.stop_strings;
  options.tool_call_id_prefix = "toolu_";
  request.request_id = make_random_id("msg_");
  GenerationJob job;
  job.style = ApiStyle::anthropic;
  job.responder = std::make_unique<MessagesResponder>(context, request, options, stream,
                                                      model_name.value_or(context.model.primary_name()), parallel);
  job.requests.push_back(std::move(request));
  return job;
}

}  // namespace flare::server
