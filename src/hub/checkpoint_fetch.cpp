#include "hub/checkpoint_fetch.h"

#include <signal.h>
#include <sys/statvfs.h>

#include <algorithm>
#include <fstream>
#include <map>

#include "common/error.h"
#include "common/sizes.h"
#include "hub/cache_layout.h"
#include "hub/protocol.h"

namespace flare::hub {
namespace {

namespace fs = std::filesystem;

constexpr int kMaxTreePages = 10000;
constexpr const char* kIndexFile = "model.safetensors.index.json";
constexpr const char* kSingleWeights = "model.safetensors";

std::string read_text(const fs::path& path, std::size_t max_bytes) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(ExitCode::failure, "cannot read {}", path.string());
  std::string text(max_bytes + 1, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<std::size_t>(in.gcount()));
  if (text.size() > max_bytes) fail(ExitCode::fetch, "{} is larger than {} bytes", path.string(), max_bytes);
  return text;
}

}  // namespace

// Every file of the commit (tree API, every page): top-level ones only, or with `recursive` the
// files of every folder too (the Hub's `?recursive=true`).
std::map<std::string, TreeEntry> list_files(const HubClient& client, HttpSession& session, const Target& target,
                                            const std::string& commit, bool recursive) {
  std::map<std::string, TreeEntry> files;
  std::string url = client.api_url(target.repository, "/tree/" + encode_segment(commit)) +
                    (recursive ? "?recursive=true" : "");
  for (int page = 0;; ++page) {
    if (page >= kMaxTreePages) fail(ExitCode::fetch, "the hub's file list of {} has more than {} pages", target.repository, kMaxTreePages);
    const HttpResponse response = client.get(session, url, target);
    for (TreeEntry& entry : parse_tree_page(response.body))
      if (entry.is_file && (recursive || entry.path.find('/') == std::string::npos)) files[entry.path] = std::move(entry);
    const auto next = parse_link_next(response.header("link"));
    if (!next) break;
    // A relative next link is taken against the endpoint.
    url = url_origin(*next).empty() ? client.settings().endpoint + (next->front() == '/' ? "" : "/") + *next : *next;
  }
  return files;
}

// Directories and nested files are not checkpoint inputs.
std::map<std::string, TreeEntry> list_top_level(const HubClient& client, HttpSession& session, const Target& target,
                                                const std::string& commit) {
  return list_files(client, session, target, commit, false);
}

namespace {

fs::path existing_ancestor(fs::path path) {
  std::error_code ec;
  while (!path.empty() && !fs::exists(path, ec)) {
    if (path == path.parent_path()) break;
    path = path.parent_path();
  }
  return path.empty() ? fs::path(".") : path;
}

void check_free_space(const HubAccess& access, const CacheLayout& cache, const std::string& repository,
                      const std::vector<const TreeEntry*>& to_fetch) {
  std::uint64_t needed = 0;
  for (const TreeEntry* entry : to_fetch) {
    std::error_code ec;
    // A partial file from an earlier run already holds its space.
    const auto partial = fs::file_size(cache.partial_file(entry->etag()), ec);
    needed += ec ? entry->size : entry->size - std::min<std::uint64_t>(entry->size, partial);
  }
  const fs::path where = existing_ancestor(access.hub_cache);
  struct statvfs info {};
  if (::statvfs(where.c_str(), &info) != 0) return;  // unknown: the transfer itself reports a full disk
  const std::uint64_t free_bytes = static_cast<std::uint64_t>(info.f_bavail) * info.f_frsize;
  if (needed <= free_bytes) return;
  fail(ExitCode::capacity,
       "needs {} ({} bytes) to download {} files of {} into {}; has {} ({} bytes) free there.\n"
       "       Options: free space on that disk; or set [paths] hub_cache to a folder on a larger disk.",
       format_bytes(needed), needed, to_fetch.size(), repository, access.hub_cache.string(), format_bytes(free_bytes),
       free_bytes);
}

// Fetches (or links) one file into the snapshot.
void place_file(const HubAccess& access, const HubClient& client, const CacheLayout& cache, const Target& base,
                const std::string& commit, const TreeEntry& entry, CheckpointReporter& reporter,
                CheckpointSnapshot& result) {
  BlobRequest request;
  request.target = base;
  request.target.filename = entry.path;
  request.commit = commit;
  request.etag = entry.etag();
  request.size = entry.size;
  const BlobOutcome outcome = fetch_blob(client, cache, request, access.transfer, reporter);
  cache.link_snapshot_file(commit, entry.path, entry.etag());
  if (outcome.downloaded) {
    ++result.n_transferred;
    result.transferred_bytes += entry.size - outcome.resumed_bytes;
  } else {
    ++result.n_reused;
  }
  reporter.file_done(entry.path, entry.size, outcome.downloaded);
}

}  // namespace

void place_files(const HubAccess& access, const HubClient& client, const CacheLayout& cache, const Target& target,
                 const std::string& commit, const std::vector<const TreeEntry*>& needed, CheckpointReporter& reporter,
                 CheckpointSnapshot& result) {
  // What the snapshot lacks, and of that what must travel.
  std::vector<const TreeEntry*> to_place, to_fetch;
  std::uint64_t fetch_bytes = 0;
  std::size_t n_present = 0;
  for (const TreeEntry* entry : needed) {
    if (cache.snapshot_file_present(commit, entry->path)) {
      ++n_present;
      continue;
    }
    to_place.push_back(entry);
    std::error_code ec;
    if (!fs::exists(cache.blob(entry->etag()), ec)) {
      to_fetch.push_back(entry);
      fetch_bytes += entry->size;
    }
  }
  result.n_reused += n_present;
  // A write past a file-size limit fails with EFBIG (reported) instead of killing the process.
  ::signal(SIGXFSZ, SIG_IGN);
  check_free_space(access, cache, target.repository, to_fetch);
  reporter.plan(to_fetch.size(), fetch_bytes, n_present + to_place.size() - to_fetch.size());
  // Small files first: a wrong repository fails before the large transfers start.
  std::stable_sort(to_place.begin(), to_place.end(),
                   [](const TreeEntry* a, const TreeEntry* b) { return a->size < b->size; });
  for (const TreeEntry* entry : to_place) place_file(access, client, cache, target, commit, *entry, reporter, result);
}

const std::vector<std::string>& checkpoint_metadata_files() {
  static const std::vector<std::string> files = {
      "config.json",           "generation_config.json", "tokenizer.json",      "tokenizer_config.json",
      "special_tokens_map.json", "added_tokens.json",    "tokenizer.model",     "vocab.json",
      "merges.txt",            "chat_template.jinja",    "chat_template.json",  "preprocessor_config.json",
  };
  return files;
}

CheckpointSnapshot fetch_checkpoint(const HubAccess& access, const std::string& repository,
                                    const std::string& revision, CheckpointReporter& reporter) {
  if (!is_repository_id(repository)) fail_usage("'{}' is not a repository id (org/name)", repository);
  if (!is_revision_name(revision)) fail_usage("'{}' is not a valid revision", revision);

  const HubClient client(access.settings);
  const CacheLayout cache(access.hub_cache, repository);
  const Target target{repository, revision, ""};
  HttpSession session;

  const HttpResponse info = client.get(session, client.api_url(repository, "/revision/" + encode_segment(revision)),
                                       target);
  const std::string commit = parse_revision_commit(info.body);
  const std::map<std::string, TreeEntry> files = list_top_level(client, session, target, commit);

  auto entry_of = [&](const std::string& name) -> const TreeEntry& {
    const auto it = files.find(name);
    if (it == files.end())
      fail(ExitCode::fetch, "{}@{} has no file {}: it is not a complete Transformers checkpoint at commit {}",
           repository, revision, name, commit);
    return it->second;
  };
  entry_of("config.json");
  std::vector<const TreeEntry*> needed;
  for (const std::string& name : checkpoint_metadata_files())
    if (files.count(name)) needed.push_back(&files.at(name));

  CheckpointSnapshot result;
  result.commit = commit;
  result.directory = cache.snapshot(commit);
  // The weights: the index's shards, else one model.safetensors. The index is small and fetched
  // first, since it decides the rest.
  if (files.count(kIndexFile)) {
    const TreeEntry& index = entry_of(kIndexFile);
    if (index.size > (64u << 20)) fail(ExitCode::fetch, "{}: {} is larger than 64 MiB", repository, kIndexFile);
    if (!cache.snapshot_file_present(commit, kIndexFile)) {
      place_file(access, client, cache, target, commit, index, reporter, result);
    }
    for (const std::string& shard : parse_index_shards(read_text(cache.snapshot(commit) / kIndexFile, 64u << 20)))
      needed.push_back(&entry_of(shard));
  } else if (files.count(kSingleWeights)) {
    needed.push_back(&entry_of(kSingleWeights));
  } else {
    fail(ExitCode::fetch, "{}@{} has neither {} nor {}: Flare prepares safetensors checkpoints only", repository,
         revision, kSingleWeights, kIndexFile);
  }

  place_files(access, client, cache, target, commit, needed, reporter, result);
  if (revision != commit) cache.write_ref(revision, commit);
  return result;
}

std::vector<std::string> missing_from_cache(const fs::path& hub_cache, const std::string& repository,
                                            const std::string& revision) {
  const CacheLayout cache(hub_cache, repository);
  std::optional<std::string> commit = is_commit_id(revision) ? std::optional<std::string>(revision) : cache.read_ref(revision);
  if (!commit) return {fmt::format("refs/{} (the commit of '{}')", revision, revision)};
  const fs::path snapshot = cache.snapshot(*commit);
  std::error_code ec;
  if (!fs::is_directory(snapshot, ec)) return {fmt::format("snapshots/{}", *commit)};
  std::vector<std::string> missing;
  if (!fs::is_regular_file(snapshot / "config.json", ec)) missing.push_back("config.json");
  if (fs::is_regular_file(snapshot / kIndexFile, ec)) {
    try {
      for (const std::string& shard : parse_index_shards(read_text(snapshot / kIndexFile, 64u << 20)))
        if (!fs::is_regular_file(snapshot / shard, ec)) missing.push_back(shard);
    } catch (const Error&) {
      missing.push_back(std::string(kIndexFile) + " (unreadable)");
    }
  } else if (!fs::is_regular_file(snapshot / kSingleWeights, ec)) {
    missing.push_back(std::string(kSingleWeights) + " or " + kIndexFile);
  }
  return missing;
}

}  // namespace flare::hub
