#include "common/atomic_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <random>

#include "common/error.h"

namespace flare {

void write_file_atomic(const std::filesystem::path& path, std::string_view bytes, unsigned mode) {
  static std::atomic<std::uint64_t> sequence{0};
  const std::filesystem::path temp =
      path.string() + fmt::format(".tmp.{}.{}.{}", ::getpid(), sequence++, std::random_device{}());
  const int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
  if (fd < 0) fail(ExitCode::failure, "cannot write {}: {}", temp.string(), std::strerror(errno));
  auto abandon = [&](const char* step) {
    const int err = errno;
    ::close(fd);
    ::unlink(temp.c_str());
    fail(ExitCode::failure, "cannot {} {}: {}", step, path.string(), std::strerror(err));
  };
  while (!bytes.empty()) {
    const ssize_t n = ::write(fd, bytes.data(), bytes.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) abandon("write");
    bytes.remove_prefix(static_cast<std::size_t>(n));
  }
  if (::fsync(fd) != 0) abandon("sync");
  ::close(fd);
  if (::rename(temp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    ::unlink(temp.c_str());
    fail(ExitCode::failure, "cannot replace {}: {}", path.string(), std::strerror(err));
  }
}

}  // namespace flare
