// Which package `flare run` and friends load: an existing path (also any absolute path, a path
// starting with ./ or ../, or a .safetensors path) is a package; anything else names a model in the
// model cache, MODEL or MODEL@VERSION, where MODEL is a cache key or one of the served names or
// aliases its selected default declares. Cache entries stay leased while selected.
#pragma once

#include <filesystem>
#include <optional>
#include <string>

#include "package/cache.h"

namespace flare::cli {

struct SelectedPackage {
  std::filesystem::path path;
  std::optional<package::EntryRef> entry;  // set for cache entries
  std::optional<package::FileLock> lease;  // held while the package is in use
};

SelectedPackage select_package(const std::string& target, const package::ModelCache& cache);

}  // namespace flare::cli
