// POST /v1/responses (stateless): OpenAI Responses -> GenerationRequest (string or item input,
// instructions, function tools, function_call / function_call_output items), and engine
// outputs -> a response object or its SSE events (response.created, response.in_progress,
// output_item.added / content_part.added / *.delta / *.done per item, response.completed or
// response.incomplete), each with a sequence_number.
#include "server/adapters.h"
#include "server/adapter_util.h"
#include "server/chat_messages.h"
#include "server/frontend.h"
#include "server/sampling.h"
#include "server/grammar_constraint.h"
#include "server/structured_output_fields.h"
#include "server/strict_tool_calls.h"
#include "server/tool_call_constraint.h"

namespace flare::server {
namespace {

using Kind = ParsedEvent::Kind;

void convert_input_item(const json& item, const std::string& path, json& messages) {
  require_object(item, path);
  std::string type = get_string(item, "type", path).value_or("message");
  if (type == "message") {
    auto role = get_string(item, "role", path);
    if (!role) fail_field(field_path(path, "role"), "is required");
    if (*role != "user" && *role != "assistant" && *role != "system" && *role != "developer") {
      fail_field(field_path(path, "role"), "must be user, assistant, system or developer");
    }
    if (!item.contains("content")) fail_field(field_path(path, "content"), "is required");
    std::string text = content_text(item["content"], field_path(path, "content"));
    messages.push_back({{"role", *role == "developer" ? "system" : *role}, {"content", text}});
  } else if (type == "function_call") {
    auto name = get_string(item, "name", path);
    auto call_id = get_string(item, "call_id", path);
    if (!name) fail_field(field_path(path, "name"), "is required");
    if (!call_id) fail_field(field_path(path, "call_id"), "is required");
    json arguments = parse_tool_arguments(item.contains("arguments") ? item["arguments"] : json("{}"),
                                          field_path(path, "arguments"));
    json call = {{"id", *call_id}, {"type", "function"}, {"function", {{"name", *name}, {"arguments", arguments}}}};
    // Consecutive calls belong to one assistant turn.
    if (!messages.empty() && messages.back()["role"] == "assistant" && messages.back().contains("tool_calls") &&
        messages.back()["content"] == "") {
      messages.back()["tool_calls"].push_back(std::move(call));
    } else {
      messages.push_back({{"role", "assistant"}, {"content", ""}, {"tool_calls", json::array({std::move(call)})}});
    }
  } else if (type == "function_call_output") {
    auto call_id = get_string(item, "call_id", path);
    if (!call_id) fail_field(field_path(path, "call_id"), "is required");
    const json output = item.contains("output") ? item["output"] : json("");
    std::string text = output.is_string() ? output.get<std::string>() : content_text(output, field_path(path, "output"));
    messages.push_back({{"role", "tool"}, {"tool_call_id", *call_id}, {"content", text}});
  } else if (type == "reasoning") {
    std::string text;
    for (const char* key : {"content", "summary"}) {
      if (!item.contains(key) || !item[key].is_array()) continue;
      for (const auto& part : item[key]) if (part.is_object() && part.contains("text") && part["text"].is_string()) text += part["text"].get<std::string>();
      if (!text.empty()) break;
    }
    messages.push_back({{"role", "assistant"}, {"content", ""}, {"reasoning_content", text}, {"_reasoning_only", true}});
  } else {
    fail_field(field_path(path, "type"), "'{}' is not supported", type);
  }
}

// Merges reasoning-only items into the assistant message that follows them.
json merge_reasoning(json messages) {
  json merged = json::array();
  for (size_t i = 0; i < messages.size(); ++i) {
    json& message = messages[i];
    if (message.contains("_reasoning_only")) {
      if (i + 1 < messages.size() && messages[i + 1]["role"] == "assistant") {
        messages[i + 1]["reasoning_content"] = message["reasoning_content"];
        continue;
      }
      message.erase("_reasoning_only");
    }
    merged.push_back(std::move(message));
  }
  return merged;
}

json convert_tools(const json& body) {
  json tools = json::array();
  auto it = body.find("tools");
  if (it == body.end() || it->is_null()) return tools;
  if (!it->is_array()) fail_field("tools", "must be an array");
  for (size_t i = 0; i < it->size(); ++i) {
    std::string path = index_path("tools", i);
    const json& tool = require_object((*it)[i], path);
    std::string type = get_string(tool, "type", path).value_or("");
    if (type != "function") fail_field(field_path(path, "type"), "only 'function' tools are supported");
    auto name = get_string(tool, "name", path);
    if (!name || name->empty()) fail_field(field_path(path, "name"), "is required");
    json function = {{"name", *name}};
    if (auto description = get_string(tool, "description", path)) function["description"] = *description;
    if (tool.contains("parameters") && tool["parameters"].is_object()) function["parameters"] = tool["parameters"];
    if (auto strict = get_bool(tool, "strict", path)) function["strict"] = *strict;
    tools.push_back({{"type", "function"}, {"function", std::move(function)}});
  }
  return tools;
}

struct ResponseSettings {
  std::string model_name;
  json instructions, tools_echo, tool_choice_echo;
  json text_echo = {{"format", {{"type", "text"}}}};
  double temperature = 1.0, top_p = 1.0;
  std::optional<int64_t> max_output_tokens;
  bool parallel = true;
};

class ResponsesResponder final : public ResponderBase {
 public:
  ResponsesResponder(const AdapterContext& context, const engine::GenerationRequest& request,
                     const ChoiceOptions& options, bool stream, ResponseSettings settings)
      : ResponderBase(context.frontend, {request}, options, stream), settings_(std::move(settings)),
        id_(make_random_id("resp_")), created_(unix_now_s()) {}

  std::string stream_start() override {
    json response = response_json("in_progress");
    std::string out = event("response.created", {{"response", response}});
    return out + event("response.in_progress", {{"response", response}});
  }

  std::string on_output(size_t request_index, const engine::StepOutput& output) override {
    int32_t index = -1;
    ChoiceDelta delta = consume(request_index, output, index);
    if (!stream_) return {};
    std::string out;
    for (const auto& choice_event : delta.events) out += stream_event(choice_event);
    if (done_) {
      if (choice(0).finish_reason() == engine::FinishReason::error) {
        // A capacity retirement keeps its retryable code, as the other APIs' streamed errors do.
        const char* code = choice(0).capacity_error() ? "server_busy" : "server_error";
        return out + event("error", {{"code", code}, {"message", choice(0).error_message()}, {"param", nullptr}});
      }
      out += close_item();
      std::string status = final_status();
      out += event(status == "completed" ? "response.completed" : "response.incomplete", {{"response", response_json(status)}});
    }
    return out;
  }

  HttpResponse final_response() override {
    if (choice(0).finish_reason() == engine::FinishReason::error) {
      return generation_error_response(ApiStyle::openai, choice(0));
    }
    return {200, "application/json", dump_json(response_json(final_status())), {}};
  }

  std::string stream_error(const std::string& message) override {
    return event("error", {{"code", "server_error"}, {"message", message}, {"param", nullptr}});
  }

 private:
  std::string final_status() const {
    return choice(0).finish_reason() == engine::FinishReason::length ? "incomplete" : "completed";
  }

  json response_json(const std::string& status) const {
    json response = {{"id", id_}, {"object", "response"}, {"created_at", created_}, {"status", status},
                     {"model", settings_.model_name}, {"output", status == "in_progress" ? json::array() : output_items()},
                     {"instructions", settings_.instructions}, {"tools", settings_.tools_echo},
                     {"tool_choice", settings_.tool_choice_echo}, {"parallel_tool_calls", settings_.parallel},
                     {"temperature", settings_.temperature}, {"top_p", settings_.top_p},
                     {"max_output_tokens", settings_.max_output_tokens ? json(*settings_.max_output_tokens) : json()},
                     {"previous_response_id", nullptr}, {"error", nullptr}, {"store", false},
                     {"text", settings_.text_echo}, {"metadata", json::object()},
                     {"incomplete_details", status == "incomplete" ? json{{"reason", "max_output_tokens"}} : json()}};
    response["usage"] = status == "in_progress" ? json() : json{
        {"input_tokens", usage_.n_prompt_tokens},
        {"input_tokens_details", {{"cached_tokens", usage_.n_cached_prompt_tokens}}},
        {"output_tokens", usage_.n_generated_tokens},
        {"output_tokens_details", {{"reasoning_tokens", 0}}},
        {"total_tokens", usage_.n_prompt_tokens + usage_.n_generated_tokens}};
    return response;
  }

  json output_items() const {
    if (stream_) return streamed_items_;
    json items = json::array();
    const ChoiceStream& stream = choice(0);
    if (!stream.reasoning().empty()) items.push_back(reasoning_item(make_random_id("rs_"), stream.reasoning(), "completed"));
    if (!stream.content().empty()) items.push_back(message_item(make_random_id("msg_"), stream.content(), "completed"));
    for (const auto& call : stream.tool_calls()) {
      items.push_back(call_item(make_random_id("fc_"), call, call.arguments, "completed"));
      if (!settings_.parallel) break;
    }
    return items;
  }

  static json reasoning_item(const std::string& id, const std::string& text, const char* status) {
    json content = text.empty() ? json::array() : json::array({{{"type", "reasoning_text"}, {"text", text}}});
    return {{"type", "reasoning"}, {"id", id}, {"summary", json::array()}, {"content", content}, {"status", status}};
  }
  static json text_part(const std::string& text) {
    return {{"type", "output_text"}, {"text", text}, {"annotations", json::array()}};
  }
  static json message_item(const std::string& id, const std::string& text, const char* status) {
    json content = std::string(status) == "in_progress" ? json::array() : json::array({text_part(text)});
    return {{"type", "message"}, {"id", id}, {"status", status}, {"role", "assistant"}, {"content", content}};
  }
  static json call_item(const std::string& id, const ToolCall& call, const std::string& arguments, const char* status) {
    return {{"type", "function_call"}, {"id", id}, {"call_id", call.id}, {"name", call.name},
            {"arguments", arguments}, {"status", status}};
  }

  std::string event(const std::string& type, json payload) {
    payload["type"] = type;
    payload["sequence_number"] = sequence_number_++;
    return sse_event(type, payload);
  }

  std::string open_item(Kind kind, const ChoiceEvent& choice_event) {
    std::string out = close_item();
    item_open_ = true;
    item_kind_ = kind;
    item_text_.clear();
    json item;
    if (kind == Kind::content) {
      item_id_ = make_random_id("msg_");
      item = message_item(item_id_, "", "in_progress");
    } else if (kind == Kind::reasoning) {
      item_id_ = make_random_id("rs_");
      item = reasoning_item(item_id_, "", "in_progress");
    } else {
      item_id_ = make_random_id("fc_");
      item_tool_ = choice_event.tool_index;
      item = call_item(item_id_, choice(0).tool_calls()[item_tool_], "", "in_progress");
    }
    out += event("response.output_item.added", {{"output_index", output_index_}, {"item", item}});
    if (kind == Kind::content) {
      out += event("response.content_part.added", {{"item_id", item_id_}, {"output_index", output_index_},
                                                   {"content_index", 0}, {"part", text_part("")}});
    }
    return out;
  }

  std::string close_item() {
    if (!item_open_) return {};
    item_open_ = false;
    std::string out;
    json item;
    json where = {{"item_id", item_id_}, {"output_index", output_index_}};
    if (item_kind_ == Kind::content) {
      json text_done = where;
      text_done["content_index"] = 0;
      text_done["text"] = item_text_;
      out += event("response.output_text.done", text_done);
      json part_done = where;
      part_done["content_index"] = 0;
      part_done["part"] = text_part(item_text_);
      out += event("response.content_part.done", part_done);
      item = message_item(item_id_, item_text_, "completed");
    } else if (item_kind_ == Kind::reasoning) {
      json done = where;
      done["content_index"] = 0;
      done["text"] = item_text_;
      out += event("response.reasoning_text.done", done);
      item = reasoning_item(item_id_, item_text_, "completed");
    } else {
      json done = where;
      done["arguments"] = item_text_;
      out += event("response.function_call_arguments.done", done);
      item = call_item(item_id_, choice(0).tool_calls()[item_tool_], item_text_, "completed");
    }
    out += event("response.output_item.done", {{"output_index", output_index_}, {"item", item}});
    streamed_items_.push_back(item);
    ++output_index_;
    return out;
  }

  std::string stream_event(const ChoiceEvent& choice_event) {
    if (choice_event.tool_index > 0 && !settings_.parallel) return {};
    json where = {{"item_id", item_id_}, {"output_index", output_index_}};
    switch (choice_event.kind) {
      case Kind::content:
      case Kind::reasoning: {
        std::string out;
        if (!item_open_ || item_kind_ != choice_event.kind) out = open_item(choice_event.kind, choice_event);
        item_text_ += choice_event.text;
        json delta = {{"item_id", item_id_}, {"output_index", output_index_}, {"content_index", 0},
                      {"delta", choice_event.text}};
        return out + event(choice_event.kind == Kind::content ? "response.output_text.delta"
                                                              : "response.reasoning_text.delta",
                           delta);
      }
      case Kind::tool_call_begin: return open_item(Kind::tool_call_begin, choice_event);
      case Kind::tool_call_arguments:
        if (!item_open_ || item_kind_ != Kind::tool_call_begin) return {};
        item_text_ += choice_event.text;
        where["delta"] = choice_event.text;
        return event("response.function_call_arguments.delta", where);
      case Kind::tool_call_end: return item_kind_ == Kind::tool_call_begin ? close_item() : std::string();
    }
    return {};
  }

  ResponseSettings settings_;
  std::string id_;
  int64_t created_;
  int64_t sequence_number_ = 0;
  int32_t output_index_ = 0;
  bool item_open_ = false;
  Kind item_kind_ = Kind::content;
  std::string item_id_, item_text_;
  int32_t item_tool_ = -1;
  json streamed_items_ = json::array();
};

}  // namespace

GenerationJob prepare_responses(const json& body, const AdapterContext& context) {
  require_object(body, "");
  auto model_name = get_string(body, "model");
  check_model_name(context.model, model_name, false);
  if (get_string(body, "previous_response_id")) {
    fail_field("previous_response_id", "is not supported: this server is stateless; send the whole conversation");
  }
  json messages = json::array();
  auto instructions = get_string(body, "instructions");
  if (instructions) messages.push_back({{"role", "system"}, {"content", *instructions}});
  auto input = body.find("input");
  if (input == body.end() || input->is_null()) fail_field("input", "is required");
  if (input->is_string()) {
    messages.push_back({{"role", "user"}, {"content", *input}});
  } else if (input->is_array() && !input->empty()) {
    for (size_t i = 0; i < input->size(); ++i) convert_input_item((*input)[i], index_path("input", i), messages);
  } else {
    fail_field("input", "must be a string or a non-empty array of items");
  }
  messages = merge_reasoning(std::move(messages));
  json tools = convert_tools(body);
  ResponseSettings settings;
  settings.tools_echo = body.contains("tools") && body["tools"].is_array() ? body["tools"] : json::array();
  settings.tool_choice_echo = body.contains("tool_choice") ? body["tool_choice"] : json("auto");
  ToolChoice tool_choice = read_tool_choice(body, tools);
  if (tool_choice.mode == ToolChoice::Mode::none) tools = json::array();
  json kwargs = json::object();
  if (auto reasoning = body.find("reasoning"); reasoning != body.end() && !reasoning->is_null()) {
    require_object(*reasoning, "reasoning");
    if (auto effort = get_string(*reasoning, "effort", "reasoning")) kwargs["reasoning_effort"] = *effort;
  }
  check_reasoning_effort(context.frontend, kwargs, "reasoning.effort");
  engine::GenerationRequest request;
  request.prompt_token_ids = render_chat_prompt(context, messages, tools, kwargs, true, "input");
  read_sampling_fields(body, context.model, context.frontend.vocab_size(), request);
  settings.max_output_tokens = get_int(body, "max_output_tokens", 1, INT32_MAX);
  apply_max_tokens(context.model, settings.max_output_tokens, request, "input");
  bool stream = get_bool(body, "stream").value_or(false);
  const bool prompt_opened_reasoning = context.frontend.prompt_opens_reasoning(request.prompt_token_ids);
  const auto structured = read_structured_output(body, StructuredOutputApi::responses);
  if (structured && body.contains("text")) settings.text_echo = body["text"];
  if (tool_choice.mode == ToolChoice::Mode::required || tool_choice.mode == ToolChoice::Mode::named) {
    if (structured) fail_field(structured->path, "cannot be combined with a required tool call (tool_choice)");
    force_tool_call(context.frontend, required_tool_names(tool_choice, tools), tools, prompt_opened_reasoning,
                    "tool_choice", "max_output_tokens", request);
  } else if (structured) {
    apply_structured_output(context.frontend, context.model, *structured, prompt_opened_reasoning, "max_output_tokens",
                            request);
  } else {
    enforce_strict_tools(context.frontend, tools, prompt_opened_reasoning, "tools", request);
  }
  settings.model_name = model_name.value_or(context.model.primary_name());
  settings.instructions = instructions ? json(*instructions) : json();
  settings.temperature = request.sampling.temperature;
  settings.top_p = request.sampling.top_p;
  settings.parallel = get_bool(body, "parallel_tool_calls").value_or(true);

  ChoiceOptions options;
  options.parser.thinking_enabled = thinking_enabled(kwargs);
  options.parser.prompt_opened_reasoning = prompt_opened_reasoning;
  options.parser.parse_tool_calls = !tools.empty();
  request.request_id = make_random_id("resp_");
  GenerationJob job;
  job.style = ApiStyle::openai;
  job.responder = std::make_unique<ResponsesResponder>(context, request, options, stream, std::move(settings));
  job.requests.push_back(std::move(request));
  return job;
}

}  // namespace flare::server
