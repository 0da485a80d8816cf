// Chat rendering: turns a conversation (OpenAI-style messages, tools and template keyword
// arguments, as JSON) into the prompt string with a model's Jinja chat template and the
// special tokens of its tokenizer_config.json. Output matches transformers'
// apply_chat_template as rendered by @huggingface/jinja (trim_blocks and lstrip_blocks on).
// A ChatTemplate is immutable after construction; render() may run on many threads at once.
#pragma once

#include <string>
#include <string_view>

#include <nlohmann/json_fwd.hpp>

#include "text/jinja/template.h"

namespace flare::text {

class ChatTemplate {
 public:
  // Throws flare::Error with line and column on a syntax error.
  static ChatTemplate compile(std::string source);
  // Reads `chat_template` (a string, or a list of {name, template} where "default" wins)
  // and the bos/eos tokens (strings or AddedToken objects) from tokenizer_config.json text.
  static ChatTemplate from_tokenizer_config(std::string_view config_json);

  void set_special_tokens(std::string bos_token, std::string eos_token);
  void set_limits(const jinja::RenderLimits& limits) { limits_ = limits; }

  // Renders with `context` (a JSON object) as the template's variables. Objects keep their
  // key order with ordered_json; plain json sorts keys, which changes `tojson` output.
  std::string render(const nlohmann::ordered_json& context) const;
  std::string render(const nlohmann::json& context) const;

  // messages: array; tools: array or null (then left undefined); extra_kwargs: object or null
  // (e.g. {"enable_thinking": false}). bos_token and eos_token are added when known.
  std::string render_chat(const nlohmann::ordered_json& messages, const nlohmann::ordered_json& tools,
                          bool add_generation_prompt, const nlohmann::ordered_json& extra_kwargs) const;

  const std::string& source() const { return template_.source(); }
  const std::string& bos_token() const { return bos_token_; }
  const std::string& eos_token() const { return eos_token_; }

 private:
  jinja::Template template_;
  std::string bos_token_;
  std::string eos_token_;
  bool has_bos_ = false;
  bool has_eos_ = false;
  jinja::RenderLimits limits_;
};

}  // namespace flare::text
