// Shared adapter helpers (adapter_util.h).
#include "server/adapter_util.h"

#include <algorithm>
#include <chrono>

#include "server/frontend.h"

namespace flare::server {

std::string dump_json(const json& value) {
  return value.dump(-1, ' ', false, json::error_handler_t::replace);
}

std::string sse_data(const json& payload) { return "data: " + dump_json(payload) + "\n\n"; }

std::string sse_event(const std::string& name, const json& payload) {
  return "event: " + name + "\ndata: " + dump_json(payload) + "\n\n";
}

int64_t unix_now_s() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string sanitize_utf8(const std::string& text) {
  // Round-trip through nlohmann's replacing serializer: invalid sequences become U+FFFD.
  std::string quoted = json(text).dump(-1, ' ', false, json::error_handler_t::replace);
  return json::parse(quoted).get<std::string>();
}

std::vector<int> utf8_bytes(const std::string& text) {
  std::vector<int> bytes;
  bytes.reserve(text.size());
  for (unsigned char c : text) bytes.push_back(c);
  return bytes;
}

json chat_logprobs_json(const std::vector<LogprobEntry>& entries, int32_t n_top) {
  json content = json::array();
  for (const auto& entry : entries) {
    json top = json::array();
    for (size_t i = 0; i < entry.top.size() && static_cast<int32_t>(i) < n_top; ++i) {
      top.push_back({{"token", sanitize_utf8(entry.top[i].first)},
                     {"logprob", entry.top[i].second},
                     {"bytes", utf8_bytes(entry.top[i].first)}});
    }
    content.push_back({{"token", sanitize_utf8(entry.token)},
                       {"logprob", entry.logprob},
                       {"bytes", utf8_bytes(entry.token)},
                       {"top_logprobs", std::move(top)}});
  }
  return {{"content", std::move(content)}};
}

json usage_json_openai(const engine::Usage& usage) {
  return {{"prompt_tokens", usage.n_prompt_tokens},
          {"completion_tokens", usage.n_generated_tokens},
          {"total_tokens", usage.n_prompt_tokens + usage.n_generated_tokens},
          {"prompt_tokens_details", {{"cached_tokens", usage.n_cached_prompt_tokens}}}};
}

ResponderBase::ResponderBase(const Frontend& frontend, const std::vector<engine::GenerationRequest>& requests,
                             const ChoiceOptions& options, bool stream)
    : stream_(stream), n_per_request_(requests.empty() ? 1 : requests[0].n) {
  choices_.reserve(requests.size() * n_per_request_);
  for (const auto& request : requests) {
    for (int32_t i = 0; i < n_per_request_; ++i) choices_.emplace_back(frontend, options);
    engine::Usage usage;
    usage.n_prompt_tokens = static_cast<int32_t>(request.prompt_token_ids.size());
    usage_.n_prompt_tokens += usage.n_prompt_tokens;
    request_usage_.push_back(usage);
  }
  request_finished_.assign(requests.size(), false);
}

ChoiceDelta ResponderBase::consume(size_t request_index, const engine::StepOutput& output, int32_t& flat_index) {
  flat_index = -1;
  ChoiceDelta delta;
  if (request_index >= request_usage_.size() || request_finished_[request_index]) return delta;
  if (output.usage.n_prompt_tokens > 0) request_usage_[request_index] = output.usage;
  usage_ = {};
  for (const auto& usage : request_usage_) {
    usage_.n_prompt_tokens += usage.n_prompt_tokens;
    usage_.n_cached_prompt_tokens += usage.n_cached_prompt_tokens;
    usage_.n_generated_tokens += usage.n_generated_tokens;
  }
  if (output.choice_index >= 0 && output.choice_index < n_per_request_) {
    flat_index = static_cast<int32_t>(request_index) * n_per_request_ + output.choice_index;
    delta = choices_[flat_index].push(output);
    if (delta.stopped_by_string) cancelled_choices_.emplace_back(request_index, output.choice_index);
  }
  if (output.request_finished) {
    // Choices the engine ended without an output of their own (abort of the whole request).
    for (int32_t i = 0; i < n_per_request_; ++i) {
      auto& choice = choices_[request_index * n_per_request_ + i];
      if (choice.finished()) continue;
      engine::StepOutput final_output;
      final_output.finish_reason =
          output.finish_reason == engine::FinishReason::none ? engine::FinishReason::abort : output.finish_reason;
      final_output.error_message = output.error_message;
      choice.push(final_output);
    }
    request_finished_[request_index] = true;
    done_ = std::all_of(request_finished_.begin(), request_finished_.end(), [](bool f) { return f; });
  }
  return delta;
}

json parse_tool_arguments(const json& arguments, const std::string& field) {
  if (arguments.is_object()) return arguments;
  if (!arguments.is_string()) fail_field(field, "must be a JSON string");
  json parsed = json::parse(arguments.get<std::string>(), nullptr, false);
  if (parsed.is_discarded() || !parsed.is_object()) fail_field(field, "must be a JSON object encoded as a string");
  return parsed;
}

HttpResponse admission_error_response(ApiStyle style, const engine::AdmissionError& error) {
  HttpResponse response;
  // A busy engine is "overloaded" in Anthropic's API, which answers it with 529 (clients retry
  // on it); OpenAI-shaped APIs use 503.
  const int busy_status = style == ApiStyle::anthropic ? 529 : 503;
  response.status = error.fits_later ? busy_status : 400;
  response.body = error_body(style, response.status, error.message(), {},
                             error.fits_later ? "server_busy" : "capacity_exceeded");
  if (error.fits_later) response.headers.emplace_back("Retry-After", "1");
  return response;
}

namespace {

int generation_error_status(ApiStyle style, const ChoiceStream& stream) {
  if (!stream.capacity_error()) return 500;
  return style == ApiStyle::anthropic ? 529 : 503;
}

}  // namespace

std::string generation_error_body(ApiStyle style, const ChoiceStream& stream) {
  const int status = generation_error_status(style, stream);
  if (stream.capacity_error()) return error_body(style, status, stream.error_message(), {}, "server_busy");
  return error_body(style, status, "generation failed: " + stream.error_message());
}

HttpResponse generation_error_response(ApiStyle style, const ChoiceStream& stream) {
  HttpResponse response;
  response.status = generation_error_status(style, stream);
  response.body = generation_error_body(style, stream);
  if (stream.capacity_error()) response.headers.emplace_back("Retry-After", "1");
  return response;
}

}  // namespace flare::server
