// Model cache implementation (see cache.h for the layout and locking rules).
#include "package/cache.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <random>
#include <set>

#include "common/error.h"

namespace flare::package {
namespace fs = std::filesystem;
namespace {

std::string random_suffix() {
  std::random_device device;
  return fmt::format("{:08x}{:08x}", device(), device());
}

void ensure_dirs(const fs::path& root) {
  for (const char* sub : {"blobs", "models", "refs", "staging", "locks"}) {
    std::error_code ec;
    fs::create_directories(root / sub, ec);
    if (ec) fail_input("cannot create the model cache at {}: {}", (root / sub).string(), ec.message());
  }
}

// Replaces `path` by a hard link to `target` atomically (link beside it, then rename over it).
void replace_with_link(const fs::path& target, const fs::path& path) {
  fs::path temp = path;
  temp += ".link-" + random_suffix();
  if (::link(target.c_str(), temp.c_str()) != 0 || ::rename(temp.c_str(), path.c_str()) != 0) {
    ::unlink(temp.c_str());
    fail_input("cannot link {} into {}: {}", target.string(), path.string(), std::strerror(errno));
  }
}

std::uint64_t physical_bytes(const struct stat& st) { return static_cast<std::uint64_t>(st.st_blocks) * 512; }

StorageFigures measure_entry(const fs::path& entry) {
  StorageFigures figures;
  std::set<std::pair<dev_t, ino_t>> seen;
  std::uint64_t single_physical = 0;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(entry, ec); !ec && it != fs::recursive_directory_iterator();
       it.increment(ec)) {
    struct stat st {};
    if (::lstat(it->path().c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
    if (!seen.insert({st.st_dev, st.st_ino}).second) continue;
    figures.disk_logical_bytes += static_cast<std::uint64_t>(st.st_size);
    figures.disk_physical_bytes += physical_bytes(st);
    if (st.st_nlink > 1) {
      figures.shared_logical_bytes += static_cast<std::uint64_t>(st.st_size);
      figures.shared_physical_bytes += physical_bytes(st);
    } else {
      single_physical += physical_bytes(st);
    }
  }
  figures.reclaimable_bytes = single_physical;
  return figures;
}

}  // namespace

bool valid_model_key(std::string_view key) {
  if (key.empty() || key.size() > 128 || key == "." || key == "..") return false;
  return std::all_of(key.begin(), key.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
           c == '-';
  });
}

EntryRef parse_entry_ref(const std::string& text, bool require_version) {
  auto at = text.rfind('@');
  EntryRef ref;
  ref.model_key = at == std::string::npos ? text : text.substr(0, at);
  ref.version = at == std::string::npos ? "" : text.substr(at + 1);
  if (!valid_model_key(ref.model_key) || (at != std::string::npos && !valid_model_key(ref.version))) {
    fail_usage("'{}' is not a valid MODEL@VERSION", text);
  }
  if (require_version && ref.version.empty()) fail_usage("'{}' needs a version: MODEL@VERSION", text);
  return ref;
}

FileLock& FileLock::operator=(FileLock&& other) noexcept {
  std::swap(fd_, other.fd_);
  return *this;
}

FileLock::~FileLock() {
  if (fd_ >= 0) ::close(fd_);  // closing releases the flock
}

std::optional<FileLock> FileLock::acquire(const fs::path& path, bool exclusive, bool wait) {
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) fail_input("cannot open lock {}: {}", path.string(), std::strerror(errno));
  int operation = (exclusive ? LOCK_EX : LOCK_SH) | (wait ? 0 : LOCK_NB);
  while (::flock(fd, operation) != 0) {
    if (errno == EINTR) continue;
    ::close(fd);
    if (errno == EWOULDBLOCK) return std::nullopt;
    fail_input("cannot lock {}: {}", path.string(), std::strerror(errno));
  }
  FileLock lock;
  lock.fd_ = fd;
  return lock;
}

ModelCache::ModelCache(fs::path root) : root_(std::move(root)) { ensure_dirs(root_); }

fs::path ModelCache::entry_path(const EntryRef& ref) const { return root_ / "models" / ref.model_key / ref.version; }
fs::path ModelCache::lock_path(const EntryRef& ref) const { return root_ / "locks" / (ref.text() + ".lock"); }
FileLock ModelCache::cache_lock(bool exclusive) const {
  return *FileLock::acquire(root_ / "locks" / "cache.lock", exclusive, true);
}

ModelCache::Staging ModelCache::begin_staging() {
  Staging staging;
  std::string name = "export-" + random_suffix();
  staging.lock_ = *FileLock::acquire(root_ / "staging" / (name + ".lock"), true, true);
  staging.path_ = root_ / "staging" / name;
  fs::create_directories(staging.path_);
  return staging;
}

namespace {
// Removes a staging tree and its lock file (the lock itself is still held by the caller).
void drop_staging(const fs::path& tree) {
  std::error_code ec;
  fs::remove_all(tree, ec);
  fs::path lock_file = tree;
  lock_file += ".lock";
  fs::remove(lock_file, ec);
}
}  // namespace

EntryRef ModelCache::publish(Staging staging, bool select_entry) {
  try {
    return publish_staged(staging, select_entry);
  } catch (...) {
    drop_staging(staging.path());
    throw;
  }
}

EntryRef ModelCache::publish_staged(const Staging& staging, bool select_entry) {
  fs::path package_dir = staging.path() / "package";
  auto package = Package::open(package_dir);
  package->check_layout();
  EntryRef ref{package->manifest().model().canonical_name(), package->manifest().version()};
  if (!valid_model_key(ref.model_key) || !valid_model_key(ref.version)) {
    fail_input("{}: model key '{}' or version '{}' cannot name a cache entry", package_dir.string(),
               ref.model_key, ref.version);
  }
  {
    FileLock shared = cache_lock(false);  // gc cannot run while blobs gain their links
    for (const auto* payload : package->distinct_payloads()) {
      fs::path companion = package->companion_path(payload->id());
      if (companion.empty()) continue;
      fs::path blob = root_ / "blobs" / (payload->id() + ".safetensors");
      if (::link(companion.c_str(), blob.c_str()) == 0) continue;
      if (errno != EEXIST) fail_input("cannot store {}: {}", blob.string(), std::strerror(errno));
      if (fs::file_size(blob) != fs::file_size(companion)) {
        fail_input("cached object {} has an unexpected size; run `flare models gc` after removing it", blob.string());
      }
      replace_with_link(blob, companion);
    }
    fs::create_directories(root_ / "models" / ref.model_key);
    fs::path entry = entry_path(ref);
    if (::rename(package_dir.c_str(), entry.c_str()) != 0) {
      if (errno == EEXIST || errno == ENOTEMPTY) fail_usage("{} is already published", ref.text());
      fail_input("cannot publish {}: {}", entry.string(), std::strerror(errno));
    }
  }
  if (select_entry) select(ref);
  drop_staging(staging.path());
  return ref;
}

EntryRef ModelCache::publish_package(PackageBuilder& builder, const SigningKey& key, bool select_entry) {
  Staging staging = begin_staging();
  try {
    builder.write(staging.path() / "package", PackageForm::directory, key);
  } catch (...) {
    drop_staging(staging.path());
    throw;
  }
  return publish(std::move(staging), select_entry);
}

FileLock ModelCache::lease(const EntryRef& ref) const {
  FileLock lock = *FileLock::acquire(lock_path(ref), false, true);
  if (!fs::is_directory(entry_path(ref))) fail_usage("{} is not in the model cache", ref.text());
  return lock;
}

bool ModelCache::leased(const EntryRef& ref) const {
  return !FileLock::acquire(lock_path(ref), true, false).has_value();
}

std::optional<std::string> ModelCache::selected_version(const std::string& model_key) const {
  std::error_code ec;
  fs::path ref = root_ / "refs" / model_key;
  if (!fs::is_regular_file(ref, ec)) return std::nullopt;
  std::string text = read_small_file(ref, 4096);
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  if (!valid_model_key(text)) return std::nullopt;
  return text;
}

void ModelCache::select(const EntryRef& ref) {
  if (!fs::is_directory(entry_path(ref))) fail_usage("{} is not a published entry", ref.text());
  write_file_atomic(root_ / "refs" / ref.model_key, ref.version + "\n");
}

EntryRef ModelCache::resolve(const std::string& selector) const {
  EntryRef ref = parse_entry_ref(selector, false);
  auto versions_found = versions(ref.model_key);
  if (versions_found.empty()) fail_usage("model '{}' is not in the model cache at {}", ref.model_key, root_.string());
  if (ref.version.empty()) {
    auto selected = selected_version(ref.model_key);
    if (!selected) {
      fail_usage("model '{}' has no selected default; choose one of: {}", ref.model_key,
                 fmt::join(versions_found, ", "));
    }
    ref.version = *selected;
  }
  if (!fs::is_directory(entry_path(ref))) {
    fail_usage("{} is not in the model cache; available versions: {}", ref.text(), fmt::join(versions_found, ", "));
  }
  return ref;
}

void ModelCache::remove(const EntryRef& ref, bool clear_default) {
  fs::path entry = entry_path(ref);
  if (!fs::is_directory(entry)) fail_usage("{} is not in the model cache", ref.text());
  auto exclusive = FileLock::acquire(lock_path(ref), true, false);
  if (!exclusive) fail_usage("{} is in use by another process; stop it first", ref.text());
  bool selected = selected_version(ref.model_key) == ref.version;
  if (selected && !clear_default) {
    fail_usage("{} is the selected default of {}; pass --clear-default to remove it anyway", ref.text(),
               ref.model_key);
  }
  // Move the entry out of models/ in one rename, so a half-deleted entry is never visible.
  std::string name = "removing-" + random_suffix();
  FileLock staging_lock = *FileLock::acquire(root_ / "staging" / (name + ".lock"), true, true);
  fs::path doomed = root_ / "staging" / name;
  if (::rename(entry.c_str(), doomed.c_str()) != 0) {
    fail_input("cannot remove {}: {}", entry.string(), std::strerror(errno));
  }
  if (selected) fs::remove(root_ / "refs" / ref.model_key);
  std::error_code ec;
  fs::remove_all(doomed, ec);
  fs::remove(root_ / "staging" / (name + ".lock"), ec);
  fs::remove(root_ / "models" / ref.model_key, ec);  // only if now empty
}

GcReport ModelCache::gc() {
  GcReport report;
  FileLock exclusive = cache_lock(true);
  std::error_code ec;
  std::set<std::string> names;
  for (const auto& item : fs::directory_iterator(root_ / "staging", ec)) {
    std::string name = item.path().filename().string();
    if (name.ends_with(".lock")) name.resize(name.size() - 5);
    names.insert(name);
  }
  for (const auto& name : names) {
    fs::path tree = root_ / "staging" / name;
    fs::path lock_file = tree;
    lock_file += ".lock";
    auto lock = FileLock::acquire(lock_file, true, false);
    if (!lock) {
      ++report.n_staging_in_use;
      continue;
    }
    if (fs::exists(tree, ec)) {
      for (auto it = fs::recursive_directory_iterator(tree, ec); !ec && it != fs::recursive_directory_iterator();
           it.increment(ec)) {
        struct stat st {};
        if (::lstat(it->path().c_str(), &st) == 0 && S_ISREG(st.st_mode) && st.st_nlink == 1) {
          report.reclaimed_bytes += physical_bytes(st);
        }
      }
      fs::remove_all(tree, ec);
      ++report.n_staging_removed;
    }
    fs::remove(lock_file, ec);
  }
  for (const auto& item : fs::directory_iterator(root_ / "blobs", ec)) {
    struct stat st {};
    if (::lstat(item.path().c_str(), &st) != 0 || !S_ISREG(st.st_mode) || st.st_nlink != 1) continue;
    report.reclaimed_bytes += physical_bytes(st);
    fs::remove(item.path(), ec);
    ++report.n_blobs_removed;
  }
  return report;
}

std::vector<std::string> ModelCache::model_keys() const {
  std::vector<std::string> keys;
  std::error_code ec;
  for (const auto& item : fs::directory_iterator(root_ / "models", ec)) {
    if (item.is_directory() && valid_model_key(item.path().filename().string())) {
      keys.push_back(item.path().filename().string());
    }
  }
  std::sort(keys.begin(), keys.end());
  return keys;
}

std::vector<std::string> ModelCache::versions(const std::string& model_key) const {
  std::vector<std::string> result;
  std::error_code ec;
  if (!valid_model_key(model_key)) return result;
  for (const auto& item : fs::directory_iterator(root_ / "models" / model_key, ec)) {
    if (item.is_directory() && valid_model_key(item.path().filename().string())) {
      result.push_back(item.path().filename().string());
    }
  }
  std::sort(result.begin(), result.end());
  return result;
}

std::vector<EntryInfo> ModelCache::list(const std::string& model_key_filter) const {
  std::vector<EntryInfo> entries;
  for (const auto& key : model_keys()) {
    if (!model_key_filter.empty() && key != model_key_filter) continue;
    auto selected = selected_version(key);
    for (const auto& version : versions(key)) {
      EntryInfo info;
      info.ref = {key, version};
      info.path = entry_path(info.ref);
      info.selected = selected == version;
      info.leased = leased(info.ref);
      try {
        auto package = Package::open(info.path);
        info.manifest = std::make_shared<proto::Manifest>(package->manifest());
        info.storage.logical_bytes = package->distinct_payload_bytes();
      } catch (const Error& e) {
        info.metadata_error = e.what();
      }
      auto figures = measure_entry(info.path);
      figures.logical_bytes = info.storage.logical_bytes;
      if (info.selected) {
        figures.reclaimable_bytes.reset();
        figures.reclaimable_note = "selected default; remove with --clear-default to reclaim";
      } else if (info.leased) {
        figures.reclaimable_bytes.reset();
        figures.reclaimable_note = "in use by a running process";
      }
      info.storage = figures;
      entries.push_back(std::move(info));
    }
  }
  return entries;
}

}  // namespace flare::package
