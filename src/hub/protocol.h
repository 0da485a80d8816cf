// The Hugging Face Hub's HTTP protocol, as plain parsers over response bytes and headers: the
// revision API (revision -> commit), the tree API (one page of file entries) and its `Link`
// pagination, `Retry-After`, `Content-Range`, ETags, the safetensors index, and the error
// classification of a failed response (status + `X-Error-Code`). Nothing here touches the
// network; every function treats its input as hostile and throws flare::Error(fetch) naming what
// was wrong, so the transfer code only ever sees validated values.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace flare::hub {

// 40 lowercase hex digits: a git commit or a git blob id.
bool is_commit_id(std::string_view text);
// 64 lowercase hex digits: a SHA-256 (LFS object id).
bool is_sha256_hex(std::string_view text);

// A repository-relative path that is safe to place under a snapshot directory: no empty, "." or
// ".." segments, no leading "/", no backslash, NUL or control characters, at most 1024 bytes.
bool is_safe_repo_path(std::string_view path);

// "org/name": letters, digits, '-', '_', '.', one '/', no "..", at most 96 characters a side.
bool is_repository_id(std::string_view repository);

// A branch, tag or commit usable as a ref file name: printable ASCII without spaces, no ".."
// segments, no leading or trailing '/', at most 256 bytes.
bool is_revision_name(std::string_view revision);

// `GET /api/models/{repo}/revision/{rev}`: the body's "sha".
std::string parse_revision_commit(std::string_view body);

struct TreeEntry {
  std::string path;
  bool is_file = false;           // "file"; directories are listed but never downloaded
  std::uint64_t size = 0;         // bytes of the file (the LFS object's size for LFS files)
  std::string oid;                // git blob id (40 hex)
  std::optional<std::string> lfs_sha256;  // LFS/Xet files: the content's SHA-256 (64 hex)

  // The blob name in the hub cache and the ETag the server sends: the LFS SHA-256, else the git
  // blob id.
  const std::string& etag() const { return lfs_sha256 ? *lfs_sha256 : oid; }
};

// One page of `GET /api/models/{repo}/tree/{commit}`: a JSON array of entries.
std::vector<TreeEntry> parse_tree_page(std::string_view body);

// The `rel="next"` target of a `Link` header, if any.
std::optional<std::string> parse_link_next(std::string_view header);

// `Retry-After`: delta seconds or an HTTP date (relative to `now`); nullopt when malformed.
// The result is clamped to [0, 1 hour].
std::optional<std::chrono::seconds> parse_retry_after(std::string_view header,
                                                      std::chrono::system_clock::time_point now);

struct ContentRange {
  std::uint64_t first = 0, last = 0;  // inclusive; absent for "bytes */TOTAL"
  bool unsatisfied = false;           // "bytes */TOTAL"
  std::uint64_t total = 0;
};
// `Content-Range: bytes FIRST-LAST/TOTAL` or `bytes */TOTAL`.
std::optional<ContentRange> parse_content_range(std::string_view header);

// W/"abc" -> abc.
std::string normalize_etag(std::string_view header);

// The shard file names a `model.safetensors.index.json` maps tensors to, sorted and distinct.
// Every name must be a top-level file ending in .safetensors.
std::vector<std::string> parse_index_shards(std::string_view body);

// Percent-encoding for one URL path segment (everything but unreserved characters), and for a
// repository path (segment by segment, keeping '/').
std::string encode_segment(std::string_view text);
std::string encode_path(std::string_view path);

// What a non-2xx response means, from its status and the Hub's X-Error-Code / X-Error-Message.
enum class Failure {
  repo_not_found,      // 404 RepoNotFound, or 401 without a more specific code
  gated,               // 401/403 GatedRepo
  revision_not_found,  // 404 RevisionNotFound
  entry_not_found,     // 404 EntryNotFound
  bad_token,           // 401 "Invalid credentials in Authorization header"
  forbidden,           // another 403 (disabled repository, a token without permission)
  range_not_satisfiable,  // 416
  transient,           // 408, 429, 5xx: retried with backoff
  other,               // anything else
};
Failure classify_failure(long status, std::string_view error_code, std::string_view error_message);

// The error body's message: `{"error": "..."}` (or a list of them), cut to 300 characters;
// empty when the body is not that shape.
std::string error_body_message(std::string_view body);

}  // namespace flare::hub
