// `flare download ORG/MODEL[@REVISION]` and its alias `flare models download`: acquire a prepared
// package from a Hugging Face repository into the model cache (package_download.h) and print only
// the cached entry's path on stdout; progress goes to stderr. It loads nothing and grants no trust.
#pragma once

#include "flare/package_commands.h"
#include "flare/package_download.h"

namespace flare::cli {

int run_download(const PackageCommandGlobals& globals, const PackageDownloadOptions& options);

// Registers the download flags on `command` (shared with `flare run`).
void add_download_flags(CLI::App& command, PackageDownloadOptions& options);

// Registers `download` on `app` and `download` under its `models` command.
void add_download_commands(CLI::App& app, PackageCommandGlobals& globals);

}  // namespace flare::cli
