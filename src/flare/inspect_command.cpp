// `flare inspect` / `flare models inspect` (spec cli-design section 5.3): resolves a package path
// or a cached MODEL[@VERSION] (leased while inspecting), verifies the signature with embedded,
// --publisher-keys, development or remembered keys and checks the companions' layout (no payload
// bytes are read, no acceptance is asked), then prints the selected sections (inspect_text.cpp,
// inspect_json.cpp). --unverified reads only the primary's metadata.
#include <algorithm>
#include <cstdio>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "common/cli.h"
#include "common/config.h"
#include "common/error.h"
#include "flare/inspect_view.h"
#include "flare/package_commands.h"
#include "flare/package_selection.h"
#include "package/cache.h"
#include "package/trust.h"

namespace flare::cli {
namespace {
namespace fs = std::filesystem;

// Existing paths win over model selectors; absolute, ./ and ../ targets are always paths.
bool looks_like_path(const std::string& target) {
  std::error_code ec;
  return fs::exists(target, ec) || target.starts_with("/") || target.starts_with("./") || target.starts_with("../");
}

}  // namespace

void validate_selection(const package::Package& package, const InspectView& view) {
  std::vector<int> sizes;
  for (const auto& d : package.manifest().deployments()) sizes.push_back(d.tensor_parallel());
  if (!view.tensor_parallel) {
    if (sizes.size() > 1) {
      fail_usage("the package holds several deployments (TP {}); choose one with --tensor-parallel", fmt::join(sizes, ", "));
    }
  } else {
    auto n = std::count(sizes.begin(), sizes.end(), *view.tensor_parallel);
    if (n == 0) fail_usage("the package has no TP{} deployment; available: {}", *view.tensor_parallel, fmt::join(sizes, ", "));
    if (n > 1) fail_input("the package declares TP{} more than once", *view.tensor_parallel);
  }
  if (!view.rank) return;
  for (const auto* d : selected_deployments(package, view)) {
    std::vector<int> ranks;
    for (const auto& r : d->ranks()) ranks.push_back(r.rank());
    if (std::find(ranks.begin(), ranks.end(), *view.rank) == ranks.end()) {
      fail_usage("the TP{} deployment has no rank {}; available ranks: {}", d->tensor_parallel(), *view.rank,
                 fmt::join(ranks, ", "));
    }
  }
}

std::vector<const proto::Deployment*> selected_deployments(const package::Package& package, const InspectView& view) {
  std::vector<const proto::Deployment*> out;
  for (const auto& d : package.manifest().deployments()) {
    if (!view.tensor_parallel || d.tensor_parallel() == *view.tensor_parallel) out.push_back(&d);
  }
  return out;
}

bool rank_selected(const proto::Rank& rank, const InspectView& view) { return !view.rank || rank.rank() == *view.rank; }

bool payload_selected(const proto::Payload& payload, const InspectView& view) {
  if (payload.tensor_parallel() != 0 && view.tensor_parallel && payload.tensor_parallel() != *view.tensor_parallel) {
    return false;
  }
  return payload.rank() < 0 || !view.rank || payload.rank() == *view.rank;
}

int run_inspect(const PackageCommandGlobals& globals, const InspectOptions& options) {
  if (options.unverified && (!options.publisher_keys.empty() || options.trust_store)) {
    fail_usage("--unverified cannot be combined with --publisher-keys or --trust-store");
  }
  if (options.rank && *options.rank < 0) fail_usage("--rank must be 0 or more");
  if (options.tensor_parallel && *options.tensor_parallel < 1) fail_usage("--tensor-parallel must be 1 or more");
  fs::path path = options.target;
  std::optional<SelectedPackage> selected;  // holds the cache lease while inspecting
  if (!looks_like_path(options.target)) {
    const fs::path root = globals.model_cache ? *globals.model_cache : load_config(globals.config).package_cache();
    package::ModelCache cache(root);
    selected = select_package(options.target, cache);
    path = selected->path;
  }
  auto package = package::Package::open(path);
  InspectView view;
  view.tensor_parallel = options.tensor_parallel;
  view.rank = options.rank;
  view.memory_map = options.memory_map;
  view.graphs = options.graphs;
  view.frontend = options.frontend;
  view.all = options.all;
  validate_selection(*package, view);
  view.verification = "UNVERIFIED: signature, publisher and companion files not checked";
  if (!options.unverified) {
    package::TrustOptions trust;
    trust.publisher_keys = options.publisher_keys;
    trust.trust_store = options.trust_store;
    trust.development_profile = package::home_directory_profile();
    auto signer = package::resolve_signer(*package, trust);
    package->check_layout();
    view.verified = true;
    view.verification = fmt::format("signature verified (key from {}); {}", signer.key_source,
                                    signer.remembered ? "publisher accepted" : "publisher not yet accepted");
  }
  if (options.json) {
    std::printf("%s\n", render_inspect_json(*package, view).c_str());
    return 0;
  }
  print_inspect_text(*package, view, detect_terminal(stdout, globals.plain || options.plain));
  return 0;
}

void add_inspect_command(CLI::App& parent, PackageCommandGlobals& globals) {
  auto options = std::make_shared<InspectOptions>();
  auto* cmd = add_command(parent, "inspect", "Show what a package holds and verify its signature.",
                          [&globals, options] { return run_inspect(globals, *options); });
  cmd->add_option("PACKAGE|MODEL[@VERSION]", options->target)->required();
  cmd->add_flag("--json", options->json, "JSON output");
  cmd->add_flag("--plain", options->plain, "No styling");
  cmd->add_flag("--unverified", options->unverified, "Read only primary metadata; verify nothing");
  cmd->add_flag("--memory-map", options->memory_map, "Memory figures, stored payload locations, prepared tensors");
  cmd->add_flag("--graphs", options->graphs, "Captured graph capacities");
  cmd->add_flag("--frontend", options->frontend, "Tokenizer and frontend assets");
  cmd->add_flag("--all", options->all, "All detail sections");
  cmd->add_option("--tensor-parallel", options->tensor_parallel, "Select a deployment by TP size");
  cmd->add_option("--rank", options->rank, "Select one rank of the deployment");
  cmd->add_option("--publisher-keys", options->publisher_keys, "Publisher profile(s) with verification keys");
  cmd->add_option("--trust-store", options->trust_store, "Trust store file");
  cmd->add_option("--model-cache", globals.model_cache, "Model cache directory");
  cmd->add_option("--config", globals.config, "Configuration file");
}

}  // namespace flare::cli
