#include "hub/content_hash.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>

#include <openssl/evp.h>

#include "common/error.h"

namespace flare::hub {
namespace {

// Read-back size: small enough to stay in the core's L2 cache between the read and the hash.
constexpr std::size_t kReadBytes = 1u << 20;
// Writeback of hashed bytes is started in steps of this many bytes.
constexpr std::uint64_t kWritebackBytes = 64ull << 20;

double thread_cpu_seconds() {
  timespec now{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now);
  return static_cast<double>(now.tv_sec) + static_cast<double>(now.tv_nsec) / 1e9;
}

}  // namespace

ContentHasher::ContentHasher(bool git_blob, std::uint64_t size) {
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  if (!ctx || EVP_DigestInit_ex(ctx, git_blob ? EVP_sha1() : EVP_sha256(), nullptr) != 1) {
    EVP_MD_CTX_free(ctx);
    fail(ExitCode::failure, "cannot start a hash");
  }
  ctx_ = ctx;
  if (git_blob) {
    const std::string prefix = fmt::format("blob {}", size);
    update(prefix.data(), prefix.size() + 1);  // with its NUL terminator
  }
}

ContentHasher::~ContentHasher() { EVP_MD_CTX_free(static_cast<EVP_MD_CTX*>(ctx_)); }

void ContentHasher::update(const void* data, std::size_t size) {
  EVP_DigestUpdate(static_cast<EVP_MD_CTX*>(ctx_), data, size);
}

std::string ContentHasher::hex_digest() {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned n_digest = 0;
  EVP_DigestFinal_ex(static_cast<EVP_MD_CTX*>(ctx_), digest, &n_digest);
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (unsigned i = 0; i < n_digest; ++i) {
    out += kHex[digest[i] >> 4];
    out += kHex[digest[i] & 15];
  }
  return out;
}

std::string content_id_of_file(const std::string& path, bool git_blob) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail(ExitCode::failure, "cannot read {}: {}", path, std::strerror(errno));
  struct stat info {};
  if (::fstat(fd, &info) != 0) {
    const int err = errno;
    ::close(fd);
    fail(ExitCode::failure, "cannot stat {}: {}", path, std::strerror(err));
  }
  ContentHasher hasher(git_blob, static_cast<std::uint64_t>(info.st_size));
  ::posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
  std::vector<unsigned char> buffer(kReadBytes);
  while (true) {
    const ssize_t n = ::read(fd, buffer.data(), buffer.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int err = errno;
      ::close(fd);
      fail(ExitCode::failure, "cannot read {}: {}", path, std::strerror(err));
    }
    if (n == 0) break;
    hasher.update(buffer.data(), static_cast<std::size_t>(n));
  }
  ::close(fd);
  return hasher.hex_digest();
}

FollowingHasher::FollowingHasher(int fd, bool git_blob, std::uint64_t size, std::uint64_t chunk_bytes,
                                 const std::vector<char>& done)
    : fd_(fd), size_(size), chunk_bytes_(std::max<std::uint64_t>(chunk_bytes, 1)), n_chunks_(done.size()),
      hasher_(git_blob, size) {
  written_end_.reset(new std::atomic<std::uint64_t>[std::max<std::size_t>(n_chunks_, 1)]);
  for (std::size_t i = 0; i < n_chunks_; ++i)
    written_end_[i].store(done[i] ? std::min(size_, (i + 1) * chunk_bytes_) : i * chunk_bytes_);
  thread_ = std::thread([this] { run(); });
}

FollowingHasher::~FollowingHasher() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
}

void FollowingHasher::run() {
  const double cpu_start = thread_cpu_seconds();
  std::vector<unsigned char> buffer(kReadBytes);
  std::uint64_t position = 0, writeback_from = 0;
  while (position < size_ && !invalid_ && !stop_) {
    const std::size_t chunk = static_cast<std::size_t>(position / chunk_bytes_);
    const std::uint64_t available = chunk < n_chunks_ ? written_end_[chunk].load(std::memory_order_acquire) : 0;
    if (available <= position) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));  // the next bytes are still on their way
      continue;
    }
    const std::size_t want = static_cast<std::size_t>(std::min<std::uint64_t>(available - position, buffer.size()));
    const ssize_t n = ::pread(fd_, buffer.data(), want, static_cast<off_t>(position));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      read_failed_ = true;
      break;
    }
    hasher_.update(buffer.data(), static_cast<std::size_t>(n));
    position += static_cast<std::uint64_t>(n);
    if (position - writeback_from >= kWritebackBytes || position == size_) {
      ::sync_file_range(fd_, static_cast<off_t>(writeback_from), static_cast<off_t>(position - writeback_from),
                        SYNC_FILE_RANGE_WRITE);
      writeback_from = position;
    }
  }
  hashed_ = position;
  cpu_seconds_ = thread_cpu_seconds() - cpu_start;
}

std::optional<std::string> FollowingHasher::finish() {
  // The transfer has finished every chunk: whatever a chunk's last report said, all of it is there.
  for (std::size_t i = 0; i < n_chunks_; ++i)
    written_end_[i].store(std::min(size_, (i + 1) * chunk_bytes_), std::memory_order_release);
  if (thread_.joinable()) thread_.join();
  if (invalid_ || read_failed_ || hashed_ != size_) return std::nullopt;
  return hasher_.hex_digest();
}

}  // namespace flare::hub
