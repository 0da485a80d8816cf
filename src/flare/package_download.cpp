#include "flare/package_download.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <mutex>
#include <regex>
#include <set>
#include <span>

#include <nlohmann/json.hpp>

#include "common/atomic_file.h"
#include "common/error.h"
#include "common/gpu.h"
#include "common/hardware_revision.h"
#include "common/sizes.h"
#include "hub/checkpoint_fetch.h"
#include "hub/protocol.h"
#include "package/crypto.h"
#include "package/package.h"

namespace flare::cli {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

struct Origin {
  std::string repository, revision, commit, filename;
  bool filename_auto = true;
  int tensor_parallel = 1;
  std::string envelope_sha256;
  std::string entry;  // MODEL@VERSION
};

// origins/<key>.json, one per (repository, requested revision, filename choice).
fs::path origin_path(const package::ModelCache& cache, const std::string& repository, const std::string& revision,
                     const std::optional<std::string>& filename) {
  const std::string key = repository + "@" + revision + "#" + filename.value_or("");
  return cache.root() / "origins" / (hub::encode_segment(key) + ".json");
}

std::optional<Origin> read_origin(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  const json value = json::parse(in, nullptr, false);
  if (!value.is_object()) return std::nullopt;
  Origin o;
  try {
    o.repository = value.at("repository").get<std::string>();
    o.revision = value.at("revision").get<std::string>();
    o.commit = value.at("commit").get<std::string>();
    o.filename = value.at("filename").get<std::string>();
    o.filename_auto = value.at("filename_auto").get<bool>();
    o.tensor_parallel = value.at("tensor_parallel").get<int>();
    o.envelope_sha256 = value.value("envelope_sha256", "");
    o.entry = value.at("entry").get<std::string>();
  } catch (const json::exception&) {
    return std::nullopt;
  }
  return o;
}

void write_origin(const fs::path& path, const Origin& o) {
  const json value = {{"repository", o.repository}, {"revision", o.revision},       {"commit", o.commit},
                      {"filename", o.filename},     {"filename_auto", o.filename_auto}, {"tensor_parallel", o.tensor_parallel},
                      {"envelope_sha256", o.envelope_sha256}, {"entry", o.entry}};
  std::error_code ec;
  fs::create_directories(path.parent_path(), ec);
  write_file_atomic(path, value.dump(2) + "\n");
}

// The origin record whose download installed `ref`, if any.
std::optional<Origin> origin_of_entry(const package::ModelCache& cache, const package::EntryRef& ref) {
  std::error_code ec;
  for (const auto& file : fs::directory_iterator(cache.root() / "origins", ec)) {
    if (file.path().extension() != ".json") continue;
    if (auto origin = read_origin(file.path()); origin && origin->entry == ref.text()) return origin;
  }
  return std::nullopt;
}

// SHA-256 of the signed envelope: the manifest bytes, then the signature text.
std::string envelope_sha256(const package::Package& pkg) {
  const std::string envelope = pkg.manifest_bytes() + pkg.signature_text();
  return package::sha256_hex(std::as_bytes(std::span(envelope.data(), envelope.size())));
}

// The primary package file among a commit's top-level files.
std::string select_primary(const std::map<std::string, hub::TreeEntry>& files, const std::string& repository,
                           const std::string& revision) {
  static const std::regex companion(R"(.*-data-\d+-of-\d+\.safetensors)");
  std::vector<std::string> primaries;
  for (const auto& [name, entry] : files) {
    if (name.find('/') != std::string::npos) continue;  // companions and other packages' folders
    if (name.size() <= 12 || name.substr(name.size() - 12) != ".safetensors") continue;
    const std::string stem = name.substr(0, name.size() - 12);
    if (hub::is_sha256_hex(stem) || std::regex_match(name, companion)) continue;
    primaries.push_back(name);
  }
  if (primaries.empty())
    fail(ExitCode::fetch, "{}@{} holds no prepared package (.safetensors file)", repository, revision);
  if (primaries.size() > 1)
    fail_usage("{}@{} holds several packages ({}); choose one with --filename", repository, revision,
               fmt::join(primaries, ", "));
  return primaries.front();
}

// Progress on stderr: one stage per plan (the primary, then its companions).
class StderrReporter : public hub::CheckpointReporter {
 public:
  StderrReporter(const TerminalInfo& terminal, std::string description)
      : terminal_(terminal), description_(std::move(description)) {}
  void set_description(std::string description) {
    std::lock_guard lock(mutex_);
    description_ = std::move(description);
  }
  void plan(std::size_t n_files, std::uint64_t n_bytes, std::size_t) override {
    std::lock_guard lock(mutex_);
    stage_.reset();  // a finished stage has printed its result line
    if (n_files > 0) stage_ = std::make_unique<ProgressStage>(terminal_, stderr, description_, n_bytes);
  }
  void file_done(const std::string& filename, std::uint64_t size, bool transferred) override {
    std::lock_guard lock(mutex_);
    if (stage_ && !terminal_.styled) stage_->set_detail(fmt::format("{} {}", filename, format_bytes(size)));
    if (stage_ && transferred) {
      ++n_transferred_;
      transferred_bytes_ += size;
    }
  }
  void finish() {
    std::lock_guard lock(mutex_);
    if (stage_) stage_->ok(fmt::format("{} files, {}", n_transferred_, format_bytes(transferred_bytes_)));
    stage_.reset();
    n_transferred_ = 0;
    transferred_bytes_ = 0;
  }
  void bytes_received(std::uint64_t n) override {
    if (stage_) stage_->advance(n);
  }
  void bytes_resumed(std::uint64_t n) override {
    if (stage_) stage_->advance(n);
  }
  void note(const std::string& message) override {
    std::lock_guard lock(mutex_);
    if (!terminal_.styled) std::fprintf(stderr, "  %s\n", message.c_str());
  }

 private:
  TerminalInfo terminal_;
  std::mutex mutex_;
  std::string description_;
  std::unique_ptr<ProgressStage> stage_;
  std::size_t n_transferred_ = 0;
  std::uint64_t transferred_bytes_ = 0;
};

hub::HubAccess access_for(const PackageDownloadOptions& options, const Config& config, const package::ModelCache& cache) {
  hub::HubAccess access;
  access.hub_cache = (options.cache_dir ? *options.cache_dir : cache.root()) / "hub-transport";
  access.settings.endpoint = config.hub_endpoint();
  const std::optional<fs::path> token_file = options.token_file ? options.token_file : config.hub.token_file;
  if (token_file) {
    access.settings.token = hub::read_token_file(token_file->string());
    access.settings.token_source = (options.token_file ? "--token-file " : "[hub] token_file ") + token_file->string();
  }
  return access;
}

// The companion files the primary's locations name, as repository paths: they resolve from the
// primary's folder at the same commit. Reads only the primary's (bounded) metadata.
std::vector<const hub::TreeEntry*> companions_of(const fs::path& primary, const std::string& filename,
                                                 const std::map<std::string, hub::TreeEntry>& files,
                                                 const std::string& repository, const std::string& commit) {
  std::unique_ptr<package::Package> pkg;
  try {
    pkg = package::Package::open(primary);
  } catch (const Error& error) {
    fail(ExitCode::fetch, "{} of {} at commit {} is not a Flare package, so nothing was installed: {}", filename,
         repository, commit.substr(0, 12), error.what());
  }
  const std::string folder = fs::path(filename).parent_path().generic_string();
  std::set<std::string> names;
  for (const auto& [id, location] : pkg->locations())
    if (!location.file.empty()) names.insert(folder.empty() ? location.file : folder + "/" + location.file);
  std::vector<const hub::TreeEntry*> entries;
  std::vector<std::string> missing;
  for (const std::string& name : names) {
    const auto it = files.find(name);
    if (it == files.end())
      missing.push_back(name);
    else
      entries.push_back(&it->second);
  }
  if (!missing.empty())
    fail(ExitCode::fetch, "{} at commit {}: {} names {} companion file{} the repository lacks ({}{}); the package "
         "was published incompletely, so nothing was installed", repository, commit.substr(0, 12), filename,
         missing.size(), missing.size() == 1 ? "" : "s", fmt::join(missing.begin(), missing.begin() +
         static_cast<std::ptrdiff_t>(std::min<std::size_t>(missing.size(), 3)), ", "), missing.size() > 3 ? ", ..." : "");
  return entries;
}

// Places `from` (a snapshot symlink into the transport blobs) at `to` as a hard link to the blob,
// or a copy across filesystems: packages accept no symlinked companions.
void link_resolved(const fs::path& from, const fs::path& to) {
  std::error_code ec;
  fs::create_directories(to.parent_path(), ec);
  if (::linkat(AT_FDCWD, from.c_str(), AT_FDCWD, to.c_str(), AT_SYMLINK_FOLLOW) == 0) return;
  if (errno != EXDEV && errno != EPERM && errno != EMLINK)
    fail(ExitCode::failure, "cannot link {} to {}: {}", from.string(), to.string(), std::strerror(errno));
  fs::copy_file(from, to, ec);
  if (ec) fail(ExitCode::failure, "cannot copy {} to {}: {}", from.string(), to.string(), ec.message());
}

// Installs the downloaded package (`files`: the primary `filename` and its companions, repository
// paths in the transport snapshot) as a directory-form cache entry. The snapshot's links are
// resolved into an acquisition tree in a staging folder of the model cache; every payload is
// checked against the signed manifest there; the entry appears in one rename, so a failure leaves
// no entry (and the staging folder is removed).
package::EntryRef install(const fs::path& snapshot, const std::string& filename, const std::vector<std::string>& files,
                          package::ModelCache& cache, const TerminalInfo& terminal, const std::string& origin,
                          std::string* envelope) {
  {
    const auto primary = package::Package::open(snapshot / filename);  // opened by companions_of already
    *envelope = envelope_sha256(*primary);
    const package::EntryRef ref{primary->manifest().model().canonical_name(), primary->manifest().version()};
    std::error_code ec;
    if (fs::is_directory(cache.entry_path(ref), ec)) {
      cache.select(ref);  // the same version is already installed (another repository or revision)
      return ref;
    }
  }
  package::ModelCache::Staging staging = cache.begin_staging();
  try {
    const fs::path acquired = staging.path() / "acquired";
    for (const std::string& file : files) link_resolved(snapshot / file, acquired / file);
    std::unique_ptr<package::Package> source;
    try {
      source = package::Package::open(acquired / filename);
      source->check_layout();
    } catch (const Error& error) {
      fail(ExitCode::fetch, "the package downloaded from {} is not a valid package, so nothing was installed: {}",
           origin, error.what());
    }
    {
      ProgressStage stage(terminal, stderr, "Verify package", source->distinct_payload_bytes());
      try {
        source->verify_payloads([&stage](std::uint64_t n) { stage.advance(n); });
      } catch (const Error& error) {
        stage.failed();
        fail(ExitCode::fetch, "the package downloaded from {} failed verification, so nothing was installed: {}",
             origin, error.what());
      }
      stage.ok(fmt::format("{} payloads", source->distinct_payloads().size()));
    }
    package::convert_package(*source, staging.path() / "package", package::PackageForm::directory);
  } catch (...) {
    std::error_code ec;
    fs::remove_all(staging.path(), ec);
    throw;
  }
  return cache.publish(std::move(staging), true);
}

}  // namespace

bool is_repository_target(const std::string& target) {
  std::error_code ec;
  if (target.empty() || target[0] == '/' || target.rfind("./", 0) == 0 || target.rfind("../", 0) == 0 ||
      fs::exists(target, ec))
    return false;
  const std::string repository = target.substr(0, target.find('@'));
  return hub::is_repository_id(repository) &&
         !(repository.size() > 12 && repository.substr(repository.size() - 12) == ".safetensors");
}

std::string hardware_revision(const std::optional<std::string>& gpus) {
  const GpuInventory inventory = discover_gpus();
  return hardware_revision_for(inventory.gpus, gpus ? parse_gpu_list(*gpus) : std::vector<int>{});
}

package::EntryRef acquire_package(const PackageDownloadOptions& options, const Config& config,
                                  package::ModelCache& cache, const TerminalInfo& terminal) {
  const auto at = options.repository.find('@');
  const std::string repository = options.repository.substr(0, at);
  if (!hub::is_repository_id(repository)) fail_usage("'{}' is not a repository id (ORG/MODEL)", repository);
  std::optional<std::string> revision = options.revision;
  if (!revision && at != std::string::npos) revision = options.repository.substr(at + 1);
  if (!revision) revision = hardware_revision(options.gpus);
  if (!hub::is_revision_name(*revision)) fail_usage("'{}' is not a valid revision", *revision);
  if (options.filename && !hub::is_safe_repo_path(*options.filename))
    fail_usage("--filename '{}' is not a repository-relative path", *options.filename);

  const fs::path record_path = origin_path(cache, repository, *revision, options.filename);
  const std::optional<Origin> recorded = read_origin(record_path);
  auto recorded_entry = [&]() -> std::optional<package::EntryRef> {
    if (!recorded) return std::nullopt;
    const package::EntryRef ref = package::parse_entry_ref(recorded->entry, true);
    std::error_code ec;
    if (!fs::is_directory(cache.entry_path(ref), ec)) return std::nullopt;
    auto pkg = package::Package::open(cache.entry_path(ref));
    if (recorded->envelope_sha256.empty() || envelope_sha256(*pkg) != recorded->envelope_sha256)
      fail(ExitCode::fetch, "the cached entry {} no longer matches the package recorded for {}@{}; run without "
                            "--offline to acquire it again", recorded->entry, repository, *revision);
    return ref;
  };

  if (options.offline) {
    if (auto ref = recorded_entry()) return *ref;
    fail(ExitCode::fetch, "{}@{} has not been downloaded into the model cache {} (--offline makes no network "
                          "requests); run without --offline", repository, *revision, cache.root().string());
  }

  const hub::HubAccess access = access_for(options, config, cache);
  const hub::HubClient client(access.settings);
  const hub::Target target{repository, *revision, ""};
  hub::HttpSession session;
  const std::string commit = hub::parse_revision_commit(
      client.get(session, client.api_url(repository, "/revision/" + hub::encode_segment(*revision)), target).body);
  if (recorded && recorded->commit == commit)
    if (auto ref = recorded_entry()) {
      std::fprintf(stderr, "%s@%s is unchanged (commit %s): %s\n", repository.c_str(), revision->c_str(),
                   commit.substr(0, 12).c_str(), ref->text().c_str());
      return *ref;
    }
  // Every file of the commit: the primary is chosen among the top-level ones, and a primary in a
  // folder (--filename) has its companions beside it.
  const auto files = hub::list_files(client, session, target, commit, true);
  const std::string filename = options.filename ? *options.filename : select_primary(files, repository, *revision);
  const auto entry = files.find(filename);
  if (entry == files.end())
    fail(ExitCode::fetch, "{}@{} has no file {} at commit {}", repository, *revision, filename, commit);

  const hub::CacheLayout transport(access.hub_cache, repository);
  StderrReporter reporter(terminal, "Download package");
  hub::CheckpointSnapshot result;
  hub::place_files(access, client, transport, target, commit, {&entry->second}, reporter, result);
  reporter.finish();
  // A directory-form package: its companions, all of them before anything is installed.
  const fs::path primary = transport.snapshot(commit) / filename;
  const std::vector<const hub::TreeEntry*> companions = companions_of(primary, filename, files, repository, commit);
  if (!companions.empty()) {
    reporter.set_description(fmt::format("Download {} companion files", companions.size()));
    hub::place_files(access, client, transport, target, commit, companions, reporter, result);
    reporter.finish();
  }
  if (*revision != commit) transport.write_ref(*revision, commit);

  std::vector<std::string> package_files = {filename};
  for (const hub::TreeEntry* companion : companions) package_files.push_back(companion->path);
  std::string envelope;
  const package::EntryRef ref = install(transport.snapshot(commit), filename, package_files, cache, terminal,
                                        fmt::format("{}@{} (commit {})", repository, *revision, commit.substr(0, 12)),
                                        &envelope);
  Origin origin{repository, *revision, commit, filename, !options.filename.has_value(), 1, envelope, ref.text()};
  write_origin(record_path, origin);
  return ref;
}

SelectedPackage select_or_download(const std::string& target, const PackageDownloadOptions& download,
                                   const Config& config, package::ModelCache& cache, const TerminalInfo& terminal) {
  const bool download_flags = download.revision || download.filename || download.cache_dir || download.token_file;
  if (!is_repository_target(target)) {
    if (download_flags) fail_usage("--revision, --filename, --cache-dir and --token-file apply to ORG/MODEL repositories only");
    SelectedPackage selected = select_package(target, cache);
    // An unqualified model downloaded from a repository: check its recorded origin for updates.
    if (!selected.entry || target.find('@') != std::string::npos || download.offline) return selected;
    const std::optional<Origin> origin = origin_of_entry(cache, *selected.entry);
    if (!origin) return selected;  // exported here: no repository lookup
    PackageDownloadOptions update;
    update.repository = origin->repository;
    update.revision = origin->revision;
    if (!origin->filename_auto) update.filename = origin->filename;
    update.token_file = download.token_file;
    package::EntryRef latest;
    try {
      latest = acquire_package(update, config, cache, terminal);
    } catch (const Error& error) {
      std::fprintf(stderr, "warning: checking %s@%s for updates failed; serving the cached %s\n         %s\n",
                   origin->repository.c_str(), origin->revision.c_str(), selected.entry->text().c_str(), error.what());
      cache.select(*selected.entry);  // a failed check leaves the default as it was
      return selected;
    }
    if (latest.model_key != selected.entry->model_key) {
      cache.select(*selected.entry);
      fail(ExitCode::fetch, "{}@{} now holds {}, not {}: refusing the update", origin->repository, origin->revision,
           latest.model_key, selected.entry->model_key);
    }
    if (latest.version == selected.entry->version) return selected;
    std::fprintf(stderr, "%s: updated to %s from %s@%s\n", selected.entry->model_key.c_str(), latest.version.c_str(),
                 origin->repository.c_str(), origin->revision.c_str());
    return select_package(latest.text(), cache);
  }
  if (!download_flags) {
    // A model known to the cache (exported here, or downloaded before) is served as it is.
    try {
      return select_package(target, cache);
    } catch (const Error& error) {
      if (error.code() != ExitCode::usage) throw;
    }
  }
  PackageDownloadOptions options = download;
  options.repository = target;
  const package::EntryRef ref = acquire_package(options, config, cache, terminal);
  return select_package(ref.text(), cache);
}

}  // namespace flare::cli
