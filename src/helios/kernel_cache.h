// The on-disk cache of compiled kernels ([paths].kernel_cache, default ~/.cache/flare/kernels;
// DESIGN.md section 2): a compiled binary (CUBIN) is stored under the SHA-256 of everything that
// determines it (source, architecture, compiler options, compiler version), so a second preparation
// of the same kernels compiles nothing. Entries are written atomically (temporary file + rename) and
// carry a SHA-256 of their bytes; a damaged or foreign entry is a miss and is rewritten, never an
// error. Counters let a caller assert how many compiles ran (`flare run` expects zero).
//
// Ownership: one KernelCache per preparation or load, owned by the engine thread; get_or_build of
// different keys may run on several threads at once (entries are separate files, counters atomic).
// Several processes may share the folder: concurrent writers of one key write identical bytes.
#pragma once

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace flare::helios {

class KernelCache {
 public:
  explicit KernelCache(std::filesystem::path dir);

  // Lowercase hex SHA-256 over the length-prefixed fields, so no two field lists collide.
  static std::string key(std::string_view source, std::string_view arch, std::span<const std::string> options,
                         std::string_view compiler_version);

  // The stored binary for `key`, or nullopt (absent, unreadable or damaged). Counts a hit or miss.
  std::optional<std::string> load(const std::string& key);
  // Stores atomically; throws flare::Error when the folder cannot be written.
  void store(const std::string& key, std::string_view binary);
  // load(), else build() then store(); build() runs only on a miss (counted in n_builds).
  std::string get_or_build(const std::string& key, const std::function<std::string()>& build);

  const std::filesystem::path& dir() const { return dir_; }
  std::filesystem::path entry_path(const std::string& key) const;
  std::int64_t n_hits() const { return n_hits_; }
  std::int64_t n_misses() const { return n_misses_; }
  std::int64_t n_builds() const { return n_builds_; }
  std::int64_t n_damaged() const { return n_damaged_; }  // entries found but rejected

 private:
  std::filesystem::path dir_;
  // Atomic: get_or_build may run on several threads at once (CudaBackend::precompile).
  std::atomic<std::int64_t> n_hits_ = 0, n_misses_ = 0, n_builds_ = 0, n_damaged_ = 0;
};

}  // namespace flare::helios
