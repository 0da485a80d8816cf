// `flare models list|select|remove|gc` and `flare trust revoke` (spec "Local model management").
#include <cstdio>

#include <nlohmann/json.hpp>

#include "common/cli.h"
#include "common/config.h"
#include "common/error.h"
#include "common/sizes.h"
#include "common/terminal.h"
#include "flare/package_commands.h"
#include "package/cache.h"
#include "package/trust.h"

namespace flare::cli {
namespace {

package::ModelCache open_cache(const PackageCommandGlobals& globals) {
  if (globals.model_cache) return package::ModelCache(*globals.model_cache);
  return package::ModelCache(load_config(globals.config).package_cache());
}

nlohmann::json optional_bytes(const std::optional<std::uint64_t>& value) {
  return value ? nlohmann::json(*value) : nlohmann::json(nullptr);
}

nlohmann::json entry_json(const package::EntryInfo& entry) {
  nlohmann::json deployments = nlohmann::json::array();
  if (entry.manifest) {
    for (const auto& d : entry.manifest->deployments()) {
      deployments.push_back({{"tensor_parallel", d.tensor_parallel()},
                             {"max_concurrency", d.capacities().max_concurrency()},
                             {"context_tokens", d.capacities().context_ceiling_tokens()},
                             {"prefill_chunk_tokens", d.capacities().prefill_chunk_tokens()}});
    }
  }
  const auto& s = entry.storage;
  return {{"model", entry.ref.model_key},
          {"version", entry.ref.version},
          {"path", entry.path.string()},
          {"selected", entry.selected},
          {"in_use", entry.leased},
          {"verified", false},
          {"metadata_error", entry.metadata_error.empty() ? nlohmann::json(nullptr) : nlohmann::json(entry.metadata_error)},
          {"deployments", deployments},
          {"logical_bytes", s.logical_bytes},
          {"disk_logical_bytes", s.disk_logical_bytes},
          {"disk_physical_bytes", s.disk_physical_bytes},
          {"shared_logical_bytes", s.shared_logical_bytes},
          {"shared_physical_bytes", s.shared_physical_bytes},
          {"reclaimable_bytes", optional_bytes(s.reclaimable_bytes)},
          {"reclaimable_note", s.reclaimable_note.empty() ? nlohmann::json(nullptr) : nlohmann::json(s.reclaimable_note)}};
}

void print_entry_text(const TerminalInfo& term, const package::EntryInfo& entry) {
  std::string marks;
  if (entry.selected) marks += " " + paint(term, style::green, "(default)");
  if (entry.leased) marks += " " + paint(term, style::cyan, "(in use)");
  std::printf("  %s%s\n", entry.ref.version.c_str(), marks.c_str());
  if (entry.manifest) {
    for (const auto& d : entry.manifest->deployments()) {
      std::printf("    TP%d  concurrency %s  context %s tokens  prefill chunk %s\n", d.tensor_parallel(),
                  format_count(d.capacities().max_concurrency()).c_str(),
                  format_count(d.capacities().context_ceiling_tokens()).c_str(),
                  format_count(d.capacities().prefill_chunk_tokens()).c_str());
    }
  } else {
    std::printf("    metadata unreadable: %s\n", entry.metadata_error.c_str());
  }
  const auto& s = entry.storage;
  std::string reclaimable = s.reclaimable_bytes ? format_bytes(*s.reclaimable_bytes) : "—  (" + s.reclaimable_note + ")";
  std::printf("    %s %s   %s %s   %s %s   %s %s\n    %s %s\n", paint(term, style::muted, "logical").c_str(),
              format_bytes(s.logical_bytes).c_str(), paint(term, style::muted, "on disk").c_str(),
              format_bytes(s.disk_logical_bytes).c_str(), paint(term, style::muted, "allocated").c_str(),
              format_bytes(s.disk_physical_bytes).c_str(), paint(term, style::muted, "shared").c_str(),
              format_bytes(s.shared_physical_bytes).c_str(), paint(term, style::muted, "reclaimable").c_str(),
              reclaimable.c_str());
}

}  // namespace

int run_models_list(const PackageCommandGlobals& globals, const std::string& model, bool json) {
  auto cache = open_cache(globals);
  auto entries = cache.list(model);
  if (!model.empty() && entries.empty()) fail_usage("model '{}' is not in the model cache at {}", model, cache.root().string());
  if (json) {
    nlohmann::json out = {{"cache", cache.root().string()}, {"metadata_verified", false}, {"entries", nlohmann::json::array()}};
    for (const auto& entry : entries) out["entries"].push_back(entry_json(entry));
    std::printf("%s\n", out.dump(2).c_str());
    return 0;
  }
  auto term = detect_terminal(stdout, globals.plain);
  if (entries.empty()) {
    std::printf("No models in %s\n", cache.root().string().c_str());
    return 0;
  }
  std::printf("%s\n", paint(term, style::muted, "Model cache " + cache.root().string() + " (metadata unverified)").c_str());
  std::string current;
  for (const auto& entry : entries) {
    if (entry.ref.model_key != current) {
      current = entry.ref.model_key;
      std::printf("%s\n", paint(term, style::cyan, current).c_str());
    }
    print_entry_text(term, entry);
  }
  return 0;
}

int run_models_select(const PackageCommandGlobals& globals, const std::string& entry) {
  auto cache = open_cache(globals);
  auto ref = package::parse_entry_ref(entry, true);
  cache.select(ref);
  std::printf("Selected %s as the default for %s.\n", ref.text().c_str(), ref.model_key.c_str());
  return 0;
}

int run_models_remove(const PackageCommandGlobals& globals, const std::string& entry, bool clear_default) {
  auto cache = open_cache(globals);
  auto ref = package::parse_entry_ref(entry, true);
  cache.remove(ref, clear_default);
  std::printf("Removed %s. Run `flare models gc` to reclaim payload objects nothing else uses.\n", ref.text().c_str());
  return 0;
}

int run_models_gc(const PackageCommandGlobals& globals, bool json) {
  auto cache = open_cache(globals);
  auto report = cache.gc();
  if (json) {
    nlohmann::json out = {{"staging_removed", report.n_staging_removed},
                          {"staging_in_use", report.n_staging_in_use},
                          {"objects_removed", report.n_blobs_removed},
                          {"reclaimed_bytes", report.reclaimed_bytes}};
    std::printf("%s\n", out.dump(2).c_str());
    return 0;
  }
  std::printf("Removed %s abandoned staging trees and %s unreferenced payload objects; reclaimed %s.\n",
              format_count(report.n_staging_removed).c_str(), format_count(report.n_blobs_removed).c_str(),
              format_bytes(report.reclaimed_bytes).c_str());
  if (report.n_staging_in_use > 0) {
    std::printf("Kept %s staging trees still being written.\n", format_count(report.n_staging_in_use).c_str());
  }
  return 0;
}

int run_trust_revoke(const PackageCommandGlobals& globals, const std::string& fingerprint,
                     const std::optional<std::filesystem::path>& trust_store) {
  auto store = package::TrustStore::load(trust_store.value_or(package::TrustStore::default_path()));
  std::size_t n = store.revoke(fingerprint);
  if (n == 0) fail_usage("key {} is not in the trust store {}", fingerprint, store.path().string());
  store.save();
  std::printf("Revoked key %s (%zu acceptance%s).\n", fingerprint.c_str(), n, n == 1 ? "" : "s");
  return 0;
}

// The cache location and styling flags are accepted after the command too.
static void add_cache_flags(CLI::App* cmd, PackageCommandGlobals& globals) {
  cmd->add_option("--model-cache", globals.model_cache, "Model cache directory (default [paths] package_cache)");
  cmd->add_option("--config", globals.config, "Configuration file");
  cmd->add_flag("--plain", globals.plain, "No styling");
}

void add_package_commands(CLI::App& app, PackageCommandGlobals& globals) {
  auto* models = app.add_subcommand("models", "Manage the local model cache.");
  models->require_subcommand(1);
  {
    auto model = std::make_shared<std::string>();
    auto json = std::make_shared<bool>(false);
    auto* cmd = add_command(*models, "list", "List cached models, versions and storage.",
                            [&globals, model, json] { return run_models_list(globals, *model, *json); });
    cmd->add_option("MODEL", *model, "Only this model");
    cmd->add_flag("--json", *json, "Structured output with exact byte counts");
    add_cache_flags(cmd, globals);
  }
  {
    auto entry = std::make_shared<std::string>();
    auto* cmd = add_command(*models, "select", "Select a cached version as the model's default.",
                            [&globals, entry] { return run_models_select(globals, *entry); });
    cmd->add_option("MODEL@VERSION", *entry)->required();
    add_cache_flags(cmd, globals);
  }
  {
    auto entry = std::make_shared<std::string>();
    auto clear = std::make_shared<bool>(false);
    auto* cmd = add_command(*models, "remove", "Remove a cached version.",
                            [&globals, entry, clear] { return run_models_remove(globals, *entry, *clear); });
    cmd->add_option("MODEL@VERSION", *entry)->required();
    cmd->add_flag("--clear-default", *clear, "Also clear the default when removing the selected version");
    add_cache_flags(cmd, globals);
  }
  {
    auto json = std::make_shared<bool>(false);
    auto* cmd = add_command(*models, "gc", "Reclaim abandoned staging and unreferenced payload objects.",
                            [&globals, json] { return run_models_gc(globals, *json); });
    cmd->add_flag("--json", *json, "Structured output");
    add_cache_flags(cmd, globals);
  }
  add_inspect_command(*models, globals);
  add_inspect_command(app, globals);
  auto* trust = app.add_subcommand("trust", "Manage accepted publisher keys.");
  trust->require_subcommand(1);
  {
    auto fingerprint = std::make_shared<std::string>();
    auto store = std::make_shared<std::optional<std::filesystem::path>>();
    auto* cmd = add_command(*trust, "revoke", "Forget an accepted signing key.",
                            [&globals, fingerprint, store] { return run_trust_revoke(globals, *fingerprint, *store); });
    cmd->add_option("FINGERPRINT", *fingerprint)->required();
    cmd->add_option("--trust-store", *store, "Trust store file (default ~/.config/flare/trust.toml)");
  }
}

}  // namespace flare::cli
