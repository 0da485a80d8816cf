#include "hub/blob_transfer.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <exception>
#include <fstream>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "common/error.h"
#include "common/sizes.h"
#include "hub/content_hash.h"
#include "hub/protocol.h"

namespace flare::hub {
namespace {

namespace fs = std::filesystem;

// One worker's write buffer: many 16 KiB pieces per write, and small enough to stay in cache.
constexpr std::size_t kWriteBufferBytes = 1u << 20;

bool is_disk_full(int err) { return err == ENOSPC || err == EDQUOT || err == EFBIG; }

[[noreturn]] void fail_write(int err, const BlobRequest& request, const fs::path& path, std::uint64_t n_left) {
  if (is_disk_full(err))
    fail(ExitCode::capacity,
         "the disk of the hub cache filled while downloading {} of {}: {} still to write to {} ({}); free space "
         "or set [paths] hub_cache to a larger disk, then run this again (the download resumes)",
         request.target.filename, request.target.repository, format_bytes(n_left), path.parent_path().string(),
         std::strerror(err));
  fail(ExitCode::failure, "cannot write {}: {}", path.string(), std::strerror(err));
}

class FileHandle {
 public:
  explicit FileHandle(int fd = -1) : fd_(fd) {}
  ~FileHandle() { reset(); }
  FileHandle(const FileHandle&) = delete;
  FileHandle& operator=(const FileHandle&) = delete;
  int get() const { return fd_; }
  void reset(int fd = -1) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = fd;
  }

 private:
  int fd_;
};

// Holds the blob's flock; waits (saying so once) while another process holds it. Filesystems
// without flock leave the download unlocked: the partial name is then private to this process.
class BlobLock {
 public:
  BlobLock(const fs::path& path, const std::string& filename, TransferObserver& observer) {
    std::error_code ec;
    fs::create_directories(path.parent_path(), ec);
    fd_.reset(::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644));
    if (fd_.get() < 0) return;
    if (::flock(fd_.get(), LOCK_EX | LOCK_NB) == 0) {
      locked_ = true;
      return;
    }
    if (errno != EWOULDBLOCK) return;
    observer.note(fmt::format("waiting for another process downloading {}", filename));
    while (::flock(fd_.get(), LOCK_EX) != 0 && errno == EINTR) {
    }
    locked_ = true;
  }
  bool locked() const { return locked_; }

 private:
  FileHandle fd_;
  bool locked_ = false;
};

// Replaces a small file by rename, without fsync: the record only has to survive the process
// (a killed download), not a power cut, after which the final hash check catches any mismatch.
void replace_small_file(const fs::path& path, const std::string& bytes) {
  const fs::path temp = path.string() + fmt::format(".tmp.{}", ::getpid());
  {
    std::ofstream out(temp, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    if (!out) fail(ExitCode::failure, "cannot write {}", temp.string());
  }
  if (::rename(temp.c_str(), path.c_str()) != 0)
    fail(ExitCode::failure, "cannot replace {}: {}", path.string(), std::strerror(errno));
}

// The finished-chunk record beside a partial file: "flare-partial 1 SIZE CHUNK_BYTES\n" and one
// '0'/'1' per chunk.
std::string render_record(std::uint64_t size, std::uint64_t chunk_bytes, const std::vector<char>& done) {
  std::string text = fmt::format("flare-partial 1 {} {}\n", size, chunk_bytes);
  for (char d : done) text += d ? '1' : '0';
  text += '\n';
  return text;
}

std::optional<std::vector<char>> load_record(const fs::path& path, std::uint64_t size, std::uint64_t chunk_bytes,
                                             std::size_t n_chunks) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::string header, bits;
  if (!std::getline(in, header) || !std::getline(in, bits)) return std::nullopt;
  if (header != fmt::format("flare-partial 1 {} {}", size, chunk_bytes) || bits.size() != n_chunks) return std::nullopt;
  std::vector<char> done(n_chunks);
  for (std::size_t i = 0; i < n_chunks; ++i) {
    if (bits[i] != '0' && bits[i] != '1') return std::nullopt;
    done[i] = bits[i] == '1';
  }
  return done;
}

// Why a transfer stopped before its end; set once, by the first worker that fails.
struct Abort {
  std::mutex mutex;
  std::atomic<bool> flag{false};
  std::exception_ptr error;
  bool ranges_ignored = false;  // a 200 to a Range request: restart as one stream

  void set(std::exception_ptr e) {
    std::lock_guard lock(mutex);
    if (!error && !ranges_ignored) error = std::move(e);
    flag = true;
  }
  void set_ranges_ignored() {
    std::lock_guard lock(mutex);
    ranges_ignored = true;
    flag = true;
  }
};

struct Transfer {
  Transfer(const HubClient& c, const BlobRequest& r, TransferObserver& o) : client(c), request(r), observer(o) {}
  const HubClient& client;
  const BlobRequest& request;
  TransferObserver& observer;
  int fd = -1;
  fs::path part_path;
  fs::path record_path;
  std::uint64_t chunk_bytes = 0;
  std::size_t n_chunks = 0;
  bool ranged = false;  // several chunks, each a Range request

  std::mutex mutex;  // guards url, done, next_pending and the record
  std::string url;
  std::vector<char> done;
  std::size_t next_pending = 0;
  Abort abort;
  std::atomic<std::uint64_t> n_left{0};
  FollowingHasher* hasher = nullptr;  // hashes the bytes as they are written (content_hash.h)

  std::optional<std::size_t> take_chunk() {
    std::lock_guard lock(mutex);
    while (next_pending < n_chunks && done[next_pending]) ++next_pending;
    if (next_pending >= n_chunks) return std::nullopt;
    return next_pending++;
  }

  void finish_chunk(std::size_t index) {
    std::lock_guard lock(mutex);
    done[index] = 1;
    replace_small_file(record_path, render_record(request.size, chunk_bytes, done));
  }

  std::string current_url() {
    std::lock_guard lock(mutex);
    return url;
  }

  // A signed CDN URL may expire during a long transfer: ask the Hub for a fresh one.
  void refresh_url(HttpSession& session, const std::string& stale) {
    std::lock_guard lock(mutex);
    if (url != stale) return;
    url = client.locate(session, request.target, request.commit).url;
  }
};

// Received bytes gathered into one larger write: libcurl hands a body over in pieces of at most
// 16 KiB, and a pwrite per piece (65,000 a GiB) serializes the connections on the file's inode
// lock. Contiguous pieces are copied here and written together.
class PendingWrite {
 public:
  PendingWrite(Transfer& t, std::vector<char>& buffer, std::size_t chunk) : t_(t), buffer_(buffer), chunk_(chunk) {}
  // Appends `size` bytes that belong at file offset `offset`; returns errno of a failed write, else 0.
  int add(std::uint64_t offset, const char* data, std::size_t size) {
    if (used_ > 0 && (start_ + used_ != offset || used_ + size > buffer_.size()))
      if (const int err = flush()) return err;
    if (size >= buffer_.size()) return write(offset, data, size);
    if (used_ == 0) start_ = offset;
    std::memcpy(buffer_.data() + used_, data, size);
    used_ += size;
    return 0;
  }
  // Writes what is gathered; returns errno of a failed write, else 0.
  int flush() {
    const std::size_t n = used_;
    used_ = 0;
    return n == 0 ? 0 : write(start_, buffer_.data(), n);
  }

 private:
  int write(std::uint64_t offset, const char* data, std::size_t size) {
    std::size_t written = 0;
    while (written < size) {
      const ssize_t n = ::pwrite(t_.fd, data + written, size - written, static_cast<off_t>(offset + written));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return n < 0 ? errno : EIO;
      written += static_cast<std::size_t>(n);
    }
    if (t_.hasher) t_.hasher->written(chunk_, offset + size);
    t_.n_left -= std::min<std::uint64_t>(t_.n_left, size);
    t_.observer.bytes_received(size);
    return 0;
  }

  Transfer& t_;
  std::vector<char>& buffer_;
  std::size_t chunk_;
  std::uint64_t start_ = 0;
  std::size_t used_ = 0;
};

// Fetches bytes [first, last] of the file into place. `whole_stream`: one request without Range
// for the whole file (a resume after a drop asks for the rest; a 200 to it starts over).
// `buffer`: the worker's write buffer.
void fetch_span(Transfer& t, HttpSession& session, std::vector<char>& buffer, std::uint64_t first, std::uint64_t last,
                bool whole_stream) {
  std::uint64_t offset = first;
  PendingWrite pending(t, buffer, static_cast<std::size_t>(first / t.chunk_bytes));
  int attempt = 0;
  bool refreshed = false;
  int write_errno = 0;
  while (offset <= last) {
    if (t.abort.flag) return;
    HttpRequest http;
    http.url = t.current_url();
    http.headers = t.client.headers_for(http.url);
    const bool asked_range = !whole_stream || offset > 0;
    if (asked_range) http.range = std::make_pair(offset, last);
    bool checked = false;
    bool protocol_error = false;
    std::string protocol_message;
    const std::uint64_t offset_before = offset;
    const BodySink sink = [&](const HttpResponse& head, const char* data, std::size_t size) -> bool {
      if (t.abort.flag) return false;
      if (!checked) {
        checked = true;
        if (head.status == 206 && asked_range) {
          const auto range = parse_content_range(head.header("content-range"));
          if (!range || range->unsatisfied || range->first != offset || range->last != last ||
              range->total != t.request.size) {
            protocol_error = true;
            protocol_message = fmt::format("a Content-Range of \"{}\" for bytes {}-{} of {}",
                                           head.header("content-range").substr(0, 80), offset, last, t.request.size);
            return false;
          }
        } else if (head.status == 200) {
          if (!whole_stream) {
            t.abort.set_ranges_ignored();
            return false;
          }
          // The server sent the whole file again: start over. Bytes hashed so far are written
          // again, so the following hash no longer holds.
          if (offset > 0 && t.hasher) t.hasher->invalidate();
          offset = 0;
        } else {
          protocol_error = true;
          protocol_message = fmt::format("HTTP {} to a download request", head.status);
          return false;
        }
      }
      if (size > last + 1 - offset) {
        protocol_error = true;
        protocol_message = "more bytes than the file has";
        return false;
      }
      if ((write_errno = pending.add(offset, data, size)) != 0) return false;
      offset += size;
      return true;
    };
    std::optional<HttpResponse> response;
    std::optional<TransportError> transport_error;
    try {
      response = session.perform(http, &sink);
    } catch (const TransportError& error) {
      transport_error = error;
    }
    // Every byte received is in the file before anything else is decided.
    if (write_errno == 0) write_errno = pending.flush();
    if (write_errno) fail_write(write_errno, t.request, t.part_path, t.n_left.load());
    std::optional<HttpResponse> failure;
    if (transport_error) {
      if (t.abort.flag) return;
      if (protocol_error)
        fail(ExitCode::fetch, "{} of {}: the download server answered with {}; run this again later",
             t.request.target.filename, t.request.target.repository, protocol_message);
      if (transport_error->aborted_by_sink) return;
    } else if (response->status >= 200 && response->status < 300) {
      if (offset > last) return;
      // The body ended early without a transport error: ask for the rest.
    } else if (response->status == 403 && url_origin(http.url) != url_origin(t.client.settings().endpoint) &&
               !refreshed) {
      refreshed = true;
      t.refresh_url(session, http.url);
      continue;
    } else if (response->status == 408 || response->status == 429 || response->status >= 500) {
      failure = std::move(response);
    } else {
      t.client.fail_status(*response, t.request.target, http.url);
    }
    if (offset > offset_before) attempt = 0;  // progress resets the retry budget
    if (++attempt >= t.client.settings().retry.n_attempts)
      t.client.fail_unreachable(fmt::format("{} stopped at byte {} of {}", t.request.target.filename, offset,
                                            t.request.size), t.request.target);
    t.observer.note(fmt::format("{}: retrying from byte {}", t.request.target.filename, offset));
    t.client.wait_before_retry(attempt, failure ? &*failure : nullptr);
  }
}

void worker(Transfer& t) {
  try {
    HttpSession session;
    std::vector<char> buffer(kWriteBufferBytes);
    while (!t.abort.flag) {
      const auto index = t.take_chunk();
      if (!index) return;
      const std::uint64_t first = *index * t.chunk_bytes;
      const std::uint64_t last = std::min(t.request.size, first + t.chunk_bytes) - 1;
      fetch_span(t, session, buffer, first, last, !t.ranged);
      if (t.abort.flag) return;
      t.finish_chunk(*index);
    }
  } catch (...) {
    t.abort.set(std::current_exception());
  }
}

// Runs the transfer into the open partial file; returns false when the server ignored Range
// (the caller restarts as one stream).
bool run_transfer(Transfer& t, const TransferOptions& options) {
  const int n_threads = t.ranged ? std::max(1, std::min<int>(options.n_connections, static_cast<int>(t.n_chunks))) : 1;
  if (n_threads == 1) {
    worker(t);
  } else {
    std::vector<std::thread> threads;
    for (int i = 0; i < n_threads; ++i) threads.emplace_back([&t] { worker(t); });
    for (auto& thread : threads) thread.join();
  }
  if (t.abort.error) std::rethrow_exception(t.abort.error);
  return !t.abort.ranges_ignored;
}

void remove_partial(const Transfer& t) {
  ::unlink(t.part_path.c_str());
  ::unlink(t.record_path.c_str());
}

}  // namespace

std::uint64_t chunk_bytes_for(std::uint64_t size, const TransferOptions& options) {
  const std::uint64_t n_target = static_cast<std::uint64_t>(std::max(1, options.n_connections)) * 4;
  std::uint64_t chunk = (size + n_target - 1) / n_target;
  chunk = (chunk + kMiB - 1) / kMiB * kMiB;
  return std::clamp(chunk, options.min_chunk_bytes, std::max(options.min_chunk_bytes, options.max_chunk_bytes));
}

namespace {

// Opens the partial file for a round: the finished chunks of an earlier run are kept when its
// record matches this file and chunking (`try_resume`); otherwise the file starts clean, with
// its space reserved up front so a full disk shows now, not half-way through. Returns the bytes
// already there.
std::uint64_t open_partial(Transfer& t, FileHandle& fd, bool try_resume) {
  const BlobRequest& request = t.request;
  std::optional<std::vector<char>> record =
      try_resume ? load_record(t.record_path, request.size, t.chunk_bytes, t.n_chunks) : std::nullopt;
  struct stat info {};
  if (record && (::stat(t.part_path.c_str(), &info) != 0 || static_cast<std::uint64_t>(info.st_size) != request.size))
    record.reset();
  if (!record) remove_partial(t);
  fd.reset(::open(t.part_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644));
  if (fd.get() < 0) fail(ExitCode::failure, "cannot create {}: {}", t.part_path.string(), std::strerror(errno));
  t.fd = fd.get();
  t.done = record ? *record : std::vector<char>(t.n_chunks, 0);
  t.next_pending = 0;
  t.abort.flag = false;
  t.abort.error = nullptr;
  t.abort.ranges_ignored = false;
  std::uint64_t resumed = 0;
  for (std::size_t i = 0; i < t.n_chunks; ++i)
    if (t.done[i]) resumed += std::min(request.size, (i + 1) * t.chunk_bytes) - i * t.chunk_bytes;
  t.n_left = request.size - resumed;
  if (!record && request.size > 0) {
    const int err = ::fallocate(t.fd, 0, 0, static_cast<off_t>(request.size)) == 0 ? 0 : errno;
    if (err != 0 && err != EOPNOTSUPP && err != ENOSYS) {
      fd.reset();
      remove_partial(t);
      fail_write(err, request, t.part_path, request.size);
    }
    if (err != 0 && ::ftruncate(t.fd, static_cast<off_t>(request.size)) != 0)
      fail_write(errno, request, t.part_path, request.size);
    replace_small_file(t.record_path, render_record(request.size, t.chunk_bytes, t.done));
  }
  return resumed;
}

// The URL the bytes come from. The tree entry is the authority on size and content id; file
// headers that disagree mean the server is not serving that entry.
std::string locate_checked(const HubClient& client, const BlobRequest& request) {
  HttpSession session;
  const FileLocation located = client.locate(session, request.target, request.commit);
  if ((!located.etag.empty() && located.etag != request.etag) ||
      (!located.commit.empty() && located.commit != request.commit) || (located.size && *located.size != request.size))
    fail(ExitCode::fetch,
         "{} of {}@{}: the hub's file headers (ETag {}, commit {}, {} bytes) disagree with its file list "
         "(ETag {}, commit {}, {} bytes); run this again later",
         request.target.filename, request.target.repository, request.target.revision, located.etag.substr(0, 64),
         located.commit.substr(0, 40), located.size.value_or(0), request.etag, request.commit, request.size);
  return located.url;
}

// Renames the checked partial file into blobs/ (same filesystem: atomic) and syncs the folder.
void publish_blob(Transfer& t, FileHandle& fd, const fs::path& blob) {
  ::fchmod(t.fd, 0644);
  fd.reset();
  if (::rename(t.part_path.c_str(), blob.c_str()) != 0)
    fail(ExitCode::failure, "cannot publish {}: {}", blob.string(), std::strerror(errno));
  ::unlink(t.record_path.c_str());
  FileHandle dir(::open(blob.parent_path().c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (dir.get() >= 0) ::fsync(dir.get());
}

// An existing blob: true when it is there with the expected size; an error when it is not a
// file of that size.
bool blob_present(const fs::path& blob, const BlobRequest& request) {
  struct stat info {};
  if (::stat(blob.c_str(), &info) != 0) return false;
  if (!S_ISREG(info.st_mode) || static_cast<std::uint64_t>(info.st_size) != request.size)
    fail(ExitCode::fetch, "the cached blob {} is not a {}-byte file as {} of {} needs; remove it and run this again",
         blob.string(), request.size, request.target.filename, request.target.repository);
  return true;
}

}  // namespace

BlobOutcome fetch_blob(const HubClient& client, const CacheLayout& cache, const BlobRequest& request,
                       const TransferOptions& options, TransferObserver& observer) {
  const bool git_blob = is_commit_id(request.etag);
  if (!git_blob && !is_sha256_hex(request.etag))
    fail(ExitCode::fetch, "{}: {} has no usable content id", request.target.repository, request.target.filename);
  const fs::path blob = cache.blob(request.etag);
  std::error_code ec;
  fs::create_directories(blob.parent_path(), ec);
  fs::create_directories(cache.partial_file(request.etag).parent_path(), ec);
  if (ec) fail(ExitCode::failure, "cannot create folders in the hub cache {}: {}", cache.hub_cache().string(), ec.message());

  BlobLock lock(cache.lock_file(request.etag), request.target.filename, observer);
  BlobOutcome outcome;
  if (blob_present(blob, request)) return outcome;  // another process finished it meanwhile

  Transfer t(client, request, observer);
  // Without a working lock another process may share the partial name: use a private one.
  const std::string private_suffix = lock.locked() ? "" : fmt::format(".{}", ::getpid());
  t.part_path = cache.partial_file(request.etag).string() + private_suffix;
  t.record_path = cache.chunk_record(request.etag).string() + private_suffix;
  t.chunk_bytes = chunk_bytes_for(request.size, options);
  t.n_chunks = request.size == 0 ? 0 : static_cast<std::size_t>((request.size + t.chunk_bytes - 1) / t.chunk_bytes);
  t.ranged = t.n_chunks > 1;

  for (int round = 0;; ++round) {
    FileHandle fd;
    const std::uint64_t resumed = open_partial(t, fd, round == 0);
    if (resumed > 0) {
      observer.bytes_resumed(resumed);
      observer.note(fmt::format("{}: resuming with {} of {} already downloaded", request.target.filename,
                                format_bytes(resumed), format_bytes(request.size)));
    }
    outcome.resumed_bytes = resumed;
    // The content id is computed while the bytes arrive; the file is read back only where that
    // could not follow (a body the server restarted).
    std::optional<FollowingHasher> hasher;
    hasher.emplace(t.fd, git_blob, request.size, t.chunk_bytes, t.done);
    t.hasher = &*hasher;
    if (resumed < request.size) {
      t.url = locate_checked(client, request);
      if (!run_transfer(t, options)) {
        observer.note(fmt::format("{}: the server ignored Range requests; downloading it again as one stream",
                                  request.target.filename));
        t.ranged = false;
        t.chunk_bytes = std::max<std::uint64_t>(request.size, 1);
        t.n_chunks = request.size == 0 ? 0 : 1;
        t.hasher = nullptr;
        hasher.reset();  // stopped before its file closes
        fd.reset();
        remove_partial(t);
        continue;
      }
    }
    const std::optional<std::string> followed = hasher->finish();
    t.hasher = nullptr;
    if (::fsync(t.fd) != 0) fail_write(errno, request, t.part_path, 0);
    const std::string actual = followed ? *followed : content_id_of_file(t.part_path.string(), git_blob);
    if (actual != request.etag) {
      fd.reset();
      remove_partial(t);
      if (resumed > 0 && round == 0) {
        observer.note(fmt::format("{}: the resumed file failed its check; downloading it again", request.target.filename));
        continue;
      }
      fail(ExitCode::fetch,
           "{} of {} failed its {} check (expected {}, got {}); nothing was kept. Run this again; if it "
           "fails again, something between here and {} alters downloads",
           request.target.filename, request.target.repository, git_blob ? "git SHA-1" : "SHA-256", request.etag,
           actual, client.settings().endpoint);
    }
    publish_blob(t, fd, blob);
    outcome.downloaded = true;
    return outcome;
  }
}

}  // namespace flare::hub
