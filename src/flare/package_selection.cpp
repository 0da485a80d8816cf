#include "flare/package_selection.h"

#include <algorithm>

#include "common/error.h"
#include "common/suggest.h"

namespace flare::cli {
namespace {

namespace fs = std::filesystem;

bool looks_like_path(const std::string& target) {
  return !target.empty() && (target[0] == '/' || target.rfind("./", 0) == 0 || target.rfind("../", 0) == 0 ||
                             (target.size() > 12 && target.substr(target.size() - 12) == ".safetensors"));
}

// The cache key whose selected default declares `name` among its served names or aliases.
std::optional<std::string> key_for_name(const package::ModelCache& cache, const std::string& name) {
  for (const auto& info : cache.list("")) {
    if (!info.selected || !info.manifest) continue;
    const auto& model = info.manifest->model();
    auto matches = [&](const auto& names) {
      return std::any_of(names.begin(), names.end(), [&](const std::string& n) { return ascii_lower(n) == ascii_lower(name); });
    };
    if (ascii_lower(model.canonical_name()) == ascii_lower(name) || matches(model.served_names()) || matches(model.aliases()))
      return info.ref.model_key;
  }
  return std::nullopt;
}

}  // namespace

SelectedPackage select_package(const std::string& target, const package::ModelCache& cache) {
  if (target.empty()) fail_usage("no package given: name a package path or a model in the cache (flare models list)");
  SelectedPackage selected;
  std::error_code ec;
  if (fs::exists(target, ec) || looks_like_path(target)) {
    if (!fs::exists(target, ec)) fail_usage("package {} does not exist", target);
    selected.path = fs::absolute(target);
    return selected;
  }
  const auto at = target.find('@');
  std::string model = target.substr(0, at);
  const std::string version = at == std::string::npos ? "" : target.substr(at + 1);
  const auto keys = cache.model_keys();
  if (std::find(keys.begin(), keys.end(), model) == keys.end()) {
    if (auto key = key_for_name(cache, model)) {
      model = *key;
    } else {
      std::string message = fmt::format("'{}' is neither a package path nor a model in the cache {}", model,
                                        cache.root().string());
      if (auto close = suggest_close_match(model, keys)) message += fmt::format(" (did you mean '{}'?)", *close);
      if (!keys.empty()) message += fmt::format("\nCached models: {}.", fmt::join(keys, ", "));
      message += "\nPrepare one with `ignition export MODEL`.";
      throw Error(ExitCode::usage, message);
    }
  }
  selected.entry = cache.resolve(version.empty() ? model : model + "@" + version);
  selected.lease = cache.lease(*selected.entry);
  selected.path = cache.entry_path(*selected.entry);
  return selected;
}

}  // namespace flare::cli
