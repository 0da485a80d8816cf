// Model resolution (spec cli-design section 8): MODEL is an existing checkpoint directory, a
// Hugging Face repository id with an optional @revision (a complete snapshot in the hub cache, or
// downloaded into it when `hub` allows: checkpoint_download.h), or a recipe alias (whose hub
// checkpoint is pinned to a commit). Every result names the recipe that prepares it.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "common/config.h"
#include "ignition/checkpoint_download.h"
#include "model/recipes/recipe.h"

namespace flare::ignition {

struct ResolvedModel {
  const model::Recipe* recipe = nullptr;
  std::filesystem::path checkpoint_dir;
  std::string repository;  // empty for local directories and bundled checkpoints
  std::string revision;    // resolved commit, or "local"
  std::string architecture;
  bool qualified = false;  // the recipe's declared checkpoint at its pinned revision
  std::vector<std::string> served_names;  // canonical name first, then alias and repository id
  std::string description;                // one line for the export log
};

// `assets_dir` holds bundled checkpoints (the demo model). Without `hub`, nothing is downloaded.
ResolvedModel resolve_model(const std::string& selector, const Config& config,
                            const std::filesystem::path& assets_dir, const HubOptions& hub = {});

// The architecture named by a checkpoint's config.json (its first `architectures` entry).
std::string read_architecture(const std::filesystem::path& checkpoint_dir);

// A complete snapshot directory of `repository` at `revision` (a commit, or a ref such as "main")
// in the hub cache layout, or an empty path. Exact-case repository directories win; a complete
// case-variant snapshot is used when the exact-case one is absent or incomplete.
std::filesystem::path find_hub_snapshot(const std::filesystem::path& hub_cache, const std::string& repository,
                                        const std::string& revision, std::string* resolved_commit);

// A snapshot is complete when config.json and every weight file it declares are present.
bool snapshot_complete(const std::filesystem::path& snapshot);

}  // namespace flare::ignition
