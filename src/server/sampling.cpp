// Sampling fields, defaults, ranges and context sizing (sampling.h).
#include "server/sampling.h"

#include <algorithm>
#include <cmath>

namespace flare::server {

bool ModelInfo::accepts_name(std::string_view name) const {
  if (name == canonical_id) return true;
  return std::find(served_names.begin(), served_names.end(), name) != served_names.end();
}

void check_model_name(const ModelInfo& model, const std::optional<std::string>& name, bool required) {
  if (!name) {
    if (required) fail_field("model", "is required");
    return;
  }
  if (!model.accepts_name(*name)) {
    std::string served;
    for (const auto& served_name : model.served_names) served += (served.empty() ? "" : ", ") + served_name;
    if (served.empty()) served = model.canonical_id;
    throw ApiError(404, "model", fmt::format("The model '{}' does not exist; this server serves: {}", *name, served),
                   "model_not_found");
  }
}

namespace {

void read_logit_bias(const json& body, int32_t vocab_size, engine::SamplingParams& sampling) {
  auto it = body.find("logit_bias");
  if (it == body.end() || it->is_null()) return;
  if (!it->is_object()) fail_field("logit_bias", "must be an object mapping token ids to numbers");
  if (it->size() > 1024) fail_field("logit_bias", "has more than 1024 entries");
  for (const auto& [key, value] : it->items()) {
    std::string name = "logit_bias." + key;
    if (key.empty() || key.size() > 10 || key.find_first_not_of("0123456789") != std::string::npos) {
      fail_field(name, "keys must be token ids");
    }
    int64_t id = std::stoll(key);
    if (id >= vocab_size) fail_field(name, "token id is outside the vocabulary of {} tokens", vocab_size);
    if (!value.is_number() || !std::isfinite(value.get<double>()) || std::fabs(value.get<double>()) > 100.0) {
      fail_field(name, "must be a number between -100 and 100");
    }
    sampling.logit_bias[static_cast<TokenId>(id)] = value.get<float>();
  }
}

void read_stop_token_ids(const json& body, int32_t vocab_size, engine::GenerationRequest& request) {
  auto it = body.find("stop_token_ids");
  if (it == body.end() || it->is_null()) return;
  if (!it->is_array() || it->size() > 64) fail_field("stop_token_ids", "must be an array of at most 64 token ids");
  for (size_t i = 0; i < it->size(); ++i) {
    const json& id = (*it)[i];
    if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() >= vocab_size) {
      fail_field(index_path("stop_token_ids", i), "must be a token id below {}", vocab_size);
    }
    request.stop_token_ids.push_back(static_cast<TokenId>(id.get<int64_t>()));
  }
}

}  // namespace

void read_sampling_fields(const json& body, const ModelInfo& model, int32_t vocab_size,
                          engine::GenerationRequest& request) {
  const auto& defaults = model.sampling_defaults;
  const auto& ranges = model.sampling_ranges;
  auto& sampling = request.sampling;
  // API ranges are validated (400); the package's narrower ranges clamp.
  sampling.temperature = static_cast<float>(get_number(body, "temperature", 0.0, 2.0).value_or(defaults.temperature));
  sampling.temperature = std::min(sampling.temperature, ranges.temperature_max);
  sampling.top_p = static_cast<float>(get_number(body, "top_p", 0.0, 1.0).value_or(defaults.top_p));
  if (sampling.top_p <= 0.0f) fail_field("top_p", "must be greater than 0");
  // -1 is vLLM's "disabled"; 0 is accepted as the same.
  int64_t top_k = get_int(body, "top_k", -1, INT32_MAX).value_or(defaults.top_k);
  sampling.top_k = top_k < 0 ? 0 : static_cast<int32_t>(std::min<int64_t>(top_k, vocab_size));
  if (ranges.top_k_max > 0 && (sampling.top_k == 0 || sampling.top_k > ranges.top_k_max)) {
    sampling.top_k = ranges.top_k_max;
  }
  sampling.min_p = static_cast<float>(get_number(body, "min_p", 0.0, 1.0).value_or(defaults.min_p));
  sampling.presence_penalty = static_cast<float>(get_number(body, "presence_penalty", -2.0, 2.0).value_or(0.0));
  sampling.frequency_penalty = static_cast<float>(get_number(body, "frequency_penalty", -2.0, 2.0).value_or(0.0));
  sampling.repetition_penalty =
      static_cast<float>(get_number(body, "repetition_penalty", 0.0, 2.0).value_or(defaults.repetition_penalty));
  if (sampling.repetition_penalty <= 0.0f) fail_field("repetition_penalty", "must be greater than 0");
  if (auto seed = get_int(body, "seed", INT64_MIN, INT64_MAX)) sampling.seed = static_cast<uint64_t>(*seed);
  read_logit_bias(body, vocab_size, sampling);
  request.ignore_eos = get_bool(body, "ignore_eos").value_or(false);
  request.min_tokens = static_cast<int32_t>(get_int(body, "min_tokens", 0, INT32_MAX).value_or(0));
  read_stop_token_ids(body, vocab_size, request);
}

void read_stop_field(const json& body, const std::string& key, engine::GenerationRequest& request) {
  auto it = body.find(key);
  if (it == body.end() || it->is_null()) return;
  auto add = [&](const json& value, const std::string& name) {
    if (!value.is_string()) fail_field(name, "must be a string");
    const auto& text = value.get_ref<const std::string&>();
    if (text.empty()) fail_field(name, "must not be empty");
    if (text.size() > 1024) fail_field(name, "is longer than 1024 bytes");
    request.stop_strings.push_back(text);
  };
  if (it->is_string()) {
    add(*it, key);
  } else if (it->is_array()) {
    if (it->size() > 16) fail_field(key, "has more than 16 entries");
    for (size_t i = 0; i < it->size(); ++i) add((*it)[i], index_path(key, i));
  } else {
    fail_field(key, "must be a string or an array of strings");
  }
}

void read_n_field(const json& body, const ModelInfo& model, engine::GenerationRequest& request) {
  request.n = static_cast<int32_t>(get_int(body, "n", 1, model.sampling_ranges.n_max).value_or(1));
}

void apply_max_tokens(const ModelInfo& model, std::optional<int64_t> requested_max_tokens,
                      engine::GenerationRequest& request, const std::string& prompt_field) {
  int64_t n_prompt = static_cast<int64_t>(request.prompt_token_ids.size());
  int64_t room = model.max_context_tokens - n_prompt;
  if (room < 1) {
    engine::AdmissionError error;
    error.needed = fmt::format("{} prompt tokens + 1 generated token = {} tokens", n_prompt, n_prompt + 1);
    error.available = fmt::format("a context limit of {} tokens", model.max_context_tokens);
    error.options = fmt::format("a shorter prompt, or a larger context through {}", model.context_limit_option);
    throw ApiError(400, prompt_field, "This request exceeds the model's context: " + error.message(),
                   "context_length_exceeded");
  }
  int64_t wanted = requested_max_tokens.value_or(model.default_max_tokens > 0 ? model.default_max_tokens : room);
  request.max_tokens = static_cast<int32_t>(std::clamp<int64_t>(wanted, 1, room));
}

}  // namespace flare::server
