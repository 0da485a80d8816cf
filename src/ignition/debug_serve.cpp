// Prepare-and-serve for diagnosis (debug_serve.h).
#include "ignition/debug_serve.h"

#include <filesystem>

#include "common/config.h"
#include "common/error.h"
#include "flare/run_command.h"
#include "package/cache.h"
#include "ignition/signing_identity.h"

namespace flare::ignition {
namespace {

namespace fs = std::filesystem;

// Removes a staging tree and its lock file when serving ends, however it ends (the lock is still
// held: the Staging object outlives this).
class RemoveTree {
 public:
  explicit RemoveTree(fs::path tree) : tree_(std::move(tree)) {}
  ~RemoveTree() {
    std::error_code ignored;
    fs::remove_all(tree_, ignored);
    fs::path lock_file = tree_;
    lock_file += ".lock";
    fs::remove(lock_file, ignored);
  }

 private:
  fs::path tree_;
};

// The one entry an export published into an empty cache: models/<key>/<version>.
fs::path published_entry(const fs::path& cache) {
  for (const auto& model : fs::directory_iterator(cache / "models")) {
    if (!model.is_directory()) continue;
    for (const auto& version : fs::directory_iterator(model.path()))
      if (version.is_directory()) return version.path();
  }
  fail(ExitCode::preparation, "debug-serve: the preparation published no package in {}", cache.string());
}

}  // namespace

int run_debug_serve(const DebugServeOptions& options) {
  // A locked staging tree of the model cache holds a private cache for the prepared package: never
  // published, skipped by `flare models gc` while this process lives, reclaimed by it if killed.
  const Config config = load_config(options.prepare.global.config);
  package::ModelCache shared(options.prepare.model_cache ? *options.prepare.model_cache : config.package_cache());
  const package::ModelCache::Staging staging = shared.begin_staging();
  const RemoveTree remove(staging.path());
  ExportOptions prepare = options.prepare;
  prepare.model_cache = staging.path() / "cache";
  if (const int status = run_export(prepare); status != 0) return status;

  // This process signed the package a moment ago: approve exactly that key and namespace.
  const SigningIdentity signer = load_signing_identity(config);
  cli::PackageCommandGlobals globals{prepare.global.config, prepare.model_cache, prepare.global.plain};
  cli::RunOptions run;
  run.target = published_entry(*prepare.model_cache).string();
  run.approve_key = signer.key.fingerprint();
  run.accept_publisher = signer.namespace_name;
  run.gpus = prepare.cpu ? std::nullopt : prepare.gpus;
  run.host = options.host;
  run.port = options.port;
  run.speculation.history_drafts = options.history_drafts;
  return cli::run_serve(globals, run);
}

void add_debug_serve_command(CLI::App& app, DebugServeOptions& options) {
  CLI::App* command = add_command(app, "debug-serve",
                                  "Prepare a model and serve it from this process, without publishing a package "
                                  "(diagnosis only: use export and flare run to serve)",
                                  [&options] { return run_debug_serve(options); });
  add_preparation_flags(*command, options.prepare);
  command->add_option("--host", options.host, "Listener IP address, IPv4 or IPv6 (default [server] host, else 127.0.0.1)");
  command->add_option("--port", options.port, "Listener port (default [server] port, else 8000)");
  command->add_flag_callback("--history-drafts", [&options] { options.history_drafts = true; },
                             "Draft from each request's own prompt and output (n-gram lookup)");
  command->add_flag_callback("--no-history-drafts", [&options] { options.history_drafts = false; },
                             "No history drafts (the default)");
}

}  // namespace flare::ignition
