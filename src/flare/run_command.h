// `flare run [PACKAGE|MODEL[@VERSION]]`: verify a package (signature, publisher trust, stored
// data), load it with no compilation and no tuning, size the KV cache from free memory, and serve
// the HTTP APIs until SIGINT/SIGTERM. Stages follow spec cli-design section 5.2.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "flare/package_commands.h"
#include "flare/package_download.h"
#include "flare/run_speculation.h"

namespace flare::cli {

struct RunOptions {
  std::string target;
  std::vector<std::filesystem::path> publisher_keys;
  std::optional<std::string> approve_key;
  std::optional<std::string> accept_publisher;
  std::optional<std::filesystem::path> trust_store;
  bool verify_weights = false;
  std::optional<std::string> gpus;
  std::optional<std::string> host;
  std::optional<int> port;
  std::optional<std::string> served_model_name;
  std::optional<std::filesystem::path> api_key_file;
  std::optional<int> max_concurrency;
  std::string kv_cache_limit = "memory";  // memory | context | concurrency
  std::optional<std::string> memory_limit;
  std::string scheduler_policy = "balanced";
  std::optional<double> scheduler_terminal_value;
  std::optional<double> scheduler_terminal_age_price;
  SpeculationFlags speculation;
  PackageDownloadOptions download;  // ORG/MODEL targets (package_download.h)
};

int run_serve(const PackageCommandGlobals& globals, const RunOptions& options);
void add_run_command(CLI::App& app, PackageCommandGlobals& globals, RunOptions& options);

}  // namespace flare::cli
