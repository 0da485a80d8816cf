// Chat rendering with a model's chat template (see chat_template.h).
#include "text/chat_template.h"

#include <nlohmann/json.hpp>

#include "common/error.h"
#include "text/jinja/value_json.h"

namespace flare::text {

namespace {

using ordered_json = nlohmann::ordered_json;

// A special token in tokenizer_config.json: a string, or {"content": "...", ...}; null if absent.
const ordered_json* token_text(const ordered_json& config, const char* key) {
  auto it = config.find(key);
  if (it == config.end()) return nullptr;
  if (it->is_string()) return &*it;
  if (it->is_object()) {
    auto content = it->find("content");
    if (content != it->end() && content->is_string()) return &*content;
  }
  return nullptr;
}

template <typename Json>
std::vector<std::pair<std::string, jinja::Value>> variables_from(const Json& context) {
  if (!context.is_object()) fail_input("chat template context must be a JSON object");
  std::vector<std::pair<std::string, jinja::Value>> variables;
  for (auto it = context.begin(); it != context.end(); ++it) {
    variables.emplace_back(it.key(), jinja::value_from_json(it.value()));
  }
  return variables;
}

}  // namespace

ChatTemplate ChatTemplate::compile(std::string source) {
  ChatTemplate chat;
  chat.template_ = jinja::Template::compile(std::move(source));
  return chat;
}

ChatTemplate ChatTemplate::from_tokenizer_config(std::string_view config_json) {
  ordered_json config = ordered_json::parse(config_json, nullptr, false);
  if (config.is_discarded() || !config.is_object()) fail_input("tokenizer_config.json is not a JSON object");
  auto it = config.find("chat_template");
  if (it == config.end()) fail_input("tokenizer_config.json has no chat_template");
  std::string source;
  if (it->is_string()) {
    source = it->get<std::string>();
  } else if (it->is_array()) {
    for (const auto& entry : *it) {
      if (entry.is_object() && entry.value("name", "") == "default" && entry.contains("template") &&
          entry["template"].is_string()) {
        source = entry["template"].get<std::string>();
      }
    }
    if (source.empty()) fail_input("tokenizer_config.json chat_template list has no 'default' template");
  } else {
    fail_input("tokenizer_config.json chat_template must be a string or a list");
  }
  ChatTemplate chat = compile(std::move(source));
  if (const ordered_json* bos = token_text(config, "bos_token")) {
    chat.bos_token_ = bos->get<std::string>();
    chat.has_bos_ = true;
  }
  if (const ordered_json* eos = token_text(config, "eos_token")) {
    chat.eos_token_ = eos->get<std::string>();
    chat.has_eos_ = true;
  }
  return chat;
}

void ChatTemplate::set_special_tokens(std::string bos_token, std::string eos_token) {
  bos_token_ = std::move(bos_token);
  eos_token_ = std::move(eos_token);
  has_bos_ = has_eos_ = true;
}

std::string ChatTemplate::render(const nlohmann::ordered_json& context) const {
  return template_.render(variables_from(context), limits_);
}

std::string ChatTemplate::render(const nlohmann::json& context) const {
  return template_.render(variables_from(context), limits_);
}

std::string ChatTemplate::render_chat(const ordered_json& messages, const ordered_json& tools,
                                      bool add_generation_prompt, const ordered_json& extra_kwargs) const {
  if (!messages.is_array()) fail_input("messages must be a JSON array");
  ordered_json context = ordered_json::object();
  context["messages"] = messages;
  if (!tools.is_null()) {
    if (!tools.is_array()) fail_input("tools must be a JSON array");
    context["tools"] = tools;
  }
  context["add_generation_prompt"] = add_generation_prompt;
  if (has_bos_) context["bos_token"] = bos_token_;
  if (has_eos_) context["eos_token"] = eos_token_;
  if (!extra_kwargs.is_null()) {
    if (!extra_kwargs.is_object()) fail_input("chat template arguments must be a JSON object");
    for (auto it = extra_kwargs.begin(); it != extra_kwargs.end(); ++it) context[it.key()] = it.value();
  }
  return render(context);
}

}  // namespace flare::text
