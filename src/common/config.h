// The configuration file (spec cli-design section 3.3): ~/.config/flare/config.toml or --config.
// All keys are optional; an absent default file supplies nothing, while an explicitly named
// missing file, an unknown key or an invalid value is a usage error naming the key and why.
// Precedence everywhere is: command-line flag > this file > recipe/package (resolve() below).
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace flare {

struct ModelSettings {
  std::optional<std::int64_t> max_concurrency;
  std::optional<std::int64_t> speculative_token_capacity;
  std::optional<std::int64_t> speculative_graph_budget;
};

struct Config {
  std::filesystem::path path;  // the file consulted (may not exist when it is the default)
  bool loaded = false;         // a file was read

  struct {
    std::optional<std::string> host;
    std::optional<int> port;
    std::optional<std::string> api_key;
  } server;

  std::optional<std::string> default_model;  // [defaults] model
  ModelSettings defaults;                    // [defaults] capacities
  std::map<std::string, ModelSettings> models;  // [models."name"]

  struct {
    std::optional<int> compile_workers;
    std::optional<std::string> autotune_effort;    // off | default | audit
    std::optional<std::string> collective_tuning;  // static | runtime
  } preparation;

  struct {
    std::optional<std::uint64_t> reserve_bytes;
  } memory;

  struct {
    std::optional<std::uint64_t> memory_bytes;     // empty string: disabled
    std::string drain_on_shutdown = "off";         // on | off | duration ("30s", "5m", "1h")
    std::optional<std::uint64_t> disk_limit_bytes; // empty: 10% of free disk
    std::string disk_transport;                    // "" (staged) | staged | direct
  } prefix_cache;

  struct {
    std::optional<std::filesystem::path> hub_cache, kernel_cache, package_cache, prefix_cache,
        export_staging, cuda;
  } paths;

  // [hub]: where Hugging Face repositories come from (native commands read no HF_* variables).
  struct {
    std::optional<std::string> endpoint;                // default https://huggingface.co
    std::optional<std::filesystem::path> token_file;    // a file holding one Hub token
  } hub;

  struct {
    std::optional<std::filesystem::path> signing_key;
    std::optional<std::string> namespace_name;
    std::optional<std::string> official_source;
    bool configured() const { return signing_key.has_value(); }
  } publishing;

  // Effective locations (configured value, else the documented default).
  std::filesystem::path package_cache() const;
  std::filesystem::path kernel_cache() const;
  std::filesystem::path hub_cache() const;
  std::string hub_endpoint() const;  // without a trailing '/'
  std::filesystem::path directory() const;  // where development keys and profiles live

  // [defaults] overlaid with every [models."name"] section matching one of `names`.
  // Two matching sections that disagree on a value are a usage error, unless
  // `flag_overrides_concurrency` says the command line supplies max_concurrency.
  ModelSettings settings_for(const std::vector<std::string>& names, bool flag_overrides_concurrency) const;
};

std::filesystem::path home_directory();
std::filesystem::path default_config_path();  // ~/.config/flare/config.toml
std::filesystem::path expand_user(const std::string& path);  // "~" and "~/..." only

// Reads the configuration. `explicit_path` is --config; without it the default file is read if
// it exists. Throws flare::Error(usage) on any problem.
Config load_config(const std::optional<std::filesystem::path>& explicit_path);
Config parse_config(const std::string& text, const std::filesystem::path& source);

// Flags over configuration over recipe.
template <typename T>
T resolve(const std::optional<T>& flag, const std::optional<T>& file, const T& recipe) {
  if (flag) return *flag;
  if (file) return *file;
  return recipe;
}

}  // namespace flare
