// `flare models ...`, `flare inspect` and `flare trust revoke`: options structs, the command
// functions, and their CLI11 registration.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace CLI {
class App;
}

namespace flare::cli {

struct PackageCommandGlobals {
  std::optional<std::filesystem::path> config;       // --config
  std::optional<std::filesystem::path> model_cache;  // --model-cache
  bool plain = false;                                // --plain
};

struct InspectOptions {
  std::string target;  // PACKAGE | MODEL[@VERSION]
  bool json = false, plain = false, unverified = false, memory_map = false, graphs = false, frontend = false, all = false;
  std::optional<int> tensor_parallel, rank;
  std::vector<std::filesystem::path> publisher_keys;
  std::optional<std::filesystem::path> trust_store;
};

int run_models_list(const PackageCommandGlobals& globals, const std::string& model, bool json);
int run_models_select(const PackageCommandGlobals& globals, const std::string& entry);
int run_models_remove(const PackageCommandGlobals& globals, const std::string& entry, bool clear_default);
int run_models_gc(const PackageCommandGlobals& globals, bool json);
int run_inspect(const PackageCommandGlobals& globals, const InspectOptions& options);
void add_inspect_command(CLI::App& parent, PackageCommandGlobals& globals);
int run_trust_revoke(const PackageCommandGlobals& globals, const std::string& fingerprint,
                     const std::optional<std::filesystem::path>& trust_store);

// Registers `models` (list, inspect, select, remove, gc), `inspect` and `trust revoke` on `app`.
// `globals` must outlive parsing (the lead's global flags fill it).
void add_package_commands(CLI::App& app, PackageCommandGlobals& globals);

}  // namespace flare::cli
