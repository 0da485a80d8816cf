// A harmony (gpt-oss) frontend small enough for unit tests: the demo tokenizer with harmony's
// special tokens added after its vocabulary (ids 8192..8198) and no chat template. Tests only.
#pragma once

#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "server/text_frontend.h"
#include "test_assets.h"

namespace flare::server::testing {

inline const char* const kHarmonySpecials[] = {"<|return|>", "<|constrain|>", "<|channel|>", "<|start|>",
                                               "<|end|>",    "<|message|>",   "<|call|>"};

inline TextFrontendAssets harmony_assets(const std::string& architecture = "GptOssForCausalLM") {
  TextFrontendAssets assets = demo_assets();
  nlohmann::json tokenizer = nlohmann::json::parse(assets.tokenizer_json);
  int32_t id = 8192;
  for (const char* special : kHarmonySpecials) {
    tokenizer["added_tokens"].push_back({{"id", id++}, {"content", special}, {"single_word", false}, {"lstrip", false},
                                         {"rstrip", false}, {"normalized", false}, {"special", true}});
  }
  assets.tokenizer_json = tokenizer.dump();
  nlohmann::json config = nlohmann::json::parse(assets.tokenizer_config_json);
  config.erase("chat_template");
  config["eos_token"] = "<|return|>";
  assets.tokenizer_config_json = config.dump();
  assets.generation_config_json.clear();
  assets.architecture = architecture;
  return assets;
}

inline const Frontend& harmony_frontend() {
  static const std::unique_ptr<Frontend> frontend = make_text_frontend(harmony_assets());
  return *frontend;
}

}  // namespace flare::server::testing
