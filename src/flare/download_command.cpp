#include "flare/download_command.h"

#include <cstdio>
#include <memory>

#include "common/cli.h"
#include "common/config.h"
#include "common/error.h"
#include "common/terminal.h"

namespace flare::cli {

int run_download(const PackageCommandGlobals& globals, const PackageDownloadOptions& options) {
  const Config config = load_config(globals.config);
  const TerminalInfo terminal = detect_terminal(stderr, globals.plain);
  if (!is_repository_target(options.repository))
    fail_usage("'{}' is not a Hugging Face repository (ORG/MODEL[@REVISION]); local packages need no download",
               options.repository);
  package::ModelCache cache(globals.model_cache ? *globals.model_cache : config.package_cache());
  const package::EntryRef ref = acquire_package(options, config, cache, terminal);
  std::printf("%s\n", cache.entry_path(ref).string().c_str());
  return 0;
}

void add_download_flags(CLI::App& command, PackageDownloadOptions& options) {
  command.add_option("--revision", options.revision, "Hub branch, tag or commit (overrides @REVISION and detection)");
  command.add_option("--filename", options.filename, "Repository-relative package file (default: the sole package)");
  command.add_option("--cache-dir", options.cache_dir, "Parent of the download transport cache (default: the model cache)");
  command.add_option("--token-file", options.token_file, "File holding a Hub token for gated or private repositories");
  command.add_flag("--offline", options.offline, "Resolve from the model cache's download records alone; no network");
}

void add_download_commands(CLI::App& app, PackageCommandGlobals& globals) {
  auto options = std::make_shared<PackageDownloadOptions>();
  for (CLI::App* parent : {&app, app.get_subcommand("models")}) {
    CLI::App* command = add_command(*parent, "download", "Download a prepared package from a Hugging Face repository",
                                    [&globals, options] { return run_download(globals, *options); });
    command->add_option("REPOSITORY", options->repository, "ORG/MODEL[@REVISION]")->required();
    add_download_flags(*command, *options);
    command->add_option("--gpus", options->gpus, "GPUs whose PCI device ids name the revision (default the first)");
    command->add_option("--model-cache", globals.model_cache, "Model cache directory (default [paths] package_cache)");
    command->add_option("--config", globals.config, "Configuration file");
    command->add_flag("--plain", globals.plain, "No styling");
  }
}

}  // namespace flare::cli
