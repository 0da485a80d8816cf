// Shared helpers for the tokenizer tests: loading the committed tokenizers (xz-compressed
// tokenizer.json under tests/data/tokenizers/<name>/) and the corpus.
#pragma once

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <vector>

#include <unistd.h>

#include <nlohmann/json.hpp>

#include "text/tokenizer.h"

namespace flare::text::testing {

inline std::filesystem::path tokenizer_data_dir() { return std::filesystem::path(FLARE_TEST_DATA) / "tokenizers"; }

inline std::string read_text_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

// The file's contents, decompressing `path`.xz with xz when only that exists. Decompressed copies
// are kept under the build tree (one per source file, refreshed when the .xz is newer) so that the
// many test processes ctest starts do not each run xz.
inline std::string read_maybe_xz(const std::filesystem::path& path) {
  namespace fs = std::filesystem;
  if (fs::exists(path)) return read_text_file(path);
  fs::path xz = path.string() + ".xz";
  if (!fs::exists(xz)) return {};
  fs::path cached = fs::path(FLARE_BINARY_DIR) / "test_tokenizers" / path.parent_path().filename() / path.filename();
  std::error_code ec;
  if (fs::exists(cached) && fs::last_write_time(cached, ec) >= fs::last_write_time(xz, ec)) return read_text_file(cached);
  std::string command = "xz -dc '" + xz.string() + "'";
  std::FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) return {};
  std::string out;
  char buffer[1 << 16];
  for (size_t n; (n = std::fread(buffer, 1, sizeof(buffer), pipe)) > 0;) out.append(buffer, n);
  if (::pclose(pipe) != 0) return {};
  // Write then rename, so that a concurrent reader never sees half a file.
  fs::create_directories(cached.parent_path(), ec);
  fs::path temporary = cached.string() + ".tmp" + std::to_string(::getpid());
  {
    std::ofstream(temporary, std::ios::binary) << out;
  }
  fs::rename(temporary, cached, ec);
  return out;
}

// Loads (once per process) the committed tokenizer `name`.
inline std::shared_ptr<const Tokenizer> committed_tokenizer(const std::string& name) {
  static std::mutex mutex;
  static std::map<std::string, std::shared_ptr<const Tokenizer>> cache;
  std::lock_guard lock(mutex);
  auto& slot = cache[name];
  if (!slot) {
    std::filesystem::path dir = tokenizer_data_dir() / name;
    slot = Tokenizer::load_from_json(read_maybe_xz(dir / "tokenizer.json"), read_maybe_xz(dir / "tokenizer_config.json"));
  }
  return slot;
}

inline std::string hex_to_bytes(const std::string& hex) {
  std::string out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2) out.push_back(static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16)));
  return out;
}

struct CorpusCase {
  std::string name;
  std::string bytes;  // the input as given to encode (may be invalid UTF-8)
};

inline const std::vector<CorpusCase>& corpus() {
  static const std::vector<CorpusCase> cases = [] {
    std::vector<CorpusCase> out;
    auto json = nlohmann::json::parse(read_text_file(tokenizer_data_dir() / "corpus.json"));
    for (const auto& entry : json) {
      CorpusCase c;
      c.name = entry["name"].get<std::string>();
      c.bytes = entry.contains("hex") ? hex_to_bytes(entry["hex"].get<std::string>()) : entry["text"].get<std::string>();
      out.push_back(std::move(c));
    }
    return out;
  }();
  return cases;
}

inline const std::vector<std::string>& committed_tokenizer_names() {
  static const std::vector<std::string> names = {"qwen3", "llama3", "deepseek_v3", "gemma3", "demo"};
  return names;
}

}  // namespace flare::text::testing
