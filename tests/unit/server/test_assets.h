// Real tokenizer assets for the server tests: the demo model's (assets/demo-model) and the
// committed fixtures under tests/data/tokenizers/<name> (large files kept as .xz, decompressed
// with `xz -dc`). Tests only.
#pragma once

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "server/text_frontend.h"

namespace flare::server::testing {

inline std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

// The file, or its .xz sibling decompressed with xz; empty when neither exists.
inline std::string read_maybe_xz(const std::filesystem::path& path) {
  if (std::filesystem::exists(path)) return read_file(path);
  std::filesystem::path xz = path.string() + ".xz";
  if (!std::filesystem::exists(xz)) return {};
  std::string command = "xz -dc '" + xz.string() + "'";
  std::FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) return {};
  std::string out;
  char buffer[1 << 16];
  for (size_t n; (n = std::fread(buffer, 1, sizeof(buffer), pipe)) > 0;) out.append(buffer, n);
  ::pclose(pipe);
  return out;
}

inline TextFrontendAssets demo_assets() {
  std::filesystem::path dir = std::filesystem::path(FLARE_SOURCE_DIR) / "assets" / "demo-model";
  TextFrontendAssets assets;
  assets.tokenizer_json = read_file(dir / "tokenizer.json");
  assets.tokenizer_config_json = read_file(dir / "tokenizer_config.json");
  assets.generation_config_json = read_file(dir / "generation_config.json");
  assets.architecture = "Qwen3ForCausalLM";
  return assets;
}

// tests/data/tokenizers/<name>: tokenizer.json and tokenizer_config.json (either may be .xz).
inline TextFrontendAssets fixture_assets(const std::string& name, const std::string& architecture) {
  std::filesystem::path dir = std::filesystem::path(FLARE_TEST_DATA) / "tokenizers" / name;
  TextFrontendAssets assets;
  assets.tokenizer_json = read_maybe_xz(dir / "tokenizer.json");
  assets.tokenizer_config_json = read_maybe_xz(dir / "tokenizer_config.json");
  assets.architecture = architecture;
  return assets;
}

}  // namespace flare::server::testing
