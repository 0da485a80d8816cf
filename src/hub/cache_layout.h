// The Hugging Face hub cache layout, shared with the Hugging Face libraries and other tools:
//
//   <hub_cache>/models--ORG--NAME/refs/<revision>              40-hex commit, no newline
//   <hub_cache>/models--ORG--NAME/blobs/<etag>                 complete, verified files only
//   <hub_cache>/models--ORG--NAME/snapshots/<commit>/<file>    relative symlink ../../blobs/<etag>
//   <hub_cache>/.locks/models--ORG--NAME/<etag>.lock           one writer per blob (flock)
//
// Flare keeps transfers in progress outside blobs/ and snapshots/, so no reader (ours or another
// tool's) ever sees a partial file:
//
//   <hub_cache>/.flare-partial/models--ORG--NAME/<etag>.part    the bytes so far
//   <hub_cache>/.flare-partial/models--ORG--NAME/<etag>.chunks  which chunks are complete
//
// Refs and snapshot links are replaced atomically (a temporary name, then rename).
#pragma once

#include <filesystem>
#include <optional>
#include <string>

namespace flare::hub {

class CacheLayout {
 public:
  CacheLayout(std::filesystem::path hub_cache, const std::string& repository);

  const std::filesystem::path& repo_dir() const { return repo_dir_; }
  std::filesystem::path blob(const std::string& etag) const { return repo_dir_ / "blobs" / etag; }
  std::filesystem::path snapshot(const std::string& commit) const { return repo_dir_ / "snapshots" / commit; }
  std::filesystem::path lock_file(const std::string& etag) const;
  std::filesystem::path partial_file(const std::string& etag) const;
  std::filesystem::path chunk_record(const std::string& etag) const;
  const std::filesystem::path& hub_cache() const { return hub_cache_; }

  // refs/<revision>: the commit, or nullopt when absent or not a commit.
  std::optional<std::string> read_ref(const std::string& revision) const;
  // Writes refs/<revision> when its content differs (atomic).
  void write_ref(const std::string& revision, const std::string& commit) const;

  // snapshots/<commit>/<filename> -> ../../blobs/<etag> (one more ../ per folder in filename).
  void link_snapshot_file(const std::string& commit, const std::string& filename, const std::string& etag) const;
  // The blob a snapshot file points at, when it is a symlink into blobs/ whose target exists.
  bool snapshot_file_present(const std::string& commit, const std::string& filename) const;

 private:
  std::filesystem::path hub_cache_;
  std::string folder_;  // models--ORG--NAME
  std::filesystem::path repo_dir_;
};

// "models--ORG--NAME".
std::string repo_folder_name(const std::string& repository);

}  // namespace flare::hub
