// The real Qwen3 and Llama 3 tokenizers (tests/data/tokenizers) as the server sees them: a text
// frontend, its token table, and its end-of-sequence token. Loaded once per test binary.
#pragma once

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>

#include "server/text_frontend.h"

namespace flare::grammar::testing {

inline std::string read_maybe_xz(const std::filesystem::path& path) {
  if (std::filesystem::exists(path)) {
    std::ifstream in(path, std::ios::binary);
    std::ostringstream buffer;
    buffer << in.rdbuf();
    return buffer.str();
  }
  if (!std::filesystem::exists(path.string() + ".xz")) return {};
  std::string command = "xz -dc '" + path.string() + ".xz'";
  std::FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) return {};
  std::string out;
  char buffer[1 << 16];
  for (size_t n; (n = std::fread(buffer, 1, sizeof(buffer), pipe)) > 0;) out.append(buffer, n);
  ::pclose(pipe);
  return out;
}

struct TestVocabulary {
  std::string name;
  std::unique_ptr<server::Frontend> frontend;
  server::TokenId eos = -1;
};

// name: "qwen3" or "llama3".
inline const TestVocabulary& test_vocabulary(const std::string& name) {
  static std::map<std::string, std::unique_ptr<TestVocabulary>> loaded;
  auto& slot = loaded[name];
  if (!slot) {
    const auto dir = std::filesystem::path(FLARE_TEST_DATA) / "tokenizers" / name;
    server::TextFrontendAssets assets;
    assets.tokenizer_json = read_maybe_xz(dir / "tokenizer.json");
    assets.tokenizer_config_json = read_maybe_xz(dir / "tokenizer_config.json");
    assets.architecture = name == "qwen3" ? "Qwen3ForCausalLM" : "LlamaForCausalLM";
    slot = std::make_unique<TestVocabulary>();
    slot->name = name;
    slot->frontend = server::make_text_frontend(assets);
    auto ids = server::eos_token_ids(assets, *slot->frontend);
    slot->eos = ids.empty() ? -1 : ids[0];
  }
  return *slot;
}

}  // namespace flare::grammar::testing
