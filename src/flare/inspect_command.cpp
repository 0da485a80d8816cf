// `flare inspect` / `flare models inspect` (spec cli-design section 5.3): resolves a package path
// or a cached MODEL[@VERSION] (leased while inspecting), verifies the signature and the layout
// (no payload bytes are read), and prints the summary boxes or JSON.
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
namespace fs = std::filesystem;

bool looks_like_path(const std::string& target) {
  std::error_code ec;
  return fs::exists(target, ec) || target.starts_with("/") || target.starts_with("./") || target.starts_with("../");
}

nlohmann::json summary_json(const package::Package& package, const std::string& verification,
                            const std::optional<int>& tensor_parallel) {
  const auto& m = package.manifest();
  nlohmann::json served = m.model().served_names();
  nlohmann::json deployments = nlohmann::json::array();
  for (const auto& d : m.deployments()) {
    if (tensor_parallel && d.tensor_parallel() != *tensor_parallel) continue;
    nlohmann::json ranks = nlohmann::json::array();
    for (const auto& r : d.ranks()) ranks.push_back({{"rank", r.rank()}, {"fixed_bytes", r.fixed_bytes()}, {"graphs", r.n_graphs()}});
    deployments.push_back({{"tensor_parallel", d.tensor_parallel()},
                           {"rank_count", d.ranks_size()},
                           {"ranks", ranks},
                           {"max_concurrency", d.capacities().max_concurrency()},
                           {"context_tokens", d.capacities().context_ceiling_tokens()},
                           {"prefill_chunk_tokens", d.capacities().prefill_chunk_tokens()},
                           {"speculative_draft_tokens", d.capacities().speculative_draft_tokens()}});
  }
  return {{"verification", verification},
          {"format_version", m.format_version()},
          {"model", {{"id", m.model().canonical_name()}, {"served_names", served},
                     {"architecture", m.model().architecture()}, {"recipe", m.model().recipe()},
                     {"checkpoint", m.model().checkpoint_repository()}, {"revision", m.model().checkpoint_revision()}}},
          {"version", m.version()},
          {"publisher", {{"namespace", m.publisher_namespace()}, {"official_source", m.official_source()},
                         {"license", m.license()}, {"key_fingerprint", package.signature().key_fingerprint}}},
          {"target", m.target()},
          {"selected_tensor_parallel", tensor_parallel ? nlohmann::json(*tensor_parallel) : nlohmann::json(nullptr)},
          {"deployments", deployments},
          {"payload_bytes", package.distinct_payload_bytes()},
          {"payload_count", package.distinct_payloads().size()}};
}

void print_summary_text(const package::Package& package, const std::string& verification,
                        const TerminalInfo& term, const std::optional<int>& tensor_parallel, bool memory_map) {
  const auto& m = package.manifest();
  int width = content_width(term);
  std::string name = m.model().served_names_size() > 0 ? m.model().served_names(0) : m.model().canonical_name();
  std::vector<std::pair<std::string, std::string>> model = {
      {"name", name},
      {"model id", m.model().canonical_name()},
      {"architecture", m.model().architecture()},
      {"version", m.version()},
      {"target", m.target()},
      {"verification", verification}};
  std::fputs(render_box(term, "Model", render_fields(term, model, width - 4), width).c_str(), stdout);
  std::vector<std::pair<std::string, std::string>> publisher = {
      {"namespace", m.publisher_namespace()},
      {"source", m.official_source()},
      {"license", m.license().empty() ? "(none declared)" : m.license()},
      {"key", package.signature().key_fingerprint}};
  std::fputs(render_box(term, "Publisher", render_fields(term, publisher, width - 4), width).c_str(), stdout);
  std::vector<std::vector<std::string>> rows;
  for (const auto& d : m.deployments()) {
    if (tensor_parallel && d.tensor_parallel() != *tensor_parallel) continue;
    for (const auto& r : d.ranks()) {
      rows.push_back({fmt::format("TP{}", d.tensor_parallel()), std::to_string(r.rank()),
                      format_count(d.capacities().max_concurrency()), format_count(d.capacities().context_ceiling_tokens()),
                      format_bytes(r.fixed_bytes()), format_count(r.n_graphs())});
    }
  }
  auto table = render_table(term, {"deployment", "rank", "concurrency", "context", "fixed memory", "graphs"}, rows, width - 4);
  std::fputs(render_box(term, "Execution", table, width).c_str(), stdout);
  if (memory_map) {
    std::vector<std::vector<std::string>> payload_rows;
    for (const auto* p : package.distinct_payloads()) {
      auto location = package.locations().at(p->id());
      payload_rows.push_back({p->name(), package::role_name(p->role()), format_count(p->length_bytes()),
                              location.file.empty() ? "(primary)" : location.file, format_count(location.offset_bytes)});
    }
    auto payloads = render_table(term, {"payload", "role", "bytes", "file", "offset"}, payload_rows, width - 4);
    std::fputs(render_box(term, "Stored payloads", payloads, width).c_str(), stdout);
  }
}

void check_tensor_parallel(const package::Package& package, const std::optional<int>& tp) {
  std::vector<int> sizes;
  for (const auto& d : package.manifest().deployments()) sizes.push_back(d.tensor_parallel());
  if (!tp) {
    if (sizes.size() > 1) fail_usage("the package holds several deployments (TP {}); choose one with --tensor-parallel", fmt::join(sizes, ", "));
    return;
  }
  auto n = std::count(sizes.begin(), sizes.end(), *tp);
  if (n == 0) fail_usage("the package has no TP{} deployment; available: {}", *tp, fmt::join(sizes, ", "));
  if (n > 1) fail_input("the package declares TP{} more than once", *tp);
}

}  // namespace

int run_inspect(const PackageCommandGlobals& globals, const InspectOptions& options) {
  if (options.unverified && (!options.publisher_keys.empty() || options.trust_store)) {
    fail_usage("--unverified cannot be combined with --publisher-keys or --trust-store");
  }
  Config config = load_config(globals.config);
  fs::path path = options.target;
  std::optional<package::FileLock> lease;
  if (!looks_like_path(options.target)) {
    package::ModelCache cache(globals.model_cache.value_or(config.package_cache()));
    auto ref = cache.resolve(options.target);
    lease = cache.lease(ref);
    path = cache.entry_path(ref);
  }
  auto package = package::Package::open(path);
  check_tensor_parallel(*package, options.tensor_parallel);
  std::string verification = "UNVERIFIED (signature and payload layout not checked)";
  if (!options.unverified) {
    package::TrustOptions trust;
    trust.publisher_keys = options.publisher_keys;
    trust.trust_store = options.trust_store;
    trust.development_profile = package::home_directory_profile();
    auto signer = package::resolve_signer(*package, trust);
    package->check_layout();
    verification = fmt::format("signature verified (key from {}){}", signer.key_source,
                               signer.remembered ? ", publisher accepted" : ", publisher not yet accepted");
  }
  if (options.json) {
    auto out = summary_json(*package, options.unverified ? "unverified" : "verified", options.tensor_parallel);
    out["verified"] = !options.unverified;
    if (options.memory_map || options.all) {
      nlohmann::json payloads = nlohmann::json::array();
      for (const auto* p : package->distinct_payloads()) {
        auto location = package->locations().at(p->id());
        payloads.push_back({{"id", p->id()}, {"name", p->name()}, {"role", package::role_name(p->role())},
                            {"length_bytes", p->length_bytes()}, {"file", location.file},
                            {"offset_bytes", location.offset_bytes}});
      }
      out["payloads"] = payloads;
    }
    std::printf("%s\n", out.dump(2).c_str());
    return 0;
  }
  auto term = detect_terminal(stdout, globals.plain);
  print_summary_text(*package, verification, term, options.tensor_parallel, options.memory_map || options.all);
  return 0;
}

void add_inspect_command(CLI::App& parent, PackageCommandGlobals& globals) {
  auto options = std::make_shared<InspectOptions>();
  auto* cmd = add_command(parent, "inspect", "Show what a package holds and verify its signature.",
                          [&globals, options] { return run_inspect(globals, *options); });
  cmd->add_option("PACKAGE|MODEL[@VERSION]", options->target)->required();
  cmd->add_flag("--json", options->json, "JSON output");
  cmd->add_flag("--unverified", options->unverified, "Read only primary metadata; verify nothing");
  cmd->add_flag("--memory-map", options->memory_map, "Stored payload locations");
  cmd->add_flag("--graphs", options->graphs, "Captured graph capacities");
  cmd->add_flag("--frontend", options->frontend, "Tokenizer and frontend assets");
  cmd->add_flag("--all", options->all, "All detail sections");
  cmd->add_option("--tensor-parallel", options->tensor_parallel, "Select a deployment by TP size");
  cmd->add_option("--rank", options->rank, "Select one rank");
  cmd->add_option("--publisher-keys", options->publisher_keys, "Publisher profile(s) with verification keys");
  cmd->add_option("--trust-store", options->trust_store, "Trust store file");
}

}  // namespace flare::cli
