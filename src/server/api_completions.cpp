// POST /v1/completions: OpenAI (legacy) Completions. The prompt is a string, a list of token
// ids, or a list of either (one engine request per prompt; choices are prompt-major). Echo
// prepends the prompt; logprobs use the legacy {tokens, token_logprobs, top_logprobs,
// text_offset} shape.
#include "server/adapters.h"
#include "server/adapter_util.h"
#include "server/frontend.h"
#include "server/grammar_constraint.h"
#include "server/sampling.h"
#include "server/structured_output_fields.h"

namespace flare::server {
namespace {

struct LegacyLogprobs {
  json tokens = json::array(), token_logprobs = json::array(), top_logprobs = json::array(),
       text_offset = json::array();
  int64_t offset = 0;

  void add(const LogprobEntry& entry, int32_t n_top, bool first_prompt_token) {
    std::string token = sanitize_utf8(entry.token);
    tokens.push_back(token);
    token_logprobs.push_back(first_prompt_token ? json() : json(entry.logprob));
    json top = json::object();
    for (size_t i = 0; i < entry.top.size() && static_cast<int32_t>(i) < n_top; ++i) {
      top[sanitize_utf8(entry.top[i].first)] = entry.top[i].second;
    }
    top_logprobs.push_back(first_prompt_token ? json() : std::move(top));
    text_offset.push_back(offset);
    offset += static_cast<int64_t>(entry.token.size());
  }
  json to_json() const {
    return {{"tokens", tokens}, {"token_logprobs", token_logprobs}, {"top_logprobs", top_logprobs},
            {"text_offset", text_offset}};
  }
};

class CompletionResponder final : public ResponderBase {
 public:
  CompletionResponder(const AdapterContext& context, const std::vector<engine::GenerationRequest>& requests,
                      const ChoiceOptions& options, bool stream, bool include_usage, std::string model_name,
                      std::optional<int32_t> logprobs, bool echo, std::vector<std::string> prompt_texts)
      : ResponderBase(context.frontend, requests, options, stream), include_usage_(include_usage),
        model_name_(std::move(model_name)), id_(make_random_id("cmpl-")), created_(unix_now_s()),
        logprobs_(logprobs), echo_(echo), prompt_texts_(std::move(prompt_texts)),
        finish_sent_(choices_.size(), false), echo_sent_(choices_.size(), false),
        offsets_(choices_.size(), 0) {}

  std::string on_output(size_t request_index, const engine::StepOutput& output) override {
    int32_t index = -1;
    ChoiceDelta delta = consume(request_index, output, index);
    if (!stream_) return {};
    std::string out;
    if (index >= 0) {
      std::string text;
      LegacyLogprobs logprobs;
      logprobs.offset = offsets_[index];
      if (echo_ && !echo_sent_[index]) {
        echo_sent_[index] = true;
        text = prompt_texts_[index / n_per_request_];
        for (size_t i = 0; i < delta.prompt_logprobs.size(); ++i) logprobs.add(delta.prompt_logprobs[i], logprobs_.value_or(0), i == 0);
      }
      text += delta.raw_text;
      for (const auto& entry : delta.logprobs) logprobs.add(entry, logprobs_.value_or(0), false);
      offsets_[index] = logprobs.offset;
      if (!text.empty() || !delta.logprobs.empty()) {
        out += chunk({{"index", index}, {"text", text}, {"logprobs", logprobs_ ? logprobs.to_json() : json()},
                      {"finish_reason", nullptr}});
      }
      if (delta.finished) out += finish_chunk(index);
    }
    if (done_) {
      for (size_t i = 0; i < n_choices(); ++i) out += finish_chunk(static_cast<int32_t>(i));
      if (include_usage_) {
        json payload = base();
        payload["choices"] = json::array();
        payload["usage"] = usage_json_openai(usage_);
        out += sse_data(payload);
      }
      out += "data: [DONE]\n\n";
    }
    return out;
  }

  HttpResponse final_response() override {
    json body = base();
    body["choices"] = json::array();
    for (size_t i = 0; i < n_choices(); ++i) {
      const ChoiceStream& stream = choice(i);
      if (stream.finish_reason() == engine::FinishReason::error) {
        return generation_error_response(ApiStyle::openai, stream);
      }
      std::string text = echo_ ? prompt_texts_[i / n_per_request_] + stream.raw_text() : stream.raw_text();
      json logprobs;
      if (logprobs_) {
        LegacyLogprobs legacy;
        if (echo_) {
          const auto& prompt = stream.prompt_logprobs();
          for (size_t p = 0; p < prompt.size(); ++p) legacy.add(prompt[p], *logprobs_, p == 0);
        }
        for (const auto& entry : stream.logprobs()) legacy.add(entry, *logprobs_, false);
        logprobs = legacy.to_json();
      }
      body["choices"].push_back({{"index", i}, {"text", text}, {"logprobs", logprobs},
                                 {"finish_reason", finish_name(stream)}});
    }
    body["usage"] = usage_json_openai(usage_);
    return {200, "application/json", dump_json(body), {}};
  }

  std::string stream_error(const std::string& message) override {
    return sse_data(json::parse(error_body(ApiStyle::openai, 500, message))) + "data: [DONE]\n\n";
  }

 private:
  static std::string finish_name(const ChoiceStream& stream) {
    return stream.finish_reason() == engine::FinishReason::length ? "length"
           : stream.finish_reason() == engine::FinishReason::abort ? "abort"
                                                                   : "stop";
  }
  json base() const {
    return {{"id", id_}, {"object", "text_completion"}, {"created", created_}, {"model", model_name_}};
  }
  std::string chunk(json choice) const {
    json payload = base();
    payload["choices"] = json::array({std::move(choice)});
    if (include_usage_) payload["usage"] = nullptr;
    return sse_data(payload);
  }
  std::string finish_chunk(int32_t index) {
    if (finish_sent_[index] || !choice(index).finished()) return {};
    finish_sent_[index] = true;
    if (choice(index).finish_reason() == engine::FinishReason::error) {
      return sse_data(json::parse(generation_error_body(ApiStyle::openai, choice(index))));
    }
    return chunk({{"index", index}, {"text", ""}, {"logprobs", nullptr}, {"finish_reason", finish_name(choice(index))}});
  }

  bool include_usage_;
  std::string model_name_, id_;
  int64_t created_;
  std::optional<int32_t> logprobs_;
  bool echo_;
  std::vector<std::string> prompt_texts_;
  std::vector<bool> finish_sent_, echo_sent_;
  std::vector<int64_t> offsets_;
};

std::vector<engine::TokenId> token_ids(const json& ids, const std::string& path, int32_t vocab_size) {
  std::vector<engine::TokenId> result;
  for (size_t i = 0; i < ids.size(); ++i) {
    const json& id = ids[i];
    if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() >= vocab_size) {
      fail_field(index_path(path, i), "must be a token id below {}", vocab_size);
    }
    result.push_back(static_cast<engine::TokenId>(id.get<int64_t>()));
  }
  return result;
}

// The prompt field as token-id lists (one per prompt).
std::vector<std::vector<engine::TokenId>> read_prompts(const json& body, const AdapterContext& context) {
  auto it = body.find("prompt");
  if (it == body.end() || it->is_null()) fail_field("prompt", "is required");
  int32_t vocab = context.frontend.vocab_size();
  std::vector<std::vector<engine::TokenId>> prompts;
  auto encode = [&](const json& text) { return context.frontend.encode(text.get<std::string>(), true); };
  if (it->is_string()) {
    prompts.push_back(encode(*it));
  } else if (it->is_array()) {
    if (it->empty()) fail_field("prompt", "must not be empty");
    if ((*it)[0].is_number()) {
      prompts.push_back(token_ids(*it, "prompt", vocab));
    } else {
      if (it->size() > 64) fail_field("prompt", "has more than 64 prompts");
      for (size_t i = 0; i < it->size(); ++i) {
        const json& item = (*it)[i];
        if (item.is_string()) prompts.push_back(encode(item));
        else if (item.is_array() && !item.empty()) prompts.push_back(token_ids(item, index_path("prompt", i), vocab));
        else fail_field(index_path("prompt", i), "must be a string or a non-empty array of token ids");
      }
    }
  } else {
    fail_field("prompt", "must be a string, an array of token ids, or an array of prompts");
  }
  for (size_t i = 0; i < prompts.size(); ++i) {
    if (prompts[i].empty()) fail_field(prompts.size() == 1 ? "prompt" : index_path("prompt", i), "encodes to no tokens");
  }
  return prompts;
}

}  // namespace

GenerationJob prepare_completion(const json& body, const AdapterContext& context) {
  require_object(body, "");
  auto model_name = get_string(body, "model");
  check_model_name(context.model, model_name, false);
  if (auto suffix = get_string(body, "suffix"); suffix && !suffix->empty()) fail_field("suffix", "is not supported");
  auto prompts = read_prompts(body, context);
  engine::GenerationRequest base;
  read_sampling_fields(body, context.model, context.frontend.vocab_size(), base);
  read_stop_field(body, "stop", base);
  read_n_field(body, context.model, base);
  if (auto best_of = get_int(body, "best_of", 1, context.model.sampling_ranges.n_max); best_of && *best_of != base.n) {
    fail_field("best_of", "must equal n (ranking candidates is not supported)");
  }
  auto logprobs = get_int(body, "logprobs", 0, context.model.sampling_ranges.top_logprobs_max);
  bool echo = get_bool(body, "echo").value_or(false);
  base.logprobs = logprobs.has_value();
  base.top_logprobs = static_cast<int32_t>(logprobs.value_or(0));
  base.prompt_logprobs = echo && logprobs.has_value();
  auto max_tokens = get_int(body, "max_tokens", 1, INT32_MAX);
  if (!max_tokens) max_tokens = 16;  // the Completions API default
  const auto structured = read_structured_output(body, StructuredOutputApi::completions);

  bool stream = get_bool(body, "stream").value_or(false);
  bool include_usage = false;
  if (auto options = body.find("stream_options"); options != body.end() && !options->is_null()) {
    if (!stream) fail_field("stream_options", "is only allowed when stream is true");
    require_object(*options, "stream_options");
    include_usage = get_bool(*options, "include_usage", "stream_options").value_or(false);
  }
  GenerationJob job;
  job.style = ApiStyle::openai;
  std::vector<std::string> prompt_texts;
  std::string id = make_random_id("cmpl-");
  for (size_t i = 0; i < prompts.size(); ++i) {
    engine::GenerationRequest request = base;
    request.prompt_token_ids = std::move(prompts[i]);
    apply_max_tokens(context.model, max_tokens, request, prompts.size() == 1 ? "prompt" : index_path("prompt", i));
    if (structured) apply_structured_output(context.frontend, context.model, *structured, false, "max_tokens", request);
    request.request_id = prompts.size() == 1 ? id : id + "-" + std::to_string(i);
    if (echo) prompt_texts.push_back(context.frontend.decode(request.prompt_token_ids, true));
    job.requests.push_back(std::move(request));
  }
  ChoiceOptions options;
  options.parse = false;
  options.stop_strings = base.stop_strings;
  options.include_stop_string = get_bool(body, "include_stop_str_in_output").value_or(false);
  options.skip_special_tokens = get_bool(body, "skip_special_tokens").value_or(true);
  options.logprobs = base.logprobs;
  options.prompt_logprobs = base.prompt_logprobs;
  job.responder = std::make_unique<CompletionResponder>(
      context, job.requests, options, stream, include_usage, model_name.value_or(context.model.primary_name()),
      logprobs ? std::optional<int32_t>(static_cast<int32_t>(*logprobs)) : std::nullopt, echo,
      std::move(prompt_texts));
  return job;
}

}  // namespace flare::server
