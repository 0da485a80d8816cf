// Prepare-and-serve for diagnosis (debug_serve.h).
#include "ignition/debug_serve.h"

#include <cstdlib>
#include <filesystem>

#include "common/config.h"
#include "common/error.h"
#include "flare/run_command.h"
#include "ignition/signing_identity.h"

namespace flare::ignition {
namespace {

namespace fs = std::filesystem;

// A private directory removed with everything in it when serving ends, however it ends.
class TemporaryDirectory {
 public:
  TemporaryDirectory() {
    std::string pattern = (fs::temp_directory_path() / "flare-debug-serve.XXXXXX").string();
    if (!mkdtemp(pattern.data())) fail(ExitCode::preparation, "cannot create a temporary directory for debug-serve");
    path_ = pattern;
  }
  ~TemporaryDirectory() {
    std::error_code ignored;
    fs::remove_all(path_, ignored);
  }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
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
  TemporaryDirectory work;
  ExportOptions prepare = options.prepare;
  prepare.model_cache = work.path() / "cache";
  if (const int status = run_export(prepare); status != 0) return status;

  // This process signed the package a moment ago: approve exactly that key and namespace.
  const SigningIdentity signer = load_signing_identity(load_config(prepare.global.config));
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
