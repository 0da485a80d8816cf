#include "hub/cache_layout.h"

#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <random>

#include "common/atomic_file.h"
#include "common/error.h"
#include "hub/protocol.h"

namespace flare::hub {
namespace {

namespace fs = std::filesystem;

void make_dirs(const fs::path& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) fail(ExitCode::failure, "cannot create {}: {}", dir.string(), ec.message());
}

std::string unique_suffix() {
  static std::atomic<std::uint64_t> sequence{0};
  return fmt::format(".tmp.{}.{}.{}", ::getpid(), sequence++, std::random_device{}());
}

}  // namespace

std::string repo_folder_name(const std::string& repository) {
  std::string name = "models--";
  for (char c : repository) name += c == '/' ? std::string("--") : std::string(1, c);
  return name;
}

CacheLayout::CacheLayout(fs::path hub_cache, const std::string& repository)
    : hub_cache_(std::move(hub_cache)), folder_(repo_folder_name(repository)), repo_dir_(hub_cache_ / folder_) {}

fs::path CacheLayout::lock_file(const std::string& etag) const { return hub_cache_ / ".locks" / folder_ / (etag + ".lock"); }
fs::path CacheLayout::partial_file(const std::string& etag) const {
  return hub_cache_ / ".flare-partial" / folder_ / (etag + ".part");
}
fs::path CacheLayout::chunk_record(const std::string& etag) const {
  return hub_cache_ / ".flare-partial" / folder_ / (etag + ".chunks");
}

std::optional<std::string> CacheLayout::read_ref(const std::string& revision) const {
  if (!is_revision_name(revision)) return std::nullopt;
  std::ifstream in(repo_dir_ / "refs" / revision, std::ios::binary);
  if (!in) return std::nullopt;
  std::string text(128, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<std::size_t>(in.gcount()));
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) text.pop_back();
  if (!is_commit_id(text)) return std::nullopt;
  return text;
}

void CacheLayout::write_ref(const std::string& revision, const std::string& commit) const {
  if (!is_revision_name(revision) || !is_commit_id(commit)) return;
  if (read_ref(revision) == commit) return;
  const fs::path path = repo_dir_ / "refs" / revision;
  make_dirs(path.parent_path());
  write_file_atomic(path, commit);
}

void CacheLayout::link_snapshot_file(const std::string& commit, const std::string& filename,
                                     const std::string& etag) const {
  const fs::path link = snapshot(commit) / filename;
  make_dirs(link.parent_path());
  std::string target = "../../";
  for (char c : filename)
    if (c == '/') target += "../";
  target += "blobs/" + etag;
  std::error_code ec;
  if (fs::is_symlink(link, ec) && fs::read_symlink(link, ec).string() == target) return;
  const fs::path temp = link.string() + unique_suffix();
  if (::symlink(target.c_str(), temp.c_str()) != 0)
    fail(ExitCode::failure, "cannot create the link {}: {}", temp.string(), std::strerror(errno));
  if (::rename(temp.c_str(), link.c_str()) != 0) {
    const int err = errno;
    ::unlink(temp.c_str());
    fail(ExitCode::failure, "cannot place the link {}: {}", link.string(), std::strerror(err));
  }
}

bool CacheLayout::snapshot_file_present(const std::string& commit, const std::string& filename) const {
  std::error_code ec;
  return fs::is_regular_file(snapshot(commit) / filename, ec);  // follows the link to its blob
}

}  // namespace flare::hub
