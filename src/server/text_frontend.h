// The server's Frontend (frontend.h) implemented with the text library (src/text): the package's
// tokenizer, its chat template, the incremental detokenizer, and the reasoning and tool-call
// parsers chosen for the model family.
#pragma once

#include <memory>
#include <string>

#include "server/frontend.h"

namespace flare::server {

// The frontend assets a package carries (payloads "frontend/<file>"); absent files are empty.
struct TextFrontendAssets {
  std::string tokenizer_json;
  std::string tokenizer_config_json;
  std::string chat_template;           // chat_template.jinja, when the checkpoint ships one
  std::string generation_config_json;
  std::string architecture;            // "Qwen3ForCausalLM": picks reasoning/tool-call parsers
};

// Throws flare::Error when the tokenizer or template cannot be loaded.
std::unique_ptr<Frontend> make_text_frontend(const TextFrontendAssets& assets);

// End-of-sequence ids: generation_config.json eos_token_id (int or list), else the tokenizer's.
std::vector<TokenId> eos_token_ids(const TextFrontendAssets& assets, const Frontend& frontend);

}  // namespace flare::server
