// POST /v1/chat/completions: OpenAI Chat Completions -> GenerationRequest, and engine outputs
// -> chat.completion JSON or chat.completion.chunk SSE events (role chunk, content /
// reasoning_content / tool_calls deltas, finish chunk per choice, optional usage chunk,
// [DONE]).
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

std::string chat_finish_reason(const ChoiceStream& choice) {
  switch (choice.finish_reason()) {
    case engine::FinishReason::length: return "length";
    case engine::FinishReason::abort: return "abort";
    case engine::FinishReason::error: return "error";
    default: return choice.tool_calls().empty() ? "stop" : "tool_calls";
  }
}

class ChatResponder final : public ResponderBase {
 public:
  ChatResponder(const AdapterContext& context, const engine::GenerationRequest& request, const ChoiceOptions& options,
                bool stream, bool include_usage, std::string model_name, int32_t n_top, bool parallel_tool_calls)
      : ResponderBase(context.frontend, {request}, options, stream), include_usage_(include_usage),
        model_name_(std::move(model_name)), id_(make_random_id("chatcmpl-")), created_(unix_now_s()),
        n_top_(n_top), want_logprobs_(request.logprobs), parallel_tool_calls_(parallel_tool_calls),
        finish_sent_(request.n, false) {}

  std::string stream_start() override {
    std::string out;
    for (size_t i = 0; i < n_choices(); ++i) {
      out += chunk({{"index", i}, {"delta", {{"role", "assistant"}, {"content", ""}}}, {"logprobs", nullptr},
                    {"finish_reason", nullptr}});
    }
    return out;
  }

  std::string on_output(size_t request_index, const engine::StepOutput& output) override {
    int32_t index = -1;
    ChoiceDelta delta = consume(request_index, output, index);
    if (!stream_) return {};
    std::string out;
    if (index >= 0) {
      out += delta_chunks(index, delta);
      if (delta.finished) out += finish_chunk(index);
    }
    if (done_) {
      for (size_t i = 0; i < n_choices(); ++i) out += finish_chunk(static_cast<int32_t>(i));
      if (include_usage_) {
        json payload = base("chat.completion.chunk");
        payload["choices"] = json::array();
        payload["usage"] = usage_json_openai(usage_);
        out += sse_data(payload);
      }
      out += "data: [DONE]\n\n";
    }
    return out;
  }

  HttpResponse final_response() override {
    json body = base("chat.completion");
    body["choices"] = json::array();
    for (size_t i = 0; i < n_choices(); ++i) {
      const ChoiceStream& stream = choice(i);
      if (stream.finish_reason() == engine::FinishReason::error) {
        return generation_error_response(ApiStyle::openai, stream);
      }
      json message = {{"role", "assistant"}, {"content", stream.content()}};
      if (!stream.reasoning().empty()) message["reasoning_content"] = stream.reasoning();
      json calls = json::array();
      for (const auto& call : stream.tool_calls()) {
        calls.push_back({{"id", call.id}, {"type", "function"},
                         {"function", {{"name", call.name}, {"arguments", call.arguments}}}});
        if (!parallel_tool_calls_) break;
      }
      if (!calls.empty()) {
        message["tool_calls"] = std::move(calls);
        if (stream.content().empty()) message["content"] = nullptr;
      }
      body["choices"].push_back({{"index", i}, {"message", std::move(message)},
                                 {"logprobs", want_logprobs_ ? chat_logprobs_json(stream.logprobs(), n_top_) : json()},
                                 {"finish_reason", chat_finish_reason(stream)}});
    }
    body["usage"] = usage_json_openai(usage_);
    return {200, "application/json", dump_json(body), {}};
  }

  std::string stream_error(const std::string& message) override {
    return sse_data(json::parse(error_body(ApiStyle::openai, 500, message))) + "data: [DONE]\n\n";
  }

 private:
  json base(const char* object) const {
    return {{"id", id_}, {"object", object}, {"created", created_}, {"model", model_name_}};
  }

  std::string chunk(json choice) const {
    json payload = base("chat.completion.chunk");
    payload["choices"] = json::array({std::move(choice)});
    if (include_usage_) payload["usage"] = nullptr;
    return sse_data(payload);
  }

  std::string delta_chunks(int32_t index, const ChoiceDelta& delta) {
    std::string out;
    bool logprobs_pending = want_logprobs_ && !delta.logprobs.empty();
    for (const auto& event : delta.events) {
      json d = json::object();
      if (event.kind == Kind::content) d["content"] = event.text;
      else if (event.kind == Kind::reasoning) d["reasoning_content"] = event.text;
      else if (event.kind == Kind::tool_call_end) continue;
      else {
        if (!parallel_tool_calls_ && event.tool_index > 0) continue;
        const ToolCall& call = choice(index).tool_calls()[event.tool_index];
        json tool_delta = {{"index", event.tool_index}};
        if (event.kind == Kind::tool_call_begin) {
          tool_delta["id"] = call.id;
          tool_delta["type"] = "function";
          tool_delta["function"] = {{"name", call.name}, {"arguments", ""}};
        } else {
          tool_delta["function"] = {{"arguments", event.text}};
        }
        d["tool_calls"] = json::array({std::move(tool_delta)});
      }
      out += chunk({{"index", index}, {"delta", std::move(d)},
                    {"logprobs", logprobs_pending ? chat_logprobs_json(delta.logprobs, n_top_) : json()},
                    {"finish_reason", nullptr}});
      logprobs_pending = false;
    }
    if (logprobs_pending) {  // tokens whose text is still held back (partial UTF-8, stop prefix)
      out += chunk({{"index", index}, {"delta", json::object()},
                    {"logprobs", chat_logprobs_json(delta.logprobs, n_top_)}, {"finish_reason", nullptr}});
    }
    return out;
  }

  std::string finish_chunk(int32_t index) {
    if (finish_sent_[index] || !choice(index).finished()) return {};
    finish_sent_[index] = true;
    if (choice(index).finish_reason() == engine::FinishReason::error) {
      return sse_data(json::parse(generation_error_body(ApiStyle::openai, choice(index))));
    }
    return chunk({{"index", index}, {"delta", json::object()}, {"logprobs", nullptr},
                  {"finish_reason", chat_finish_reason(choice(index))}});
  }

  bool include_usage_;
  std::string model_name_;
  std::string id_;
  int64_t created_;
  int32_t n_top_;
  bool want_logprobs_;
  bool parallel_tool_calls_;
  std::vector<bool> finish_sent_;
};

json read_template_kwargs(const json& body, const Frontend& frontend) {
  json kwargs = json::object();
  auto it = body.find("chat_template_kwargs");
  if (it != body.end() && !it->is_null()) {
    if (!it->is_object()) fail_field("chat_template_kwargs", "must be an object");
    kwargs = *it;
  }
  auto effort = get_string(body, "reasoning_effort");
  if (effort) kwargs["reasoning_effort"] = *effort;
  check_reasoning_effort(frontend, kwargs, effort ? "reasoning_effort" : "chat_template_kwargs.reasoning_effort");
  return kwargs;
}

}  // namespace

GenerationJob prepare_chat_completion(const json& body, const AdapterContext& context) {
  require_object(body, "");
  auto model_name = get_string(body, "model");
  check_model_name(context.model, model_name, false);
  if (!body.contains("messages")) fail_field("messages", "is required");
  json messages = normalize_chat_messages(body["messages"]);
  json tools = normalize_chat_tools(body.contains("tools") ? body["tools"] : json());
  ToolChoice tool_choice = read_tool_choice(body, tools);
  if (tool_choice.mode == ToolChoice::Mode::none) tools = json::array();
  if (tool_choice.mode == ToolChoice::Mode::named) {
    json named = json::array();
    for (const auto& tool : tools) if (tool["function"]["name"] == tool_choice.name) named.push_back(tool);
    tools = std::move(named);
  }
  const auto structured = read_structured_output(body, StructuredOutputApi::chat);
  json kwargs = read_template_kwargs(body, context.frontend);
  bool add_generation_prompt = get_bool(body, "add_generation_prompt").value_or(true);

  GenerationJob job;
  job.style = ApiStyle::openai;
  engine::GenerationRequest request;
  request.prompt_token_ids = render_chat_prompt(context, messages, tools, kwargs, add_generation_prompt, "messages");
  read_sampling_fields(body, context.model, context.frontend.vocab_size(), request);
  read_stop_field(body, "stop", request);
  read_n_field(body, context.model, request);
  auto max_tokens = get_int(body, "max_completion_tokens", 1, INT32_MAX);
  if (!max_tokens) max_tokens = get_int(body, "max_tokens", 1, INT32_MAX);
  apply_max_tokens(context.model, max_tokens, request, "messages");
  const bool prompt_opened_reasoning = context.frontend.prompt_opens_reasoning(request.prompt_token_ids);
  const std::string max_tokens_field = body.contains("max_completion_tokens") ? "max_completion_tokens" : "max_tokens";
  if (tool_choice.mode == ToolChoice::Mode::required || tool_choice.mode == ToolChoice::Mode::named) {
    if (structured) fail_field(structured->path, "cannot be combined with a required tool call (tool_choice)");
    force_tool_call(context.frontend, required_tool_names(tool_choice, tools), tools, prompt_opened_reasoning,
                    "tool_choice", max_tokens_field, request);
  } else if (structured) {
    apply_structured_output(context.frontend, context.model, *structured, prompt_opened_reasoning, max_tokens_field,
                            request);
  } else {
    enforce_strict_tools(context.frontend, tools, prompt_opened_reasoning, "tools", request);
  }
  request.logprobs = get_bool(body, "logprobs").value_or(false);
  auto top_logprobs = get_int(body, "top_logprobs", 0, context.model.sampling_ranges.top_logprobs_max);
  if (top_logprobs && *top_logprobs > 0 && !request.logprobs) fail_field("top_logprobs", "requires logprobs to be true");
  request.top_logprobs = static_cast<int32_t>(top_logprobs.value_or(0));

  bool stream = get_bool(body, "stream").value_or(false);
  bool include_usage = false;
  if (auto options = body.find("stream_options"); options != body.end() && !options->is_null()) {
    if (!stream) fail_field("stream_options", "is only allowed when stream is true");
    require_object(*options, "stream_options");
    include_usage = get_bool(*options, "include_usage", "stream_options").value_or(false);
  }
  ChoiceOptions options;
  options.parser.thinking_enabled = thinking_enabled(kwargs);
  options.parser.prompt_opened_reasoning = prompt_opened_reasoning;
  options.parser.parse_tool_calls = !tools.empty();
  options.stop_strings = request.stop_strings;
  options.include_stop_string = get_bool(body, "include_stop_str_in_output").value_or(false);
  options.skip_special_tokens = get_bool(body, "skip_special_tokens").value_or(true);
  options.logprobs = request.logprobs;
  bool parallel = get_bool(body, "parallel_tool_calls").value_or(true);
  request.request_id = make_random_id("chatcmpl-");
  job.responder = std::make_unique<ChatResponder>(context, request, options, stream, include_usage,
                                                  model_name.value_or(context.model.primary_name()),
                                                  request.top_logprobs, parallel);
  job.requests.push_back(std::move(request));
  return job;
}

}  // namespace flare::server
