#include "ignition/resolve.h"

#include <algorithm>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "common/error.h"
#include "common/suggest.h"

namespace flare::ignition {
namespace {

namespace fs = std::filesystem;

std::string read_small_file(const fs::path& path, std::size_t max_bytes) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return "";
  std::string text(max_bytes + 1, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<std::size_t>(in.gcount()));
  if (text.size() > max_bytes) return "";
  return text;
}

bool is_commit(const std::string& revision) {
  return revision.size() == 40 && std::all_of(revision.begin(), revision.end(), [](char c) {
           return std::isxdigit(static_cast<unsigned char>(c)) && !std::isupper(static_cast<unsigned char>(c));
         });
}

bool valid_repository_id(const std::string& repository) {
  const auto slash = repository.find('/');
  if (slash == std::string::npos || slash == 0 || slash + 1 == repository.size()) return false;
  if (repository.find('/', slash + 1) != std::string::npos) return false;
  return std::all_of(repository.begin(), repository.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.' || c == '/';
  }) && repository.find("..") == std::string::npos;
}

// ORG/NAME -> ORG--NAME: a model-cache key (no '/') that still names the repository.
std::string repository_model_key(const std::string& repository) {
  std::string key;
  for (char c : repository) key += c == '/' ? std::string("--") : std::string(1, c);
  return key;
}

std::string cache_dir_name(const std::string& repository) {
  std::string name = "models--" + repository;
  std::string out;
  for (std::size_t i = 0; i < name.size(); ++i) out += name[i] == '/' ? std::string("--") : std::string(1, name[i]);
  return out;
}

fs::path snapshot_in(const fs::path& repo_dir, const std::string& revision, std::string* commit) {
  std::string resolved = revision;
  if (!is_commit(revision)) {
    if (revision.find('/') != std::string::npos || revision.find("..") != std::string::npos) return {};
    std::string ref = read_small_file(repo_dir / "refs" / revision, 256);
    while (!ref.empty() && std::isspace(static_cast<unsigned char>(ref.back()))) ref.pop_back();
    if (!is_commit(ref)) return {};
    resolved = ref;
  }
  const fs::path snapshot = repo_dir / "snapshots" / resolved;
  std::error_code ec;
  if (!fs::is_directory(snapshot, ec) || !snapshot_complete(snapshot)) return {};
  if (commit) *commit = resolved;
  return snapshot;
}

}  // namespace

std::string read_architecture(const fs::path& checkpoint_dir) {
  const fs::path config_path = checkpoint_dir / "config.json";
  std::error_code ec;
  if (!fs::is_regular_file(config_path, ec))
    fail(ExitCode::preparation, "{} is not a checkpoint directory: config.json is missing", checkpoint_dir.string());
  const std::string text = read_small_file(config_path, 4 << 20);
  nlohmann::json config = nlohmann::json::parse(text, nullptr, false);
  if (config.is_discarded() || !config.is_object())
    fail(ExitCode::preparation, "{}: config.json is not a JSON object", checkpoint_dir.string());
  const auto it = config.find("architectures");
  if (it == config.end() || !it->is_array() || it->empty() || !(*it)[0].is_string())
    fail(ExitCode::preparation, "{}: config.json field 'architectures' must list the model class",
         checkpoint_dir.string());
  return (*it)[0].get<std::string>();
}

bool snapshot_complete(const fs::path& snapshot) {
  std::error_code ec;
  if (!fs::is_regular_file(snapshot / "config.json", ec)) return false;
  const fs::path index_path = snapshot / "model.safetensors.index.json";
  if (fs::is_regular_file(index_path, ec)) {
    const nlohmann::json index = nlohmann::json::parse(read_small_file(index_path, 64 << 20), nullptr, false);
    if (index.is_discarded() || !index.contains("weight_map") || !index["weight_map"].is_object()) return false;
    for (const auto& [tensor, file] : index["weight_map"].items()) {
      if (!file.is_string()) return false;
      const std::string name = file.get<std::string>();
      if (name.find('/') != std::string::npos || !fs::is_regular_file(snapshot / name, ec)) return false;
    }
    return true;
  }
  return fs::is_regular_file(snapshot / "model.safetensors", ec);
}

fs::path find_hub_snapshot(const fs::path& hub_cache, const std::string& repository, const std::string& revision,
                           std::string* resolved_commit) {
  const std::string exact = cache_dir_name(repository);
  std::error_code ec;
  if (fs::path found = snapshot_in(hub_cache / exact, revision, resolved_commit); !found.empty()) return found;
  if (!fs::is_directory(hub_cache, ec)) return {};
  std::vector<fs::path> variants;
  for (const auto& entry : fs::directory_iterator(hub_cache, ec)) {
    const std::string name = entry.path().filename().string();
    if (name != exact && ascii_lower(name) == ascii_lower(exact)) variants.push_back(entry.path());
  }
  std::sort(variants.begin(), variants.end());
  for (const auto& variant : variants)
    if (fs::path found = snapshot_in(variant, revision, resolved_commit); !found.empty()) return found;
  return {};
}

ResolvedModel resolve_model(const std::string& selector, const Config& config, const fs::path& assets_dir,
                            const HubOptions& hub) {
  if (selector.empty()) fail_usage("no model given and [defaults] model is not set in {}", config.path.string());
  ResolvedModel resolved;
  std::error_code ec;

  // 1. An existing directory is a checkpoint directory.
  if (fs::is_directory(selector, ec)) {
    resolved.checkpoint_dir = fs::absolute(selector);
    resolved.architecture = read_architecture(resolved.checkpoint_dir);
    resolved.recipe = model::find_recipe_by_architecture(resolved.architecture);
    if (!resolved.recipe)
      fail_usage("{}: architecture {} is not supported; supported aliases: {}", selector, resolved.architecture,
                 fmt::join(model::all_recipe_aliases(), ", "));
    resolved.revision = "local";
    resolved.description = fmt::format("{} (local directory, recipe {})", resolved.checkpoint_dir.string(),
                                       resolved.recipe->name);
  } else if (selector.find('/') != std::string::npos) {
    // 2. A Hugging Face repository id, optionally @revision.
    const auto at = selector.find('@');
    const std::string repository = selector.substr(0, at);
    std::string revision = at == std::string::npos ? "" : selector.substr(at + 1);
    if (!valid_repository_id(repository) || (at != std::string::npos && revision.empty()))
      fail_usage("'{}' is neither a directory nor a repository id (org/name[@revision])", selector);
    const model::Recipe* declared = model::find_recipe_by_repository(repository);
    if (revision.empty()) revision = declared ? declared->checkpoint.revision : "main";
    if (!is_commit(revision) && (revision.find("..") != std::string::npos || revision.size() > 256))
      fail_usage("'{}': '{}' is not a valid revision", selector, revision);
    std::string commit;
    const fs::path snapshot = obtain_hub_checkpoint(repository, revision, config, hub, &commit);
    resolved.checkpoint_dir = snapshot;
    resolved.repository = repository;
    resolved.revision = commit;
    resolved.architecture = read_architecture(snapshot);
    resolved.recipe = declared ? declared : model::find_recipe_by_architecture(resolved.architecture);
    if (!resolved.recipe)
      fail_usage("{}: architecture {} is not supported; supported aliases: {}", repository, resolved.architecture,
                 fmt::join(model::all_recipe_aliases(), ", "));
    resolved.qualified = declared && commit == declared->checkpoint.revision;
    resolved.description = fmt::format("{}@{} (recipe {})", repository, commit, resolved.recipe->name);
  } else {
    // 3. An alias.
    const model::Recipe* recipe = model::find_recipe_by_alias(selector);
    if (!recipe) model::fail_unknown_alias(selector);
    resolved.recipe = recipe;
    if (recipe->checkpoint.kind == model::CheckpointSource::Kind::bundled) {
      resolved.checkpoint_dir = assets_dir / recipe->checkpoint.bundled_directory;
      if (!fs::is_directory(resolved.checkpoint_dir, ec))
        fail(ExitCode::fetch, "the bundled checkpoint of '{}' is missing at {}; run scripts/setup", selector,
             resolved.checkpoint_dir.string());
      resolved.revision = "local";
      resolved.description = fmt::format("{} (bundled, {})", recipe->canonical_name, resolved.checkpoint_dir.string());
    } else {
      std::string commit;
      const fs::path snapshot =
          obtain_hub_checkpoint(recipe->checkpoint.repository, recipe->checkpoint.revision, config, hub, &commit);
      resolved.checkpoint_dir = snapshot;
      resolved.repository = recipe->checkpoint.repository;
      resolved.revision = commit;
      resolved.description = fmt::format("{}@{} (recipe {})", resolved.repository, commit, recipe->name);
    }
    resolved.architecture = read_architecture(resolved.checkpoint_dir);
    resolved.qualified = true;
  }
  if (std::find(resolved.recipe->architectures.begin(), resolved.recipe->architectures.end(), resolved.architecture) ==
      resolved.recipe->architectures.end())
    fail_usage("{}: recipe {} prepares {}, but the checkpoint is {}", selector, resolved.recipe->name,
               fmt::join(resolved.recipe->architectures, ", "), resolved.architecture);

  // A checkpoint other than the recipe's qualified one is named after itself (a repository as
  // ORG--NAME, which can key the model cache; ORG/NAME stays a served name); the recipe's aliases
  // remain served names.
  if (resolved.qualified) resolved.served_names.push_back(resolved.recipe->canonical_name);
  else if (!resolved.repository.empty()) resolved.served_names.push_back(repository_model_key(resolved.repository));
  else resolved.served_names.push_back(resolved.checkpoint_dir.filename().string());
  for (const auto& alias : resolved.recipe->aliases)
    if (std::find(resolved.served_names.begin(), resolved.served_names.end(), alias) == resolved.served_names.end())
      resolved.served_names.push_back(alias);
  if (!resolved.repository.empty() &&
      std::find(resolved.served_names.begin(), resolved.served_names.end(), resolved.repository) ==
          resolved.served_names.end())
    resolved.served_names.push_back(resolved.repository);
  return resolved;
}

}  // namespace flare::ignition
