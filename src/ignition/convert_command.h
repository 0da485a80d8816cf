// `ignition convert` and `ignition keygen`: options, command functions and CLI11 registration.
#pragma once

#include <filesystem>
#include <optional>
#include <string>

namespace CLI {
class App;
}

namespace flare::ignition {

struct ConvertOptions {
  std::filesystem::path package;
  std::string form = "directory";  // packed | directory
  std::filesystem::path output;
};

int run_convert(const ConvertOptions& options);
// Creates an unencrypted-if-empty-passphrase Ed25519 key (owner-only) and its public profile.
int run_keygen(const std::filesystem::path& key_path, const std::string& namespace_name,
               const std::string& official_source, const std::filesystem::path& profile_path,
               const std::string& passphrase);

void add_convert_command(CLI::App& app);

}  // namespace flare::ignition
