// Prepared packages from Hugging Face repositories (spec "Downloading published packages"):
// `flare download ORG/MODEL[@REVISION]` and `flare run ORG/MODEL`. The revision is --revision,
// else @REVISION, else the recorded origin's, else the one the selected GPUs' PCI device ids name
// (`sm90`, `sm120`, ..., `cpu` without a GPU; common/hardware_revision.h). Online, the revision is resolved to a commit and the
// primary package file (the sole top-level .safetensors that is neither a SHA-256-named blob nor
// a `-data-NN-of-NN` companion, or --filename) travels through a hub-layout transport cache under
// the model cache (or --cache-dir), then the companion files its locations name (a directory-form
// package), resolved beside it at the same commit; all of them are verified against the signed
// manifest, then installed together as one directory-form entry of the Flare model cache (one
// rename: a failure installs nothing) and selected as its model's default. An origin record keeps repository, requested
// revision, commit, filename (and whether it was chosen automatically), TP size and the SHA-256
// of the signed envelope, so an unchanged commit transfers and installs nothing, and --offline
// resolves from records alone. Nothing here grants publisher trust or loads the package.
#pragma once

#include <filesystem>
#include <optional>
#include <string>

#include "common/config.h"
#include "common/terminal.h"
#include "flare/package_selection.h"
#include "package/cache.h"

namespace flare::cli {

struct PackageDownloadOptions {
  std::string repository;                           // ORG/MODEL[@REVISION]
  std::optional<std::string> revision;              // --revision
  std::optional<std::string> filename;              // --filename
  std::optional<std::filesystem::path> cache_dir;   // --cache-dir: parent of the transport cache
  std::optional<std::filesystem::path> token_file;  // --token-file
  bool offline = false;                             // --offline
  std::optional<std::string> gpus;                  // --gpus: whose hardware names the revision
};

// True when `target` names a repository rather than a path or a cached model: ORG/MODEL[@REV]
// that is not an existing path.
bool is_repository_target(const std::string& target);

// Acquires the package and returns its cache entry (published and selected).
package::EntryRef acquire_package(const PackageDownloadOptions& options, const Config& config,
                                  package::ModelCache& cache, const TerminalInfo& terminal);

// `flare run TARGET`: a path or a cached model as select_package() finds it; otherwise an
// ORG/MODEL repository is acquired first. Download options with a local path are a usage error
// (--offline excepted).
SelectedPackage select_or_download(const std::string& target, const PackageDownloadOptions& download,
                                   const Config& config, package::ModelCache& cache, const TerminalInfo& terminal);

// The revision for the selected GPUs (--gpus, else the first visible one) from their PCI device
// ids (common/hardware_revision.h): "sm90" for an H100 or H200, "cpu" without a GPU; an unknown
// device is a usage error asking for --revision.
std::string hardware_revision(const std::optional<std::string>& gpus);

}  // namespace flare::cli
