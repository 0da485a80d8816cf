// `ignition convert`: options, the command function and its CLI11 registration.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace CLI {
class App;
}

namespace flare::ignition {

struct ConvertOptions {
  std::filesystem::path package;
  std::string form = "directory";  // packed | directory
  std::filesystem::path output;
  std::vector<std::filesystem::path> publisher_keys;  // default: the development profile
  std::optional<std::filesystem::path> config;        // where the development profile lives
};

int run_convert(const ConvertOptions& options);

void add_convert_command(CLI::App& app);

}  // namespace flare::ignition
