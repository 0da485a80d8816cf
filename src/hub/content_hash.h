// Content ids of downloaded files: SHA-256 of the bytes (an LFS etag, 64 hex) or the git blob
// SHA-1 ("blob <size>\0" + bytes, 40 hex). FollowingHasher hashes a file while a transfer is still
// writing it, in file order, so the check before publishing costs no second pass over the file:
// the transfer reports how far each chunk has been written, a thread reads the bytes back from the
// page cache (they are still there) and hashes every byte once, as soon as the bytes before it are
// hashed. It also starts the disk writeback of what it has hashed, so the fsync before publishing
// waits for little.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace flare::hub {

// One content id computation (OpenSSL EVP), fed in order.
class ContentHasher {
 public:
  ContentHasher(bool git_blob, std::uint64_t size);
  ~ContentHasher();
  ContentHasher(const ContentHasher&) = delete;
  ContentHasher& operator=(const ContentHasher&) = delete;
  void update(const void* data, std::size_t size);
  std::string hex_digest();  // once

 private:
  void* ctx_ = nullptr;  // EVP_MD_CTX*
};

// The content id a blob name promises, read from a file. Throws on I/O errors.
std::string content_id_of_file(const std::string& path, bool git_blob);

// Hashes the file behind `fd` (`size` bytes in chunks of `chunk_bytes`) as chunks are written.
class FollowingHasher {
 public:
  // `done[i]`: chunk i is already complete (kept from an earlier run).
  FollowingHasher(int fd, bool git_blob, std::uint64_t size, std::uint64_t chunk_bytes, const std::vector<char>& done);
  ~FollowingHasher();  // stops the thread
  FollowingHasher(const FollowingHasher&) = delete;
  FollowingHasher& operator=(const FollowingHasher&) = delete;

  // Bytes of `chunk` are written from its start up to `end_offset` (absolute, exclusive).
  // Called by the transfer threads after each write; offsets within a chunk only grow.
  void written(std::size_t chunk, std::uint64_t end_offset) {
    written_end_[chunk].store(end_offset, std::memory_order_release);
  }
  // Bytes already hashed may have been written again (a server that restarted a body): the
  // result is no longer trusted and finish() returns nothing.
  void invalidate() { invalid_.store(true); }
  // Waits until every byte is hashed and returns the content id; nothing when invalidated or
  // when a read failed (the caller then hashes the finished file).
  std::optional<std::string> finish();
  // Seconds the hashing thread spent, for benchmarks (valid after finish()).
  double cpu_seconds() const { return cpu_seconds_; }

 private:
  void run();

  int fd_;
  std::uint64_t size_, chunk_bytes_;
  std::unique_ptr<std::atomic<std::uint64_t>[]> written_end_;
  std::size_t n_chunks_;
  ContentHasher hasher_;
  std::atomic<bool> invalid_{false}, stop_{false}, read_failed_{false};
  std::atomic<std::uint64_t> hashed_{0};
  double cpu_seconds_ = 0;
  std::thread thread_;
};

}  // namespace flare::hub
