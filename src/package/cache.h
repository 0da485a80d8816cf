// The local model cache (DESIGN.md section 5, spec "Package snapshots" / "Local model management"):
//   blobs/<payload-id>.safetensors   immutable companion objects, hard-linked into entries
//   models/<model-key>/<version>/    published directory-form entries (immutable)
//   refs/<model-key>                 the selected default version (written atomically)
//   staging/<name>/ + <name>.lock    unpublished work, locked by its writer; gc reclaims the rest
//   locks/cache.lock                 shared by publishers, exclusive for gc
//   locks/<model-key>@<version>.lock entry leases: shared flock while used, exclusive to remove
// Lock files are never deleted, so every process locks the same inode.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "package/package.h"

namespace flare::package {

// An open flock on a lock file, released on destruction.
class FileLock {
 public:
  FileLock() = default;
  FileLock(FileLock&& other) noexcept : fd_(other.fd_) { other.fd_ = -1; }
  FileLock& operator=(FileLock&& other) noexcept;
  ~FileLock();
  // Returns an empty lock when `wait` is false and someone else holds a conflicting lock.
  static std::optional<FileLock> acquire(const std::filesystem::path& path, bool exclusive, bool wait);
  bool held() const { return fd_ >= 0; }

 private:
  int fd_ = -1;
};

struct EntryRef {
  std::string model_key;
  std::string version;
  std::string text() const { return model_key + "@" + version; }
};
// "MODEL@VERSION" (version required when `require_version`).
EntryRef parse_entry_ref(const std::string& text, bool require_version);

struct StorageFigures {
  std::uint64_t logical_bytes = 0;         // unique payload lengths named by the manifest
  std::uint64_t disk_logical_bytes = 0;    // apparent sizes of unique inodes
  std::uint64_t disk_physical_bytes = 0;   // st_blocks * 512 of those inodes
  std::uint64_t shared_logical_bytes = 0;  // inodes with more than one link
  std::uint64_t shared_physical_bytes = 0;
  std::optional<std::uint64_t> reclaimable_bytes;
  std::string reclaimable_note;            // why reclaimable_bytes is null
};

struct EntryInfo {
  EntryRef ref;
  std::filesystem::path path;
  bool selected = false;
  bool leased = false;
  std::string metadata_error;              // non-empty when the manifest could not be decoded
  std::shared_ptr<proto::Manifest> manifest;  // unverified
  StorageFigures storage;
};

struct GcReport {
  std::uint64_t n_staging_removed = 0;
  std::uint64_t n_blobs_removed = 0;
  std::uint64_t reclaimed_bytes = 0;   // physical bytes freed
  std::uint64_t n_staging_in_use = 0;  // staging trees skipped because their writer is alive
};

class ModelCache {
 public:
  explicit ModelCache(std::filesystem::path root);
  const std::filesystem::path& root() const { return root_; }
  std::filesystem::path entry_path(const EntryRef& ref) const;

  // A staging tree held by this process until published or dropped.
  class Staging {
   public:
    const std::filesystem::path& path() const { return path_; }

   private:
    friend class ModelCache;
    std::filesystem::path path_;
    FileLock lock_;
  };
  Staging begin_staging();

  // Publishes a directory-form package written under `staging.path()/package`: companions
  // become hard links to blobs (existing blobs are reused), then the entry appears under
  // models/ by one rename. Refuses an existing entry. Selects it as default when `select`.
  EntryRef publish(Staging staging, bool select);
  // Builds, signs and publishes a package in one call.
  EntryRef publish_package(PackageBuilder& builder, const SigningKey& key, bool select);

  // Holds a shared lease on an entry while in use; throws if it does not exist.
  FileLock lease(const EntryRef& ref) const;
  bool leased(const EntryRef& ref) const;

  std::optional<std::string> selected_version(const std::string& model_key) const;
  void select(const EntryRef& ref);
  // Resolves MODEL (its default) or MODEL@VERSION to an existing entry.
  EntryRef resolve(const std::string& selector) const;
  void remove(const EntryRef& ref, bool clear_default);
  GcReport gc();

  std::vector<EntryInfo> list(const std::string& model_key_filter) const;
  std::vector<std::string> model_keys() const;
  std::vector<std::string> versions(const std::string& model_key) const;

 private:
  EntryRef publish_staged(const Staging& staging, bool select);
  std::filesystem::path lock_path(const EntryRef& ref) const;
  FileLock cache_lock(bool exclusive) const;
  std::filesystem::path root_;
};

bool valid_model_key(std::string_view key);

}  // namespace flare::package
