#include "common/config.h"

#include <pwd.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <toml++/toml.h>

#include "common/error.h"
#include "common/sizes.h"
#include "common/suggest.h"

namespace flare {
namespace {

namespace fs = std::filesystem;

constexpr std::size_t kMaxConfigBytes = 1 << 20;

class Reader {
 public:
  explicit Reader(const fs::path& source) : source_(source) {}

  [[noreturn]] void invalid(const std::string& key, const std::string& reason) const {
    fail_usage("invalid configuration {}: {}: {}", source_.string(), key, reason);
  }

  void check_keys(const toml::table& table, const std::string& prefix,
                  const std::vector<std::string>& allowed) const {
    for (const auto& [key, value] : table) {
      const std::string name(key.str());
      if (std::find(allowed.begin(), allowed.end(), name) != allowed.end()) continue;
      std::string message = "unknown key";
      if (auto close = suggest_close_match(name, allowed)) message += fmt::format(" (did you mean '{}'?)", *close);
      invalid(prefix + name, message);
    }
  }

  const toml::table* table(const toml::table& root, const std::string& name) const {
    const toml::node* node = root.get(name);
    if (!node) return nullptr;
    if (!node->is_table()) invalid("[" + name + "]", "expected a table");
    return node->as_table();
  }

  std::optional<std::string> string(const toml::table& t, const std::string& prefix, const char* key) const {
    const toml::node* node = t.get(key);
    if (!node) return std::nullopt;
    if (!node->is_string()) invalid(prefix + key, fmt::format("expected a string, got {}", type_name(*node)));
    return node->as_string()->get();
  }

  std::optional<std::int64_t> integer(const toml::table& t, const std::string& prefix, const char* key,
                                      std::int64_t min, std::int64_t max) const {
    const toml::node* node = t.get(key);
    if (!node) return std::nullopt;
    if (!node->is_integer()) invalid(prefix + key, fmt::format("expected an integer, got {}", type_name(*node)));
    const std::int64_t value = node->as_integer()->get();
    if (value < min || value > max)
      invalid(prefix + key, fmt::format("expected an integer from {} to {}, got {}", min, max, value));
    return value;
  }

  std::optional<std::string> choice(const toml::table& t, const std::string& prefix, const char* key,
                                    const std::vector<std::string>& choices) const {
    auto value = string(t, prefix, key);
    if (!value) return value;
    if (std::find(choices.begin(), choices.end(), *value) == choices.end())
      invalid(prefix + key, fmt::format("expected one of {}, got \"{}\"", fmt::join(choices, ", "), *value));
    return value;
  }

  // A size string; "" means unset.
  std::optional<std::uint64_t> size(const toml::table& t, const std::string& prefix, const char* key) const {
    auto text = string(t, prefix, key);
    if (!text || text->empty()) return std::nullopt;
    try {
      return parse_byte_size(*text);
    } catch (const Error& error) {
      invalid(prefix + key, error.what());
    }
  }

  std::optional<fs::path> path(const toml::table& t, const std::string& prefix, const char* key) const {
    auto text = string(t, prefix, key);
    if (!text || text->empty()) return std::nullopt;
    if (text->find('\0') != std::string::npos) invalid(prefix + key, "path contains a NUL byte");
    return expand_user(*text);
  }

  static std::string type_name(const toml::node& node) {
    switch (node.type()) {
      case toml::node_type::table: return "a table";
      case toml::node_type::array: return "an array";
      case toml::node_type::string: return "a string";
      case toml::node_type::integer: return "an integer";
      case toml::node_type::floating_point: return "a number";
      case toml::node_type::boolean: return "a boolean";
      default: return "a date or time";
    }
  }

 private:
  fs::path source_;
};

bool valid_duration(const std::string& text) {
  if (text.size() < 2 || text.size() > 32) return false;
  const char unit = text.back();
  if (unit != 's' && unit != 'm' && unit != 'h') return false;
  for (std::size_t i = 0; i + 1 < text.size(); ++i)
    if (!std::isdigit(static_cast<unsigned char>(text[i]))) return false;
  return true;
}

ModelSettings read_model_settings(const Reader& reader, const toml::table& t, const std::string& prefix) {
  ModelSettings settings;
  settings.max_concurrency = reader.integer(t, prefix, "max_concurrency", 1, 4096);
  settings.speculative_token_capacity = reader.integer(t, prefix, "speculative_token_capacity", 1, 1 << 20);
  settings.speculative_graph_budget = reader.integer(t, prefix, "speculative_graph_budget", 1, 1 << 20);
  return settings;
}

void read_sections(const Reader& reader, const toml::table& root, Config& config) {
  reader.check_keys(root, "", {"server", "defaults", "preparation", "memory", "prefix_cache", "models", "paths",
                               "publishing", "hub"});
  if (const auto* t = reader.table(root, "server")) {
    reader.check_keys(*t, "[server] ", {"host", "port", "api_key"});
    config.server.host = reader.string(*t, "[server] ", "host");
    if (config.server.host && config.server.host->empty()) reader.invalid("[server] host", "must not be empty");
    if (auto port = reader.integer(*t, "[server] ", "port", 1, 65535)) config.server.port = static_cast<int>(*port);
    config.server.api_key = reader.string(*t, "[server] ", "api_key");
  }
  if (const auto* t = reader.table(root, "defaults")) {
    reader.check_keys(*t, "[defaults] ", {"model", "max_concurrency", "speculative_token_capacity",
                                          "speculative_graph_budget"});
    config.default_model = reader.string(*t, "[defaults] ", "model");
    if (config.default_model && config.default_model->empty()) config.default_model.reset();
    config.defaults = read_model_settings(reader, *t, "[defaults] ");
  }
  if (const auto* t = reader.table(root, "preparation")) {
    reader.check_keys(*t, "[preparation] ", {"compile_workers", "autotune_effort", "collective_tuning"});
    if (auto workers = reader.integer(*t, "[preparation] ", "compile_workers", 1, 4096))
      config.preparation.compile_workers = static_cast<int>(*workers);
    config.preparation.autotune_effort = reader.choice(*t, "[preparation] ", "autotune_effort", {"off", "default", "audit"});
    config.preparation.collective_tuning = reader.choice(*t, "[preparation] ", "collective_tuning", {"static", "runtime"});
  }
  if (const auto* t = reader.table(root, "memory")) {
    reader.check_keys(*t, "[memory] ", {"reserve"});
    config.memory.reserve_bytes = reader.size(*t, "[memory] ", "reserve");
  }
  if (const auto* t = reader.table(root, "prefix_cache")) {
    reader.check_keys(*t, "[prefix_cache] ", {"memory", "drain_on_shutdown", "disk_limit", "disk_transport"});
    config.prefix_cache.memory_bytes = reader.size(*t, "[prefix_cache] ", "memory");
    config.prefix_cache.disk_limit_bytes = reader.size(*t, "[prefix_cache] ", "disk_limit");
    if (auto drain = reader.string(*t, "[prefix_cache] ", "drain_on_shutdown")) {
      if (*drain != "on" && *drain != "off" && !valid_duration(*drain))
        reader.invalid("[prefix_cache] drain_on_shutdown",
                       fmt::format("expected \"on\", \"off\" or a duration such as \"30s\", got \"{}\"", *drain));
      config.prefix_cache.drain_on_shutdown = *drain;
    }
    if (auto transport = reader.choice(*t, "[prefix_cache] ", "disk_transport", {"", "staged", "direct"}))
      config.prefix_cache.disk_transport = *transport;
  }
  if (const auto* t = reader.table(root, "models")) {
    for (const auto& [key, node] : *t) {
      const std::string name(key.str());
      const std::string prefix = fmt::format("[models.\"{}\"] ", name);
      if (!node.is_table()) reader.invalid(fmt::format("[models.\"{}\"]", name), "expected a table");
      reader.check_keys(*node.as_table(), prefix, {"max_concurrency", "speculative_token_capacity",
                                                   "speculative_graph_budget"});
      config.models[name] = read_model_settings(reader, *node.as_table(), prefix);
    }
  }
  if (const auto* t = reader.table(root, "paths")) {
    reader.check_keys(*t, "[paths] ", {"hub_cache", "kernel_cache", "package_cache", "prefix_cache",
                                       "export_staging", "cuda"});
    config.paths.hub_cache = reader.path(*t, "[paths] ", "hub_cache");
    config.paths.kernel_cache = reader.path(*t, "[paths] ", "kernel_cache");
    config.paths.package_cache = reader.path(*t, "[paths] ", "package_cache");
    config.paths.prefix_cache = reader.path(*t, "[paths] ", "prefix_cache");
    config.paths.export_staging = reader.path(*t, "[paths] ", "export_staging");
    config.paths.cuda = reader.path(*t, "[paths] ", "cuda");
  }
  if (const auto* t = reader.table(root, "hub")) {
    reader.check_keys(*t, "[hub] ", {"endpoint", "token_file"});
    config.hub.endpoint = reader.string(*t, "[hub] ", "endpoint");
    if (config.hub.endpoint) {
      const std::string& url = *config.hub.endpoint;
      const bool http = url.rfind("http://", 0) == 0 || url.rfind("https://", 0) == 0;
      const bool clean = std::none_of(url.begin(), url.end(),
                                      [](char c) { return static_cast<unsigned char>(c) <= 0x20 || c == 0x7f; });
      if (!http || !clean || url.size() > 2048 || url.find_first_of("?#") != std::string::npos)
        reader.invalid("[hub] endpoint", fmt::format("expected an http:// or https:// URL without spaces, query or "
                                                     "fragment, got \"{}\"", url.substr(0, 200)));
    }
    config.hub.token_file = reader.path(*t, "[hub] ", "token_file");
  }
  if (const auto* t = reader.table(root, "publishing")) {
    reader.check_keys(*t, "[publishing] ", {"signing_key", "namespace", "official_source"});
    config.publishing.signing_key = reader.path(*t, "[publishing] ", "signing_key");
    config.publishing.namespace_name = reader.string(*t, "[publishing] ", "namespace");
    config.publishing.official_source = reader.string(*t, "[publishing] ", "official_source");
    const int n_set = config.publishing.signing_key.has_value() + config.publishing.namespace_name.has_value() +
                      config.publishing.official_source.has_value();
    if (n_set != 0 && n_set != 3)
      reader.invalid("[publishing]", "signing_key, namespace and official_source must be set together");
  }
}

}  // namespace

fs::path home_directory() {
  if (const char* home = std::getenv("HOME"); home && *home) return home;
  if (const passwd* entry = getpwuid(getuid()); entry && entry->pw_dir) return entry->pw_dir;
  return "/";
}

fs::path default_config_path() { return home_directory() / ".config" / "flare" / "config.toml"; }

fs::path expand_user(const std::string& path) {
  if (path == "~") return home_directory();
  if (path.rfind("~/", 0) == 0) return home_directory() / path.substr(2);
  return path;
}

Config parse_config(const std::string& text, const fs::path& source) {
  Config config;
  config.path = source;
  config.loaded = true;
  toml::table root;
  try {
    root = toml::parse(text, source.string());
  } catch (const toml::parse_error& error) {
    const auto& where = error.source().begin;
    fail_usage("invalid configuration {}:{}:{}: {}", source.string(), where.line, where.column, error.description());
  }
  read_sections(Reader(source), root, config);
  return config;
}

Config load_config(const std::optional<fs::path>& explicit_path) {
  const fs::path path = explicit_path ? *explicit_path : default_config_path();
  std::error_code ec;
  const bool exists = fs::exists(path, ec);
  if (!exists) {
    if (explicit_path) fail_usage("configuration file {} does not exist", path.string());
    Config config;
    config.path = path;
    return config;
  }
  if (fs::is_directory(path, ec)) fail_usage("configuration file {} is a directory", path.string());
  std::ifstream in(path, std::ios::binary);
  if (!in) fail_usage("cannot read configuration file {}", path.string());
  std::string text;
  text.resize(kMaxConfigBytes + 1);
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<std::size_t>(in.gcount()));
  if (text.size() > kMaxConfigBytes) fail_usage("configuration file {} is larger than 1 MiB", path.string());
  return parse_config(text, path);
}

fs::path Config::package_cache() const {
  return paths.package_cache ? *paths.package_cache : home_directory() / ".cache" / "flare" / "packages";
}
fs::path Config::kernel_cache() const {
  return paths.kernel_cache ? *paths.kernel_cache : home_directory() / ".cache" / "flare" / "kernels";
}
fs::path Config::hub_cache() const {
  return paths.hub_cache ? *paths.hub_cache : home_directory() / ".cache" / "huggingface" / "hub";
}
std::string Config::hub_endpoint() const {
  std::string url = hub.endpoint.value_or("https://huggingface.co");
  while (!url.empty() && url.back() == '/') url.pop_back();
  return url;
}
fs::path Config::directory() const { return path.parent_path(); }

ModelSettings Config::settings_for(const std::vector<std::string>& names, bool flag_overrides_concurrency) const {
  ModelSettings result = defaults;
  std::optional<ModelSettings> matched;
  std::string matched_name;
  for (const auto& [name, settings] : models) {
    if (std::find(names.begin(), names.end(), name) == names.end()) continue;
    if (matched) {
      auto conflict = [&](const auto& a, const auto& b) { return a && b && *a != *b; };
      if (conflict(matched->max_concurrency, settings.max_concurrency) && !flag_overrides_concurrency)
        fail_usage("configuration {}: [models.\"{}\"] and [models.\"{}\"] set different max_concurrency for the same "
                   "model; remove one or pass --max-concurrency",
                   path.string(), matched_name, name);
      if (conflict(matched->speculative_token_capacity, settings.speculative_token_capacity) ||
          conflict(matched->speculative_graph_budget, settings.speculative_graph_budget))
        fail_usage("configuration {}: [models.\"{}\"] and [models.\"{}\"] disagree for the same model",
                   path.string(), matched_name, name);
    } else {
      matched = ModelSettings{};
      matched_name = name;
    }
    if (settings.max_concurrency) matched->max_concurrency = settings.max_concurrency;
    if (settings.speculative_token_capacity) matched->speculative_token_capacity = settings.speculative_token_capacity;
    if (settings.speculative_graph_budget) matched->speculative_graph_budget = settings.speculative_graph_budget;
  }
  if (matched) {
    if (matched->max_concurrency) result.max_concurrency = matched->max_concurrency;
    if (matched->speculative_token_capacity) result.speculative_token_capacity = matched->speculative_token_capacity;
    if (matched->speculative_graph_budget) result.speculative_graph_budget = matched->speculative_graph_budget;
  }
  return result;
}

}  // namespace flare
