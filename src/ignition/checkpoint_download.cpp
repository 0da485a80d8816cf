#include "ignition/checkpoint_download.h"

#include "common/error.h"
#include "hub/checkpoint_fetch.h"
#include "hub/protocol.h"
#include "ignition/download_progress.h"
#include "ignition/resolve.h"

namespace flare::ignition {
namespace {

namespace fs = std::filesystem;

hub::HubAccess hub_access(const Config& config, const HubOptions& options) {
  hub::HubAccess access;
  access.hub_cache = config.hub_cache();
  access.settings.endpoint = config.hub_endpoint();
  if (options.token_file) {
    access.settings.token = hub::read_token_file(options.token_file->string());
    access.settings.token_source = "--token-file " + options.token_file->string();
  } else if (config.hub.token_file) {
    access.settings.token = hub::read_token_file(config.hub.token_file->string());
    access.settings.token_source = "[hub] token_file " + config.hub.token_file->string();
  }
  return access;
}

[[noreturn]] void fail_missing(const std::string& repository, const std::string& revision, const Config& config,
                               const std::string& why) {
  const std::vector<std::string> missing = hub::missing_from_cache(config.hub_cache(), repository, revision);
  fail(ExitCode::fetch, "{}@{} is not complete in the hub cache {} ({}): missing {}", repository, revision,
       config.hub_cache().string(), why, missing.empty() ? std::string("files") : fmt::format("{}", fmt::join(missing, ", ")));
}

}  // namespace

fs::path obtain_hub_checkpoint(const std::string& repository, const std::string& revision, const Config& config,
                               const HubOptions& options, std::string* commit) {
  // An exact commit already complete in the cache needs no network.
  if (hub::is_commit_id(revision) || options.offline || !options.allow_download) {
    if (fs::path found = find_hub_snapshot(config.hub_cache(), repository, revision, commit); !found.empty())
      return found;
  }
  if (options.offline) fail_missing(repository, revision, config, "--offline; run without it to download");
  if (!options.allow_download) fail_missing(repository, revision, config, "this command does not download");

  const hub::HubAccess access = hub_access(config, options);
  DownloadProgress progress(options.terminal, repository);
  hub::CheckpointSnapshot snapshot;
  try {
    snapshot = hub::fetch_checkpoint(access, repository, revision, progress);
  } catch (const hub::HubUnreachable& unreachable) {
    // The Hub is down or out of reach: a complete snapshot of this revision still serves.
    std::string cached_commit;
    const fs::path found = find_hub_snapshot(config.hub_cache(), repository, revision, &cached_commit);
    if (found.empty()) throw;
    std::fprintf(stderr, "warning: %s\n         using the hub cache's snapshot of %s@%s (commit %s)\n",
                 unreachable.what(), repository.c_str(), revision.c_str(), cached_commit.c_str());
    if (commit) *commit = cached_commit;
    return found;
  }
  progress.finish(snapshot);
  if (!snapshot_complete(snapshot.directory))
    fail(ExitCode::fetch, "{}@{}: the downloaded snapshot {} is still incomplete", repository, revision,
         snapshot.directory.string());
  if (commit) *commit = snapshot.commit;
  return snapshot.directory;
}

}  // namespace flare::ignition
