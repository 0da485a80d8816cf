#include "hub/protocol.h"

#include <time.h>

#include <algorithm>
#include <cctype>
#include <set>

#include <nlohmann/json.hpp>

#include "common/error.h"

namespace flare::hub {
namespace {

using nlohmann::json;

bool all_lower_hex(std::string_view text) {
  return std::all_of(text.begin(), text.end(),
                     [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

// JSON larger than this is not a plausible API answer (a tree page is a few hundred KiB).
constexpr std::size_t kMaxJsonBytes = 64u << 20;

json parse_json(std::string_view body, const char* what) {
  if (body.size() > kMaxJsonBytes) fail(ExitCode::fetch, "the hub's {} answer is larger than 64 MiB", what);
  json value = json::parse(body.begin(), body.end(), nullptr, false);
  if (value.is_discarded()) fail(ExitCode::fetch, "the hub's {} answer is not valid JSON", what);
  return value;
}

std::string_view trim(std::string_view text) {
  while (!text.empty() && (text.front() == ' ' || text.front() == '\t')) text.remove_prefix(1);
  while (!text.empty() && (text.back() == ' ' || text.back() == '\t' || text.back() == '\r' || text.back() == '\n'))
    text.remove_suffix(1);
  return text;
}

std::optional<std::uint64_t> parse_decimal(std::string_view text) {
  if (text.empty() || text.size() > 19) return std::nullopt;
  std::uint64_t value = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return std::nullopt;
    value = value * 10 + static_cast<std::uint64_t>(c - '0');
  }
  return value;
}

// Sizes above 2^53 cannot come from a JSON number without loss, and no checkpoint file is that big.
constexpr std::uint64_t kMaxFileBytes = 1ull << 53;

std::uint64_t json_size(const json& value, const char* what) {
  if (!value.is_number_unsigned() && !(value.is_number_integer() && value.get<std::int64_t>() >= 0))
    fail(ExitCode::fetch, "the hub's tree answer has an invalid {}", what);
  const std::uint64_t size = value.get<std::uint64_t>();
  if (size > kMaxFileBytes) fail(ExitCode::fetch, "the hub's tree answer has an implausible {}", what);
  return size;
}

}  // namespace

bool is_commit_id(std::string_view text) { return text.size() == 40 && all_lower_hex(text); }
bool is_sha256_hex(std::string_view text) { return text.size() == 64 && all_lower_hex(text); }

bool is_safe_repo_path(std::string_view path) {
  if (path.empty() || path.size() > 1024 || path.front() == '/' || path.back() == '/') return false;
  for (char c : path)
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f || c == '\\') return false;
  std::size_t start = 0;
  while (start <= path.size()) {
    const std::size_t end = std::min(path.find('/', start), path.size());
    const std::string_view segment = path.substr(start, end - start);
    if (segment.empty() || segment == "." || segment == "..") return false;
    start = end + 1;
  }
  return true;
}

bool is_repository_id(std::string_view repository) {
  const std::size_t slash = repository.find('/');
  if (slash == std::string_view::npos || slash == 0 || slash + 1 == repository.size()) return false;
  if (slash > 96 || repository.size() - slash - 1 > 96) return false;
  if (repository.find('/', slash + 1) != std::string_view::npos || repository.find("..") != std::string_view::npos)
    return false;
  const auto allowed = [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.' || c == '/';
  };
  if (!std::all_of(repository.begin(), repository.end(), allowed)) return false;
  return repository[0] != '.' && repository[slash + 1] != '.';
}

bool is_revision_name(std::string_view revision) {
  if (revision.empty() || revision.size() > 256 || revision.front() == '/' || revision.back() == '/') return false;
  for (char c : revision)
    if (static_cast<unsigned char>(c) <= 0x20 || static_cast<unsigned char>(c) >= 0x7f || c == '\\') return false;
  std::size_t start = 0;
  while (start <= revision.size()) {
    const std::size_t end = std::min(revision.find('/', start), revision.size());
    const std::string_view segment = revision.substr(start, end - start);
    if (segment.empty() || segment == "." || segment == ".." || segment.front() == '.') return false;
    start = end + 1;
  }
  return true;
}

std::string parse_revision_commit(std::string_view body) {
  const json value = parse_json(body, "revision");
  if (!value.is_object()) fail(ExitCode::fetch, "the hub's revision answer is not a JSON object");
  const auto it = value.find("sha");
  if (it == value.end() || !it->is_string() || !is_commit_id(it->get<std::string>()))
    fail(ExitCode::fetch, "the hub's revision answer has no valid commit (\"sha\": 40 lowercase hex digits)");
  return it->get<std::string>();
}

std::vector<TreeEntry> parse_tree_page(std::string_view body) {
  const json value = parse_json(body, "tree");
  if (!value.is_array()) fail(ExitCode::fetch, "the hub's tree answer is not a JSON array");
  std::vector<TreeEntry> entries;
  entries.reserve(value.size());
  for (const json& item : value) {
    if (!item.is_object()) fail(ExitCode::fetch, "the hub's tree answer has an entry that is not an object");
    TreeEntry entry;
    const auto type = item.find("type");
    const auto path = item.find("path");
    if (type == item.end() || !type->is_string() || path == item.end() || !path->is_string())
      fail(ExitCode::fetch, "the hub's tree answer has an entry without a type or path");
    entry.path = path->get<std::string>();
    if (!is_safe_repo_path(entry.path))
      fail(ExitCode::fetch, "the hub's tree answer lists an unsafe path \"{}\"", entry.path.substr(0, 120));
    const std::string kind = type->get<std::string>();
    if (kind == "directory") {
      entries.push_back(std::move(entry));
      continue;
    }
    if (kind != "file") fail(ExitCode::fetch, "the hub's tree answer has an entry of unknown type \"{}\"", kind.substr(0, 40));
    entry.is_file = true;
    const auto oid = item.find("oid");
    if (oid == item.end() || !oid->is_string() || !is_commit_id(oid->get<std::string>()))
      fail(ExitCode::fetch, "the hub's tree answer has no valid oid for {}", entry.path);
    entry.oid = oid->get<std::string>();
    const auto size = item.find("size");
    if (size == item.end()) fail(ExitCode::fetch, "the hub's tree answer has no size for {}", entry.path);
    entry.size = json_size(*size, "size");
    const auto lfs = item.find("lfs");
    if (lfs != item.end() && !lfs->is_null()) {
      if (!lfs->is_object()) fail(ExitCode::fetch, "the hub's tree answer has an invalid lfs field for {}", entry.path);
      const auto lfs_oid = lfs->find("oid");
      if (lfs_oid == lfs->end() || !lfs_oid->is_string() || !is_sha256_hex(lfs_oid->get<std::string>()))
        fail(ExitCode::fetch, "the hub's tree answer has no valid LFS SHA-256 for {}", entry.path);
      entry.lfs_sha256 = lfs_oid->get<std::string>();
      if (const auto lfs_size = lfs->find("size"); lfs_size != lfs->end()) {
        if (json_size(*lfs_size, "LFS size") != entry.size)
          fail(ExitCode::fetch, "the hub's tree answer gives {} two different sizes", entry.path);
      }
    }
    entries.push_back(std::move(entry));
  }
  return entries;
}

std::optional<std::string> parse_link_next(std::string_view header) {
  // Link: <url1>; rel="next", <url2>; rel="last"
  std::size_t pos = 0;
  while (pos < header.size()) {
    const std::size_t open = header.find('<', pos);
    if (open == std::string_view::npos) return std::nullopt;
    const std::size_t close = header.find('>', open + 1);
    if (close == std::string_view::npos) return std::nullopt;
    const std::string_view url = header.substr(open + 1, close - open - 1);
    const std::size_t next_link = header.find('<', close + 1);
    std::string_view params = header.substr(close + 1, next_link == std::string_view::npos ? std::string_view::npos
                                                                                            : next_link - close - 1);
    std::string lowered(params);
    std::transform(lowered.begin(), lowered.end(), lowered.begin(), [](char c) { return std::tolower(static_cast<unsigned char>(c)); });
    lowered.erase(std::remove_if(lowered.begin(), lowered.end(), [](char c) { return c == ' ' || c == '"'; }), lowered.end());
    if (lowered.find(";rel=next") != std::string::npos && !url.empty() && url.size() <= 8192 &&
        std::none_of(url.begin(), url.end(), [](char c) { return static_cast<unsigned char>(c) <= 0x20; }))
      return std::string(url);
    if (next_link == std::string_view::npos) return std::nullopt;
    pos = next_link;
  }
  return std::nullopt;
}

std::optional<std::chrono::seconds> parse_retry_after(std::string_view header,
                                                      std::chrono::system_clock::time_point now) {
  header = trim(header);
  constexpr std::int64_t kMaxSeconds = 3600;
  if (auto seconds = parse_decimal(header))
    return std::chrono::seconds(std::min<std::uint64_t>(*seconds, kMaxSeconds));
  // IMF-fixdate: "Sun, 06 Nov 1994 08:49:37 GMT".
  if (header.size() != 29 || header.substr(25) != " GMT") return std::nullopt;
  const std::string text(header);
  tm parts{};
  const char* end = strptime(text.c_str(), "%a, %d %b %Y %H:%M:%S GMT", &parts);
  if (!end || *end != '\0') return std::nullopt;
  const time_t when = timegm(&parts);
  if (when == static_cast<time_t>(-1)) return std::nullopt;
  const std::int64_t delta = static_cast<std::int64_t>(when) - std::chrono::system_clock::to_time_t(now);
  return std::chrono::seconds(std::clamp<std::int64_t>(delta, 0, kMaxSeconds));
}

std::optional<ContentRange> parse_content_range(std::string_view header) {
  header = trim(header);
  if (header.substr(0, 6) != "bytes ") return std::nullopt;
  header.remove_prefix(6);
  const std::size_t slash = header.find('/');
  if (slash == std::string_view::npos) return std::nullopt;
  ContentRange range;
  const auto total = parse_decimal(header.substr(slash + 1));
  if (!total) return std::nullopt;
  range.total = *total;
  const std::string_view span = header.substr(0, slash);
  if (span == "*") {
    range.unsatisfied = true;
    return range;
  }
  const std::size_t dash = span.find('-');
  if (dash == std::string_view::npos) return std::nullopt;
  const auto first = parse_decimal(span.substr(0, dash));
  const auto last = parse_decimal(span.substr(dash + 1));
  if (!first || !last || *first > *last || *last >= range.total) return std::nullopt;
  range.first = *first;
  range.last = *last;
  return range;
}

std::string normalize_etag(std::string_view header) {
  header = trim(header);
  if (header.substr(0, 2) == "W/") header.remove_prefix(2);
  if (header.size() >= 2 && header.front() == '"' && header.back() == '"') header = header.substr(1, header.size() - 2);
  return std::string(header);
}

std::vector<std::string> parse_index_shards(std::string_view body) {
  const json value = parse_json(body, "safetensors index");
  if (!value.is_object()) fail(ExitCode::fetch, "model.safetensors.index.json is not a JSON object");
  const auto map = value.find("weight_map");
  if (map == value.end() || !map->is_object() || map->empty())
    fail(ExitCode::fetch, "model.safetensors.index.json has no weight_map");
  std::set<std::string> shards;
  for (const auto& [tensor, file] : map->items()) {
    if (!file.is_string()) fail(ExitCode::fetch, "model.safetensors.index.json maps {} to a non-string", tensor.substr(0, 80));
    const std::string name = file.get<std::string>();
    if (!is_safe_repo_path(name) || name.find('/') != std::string::npos || name.size() <= 12 ||
        name.substr(name.size() - 12) != ".safetensors")
      fail(ExitCode::fetch, "model.safetensors.index.json names an invalid shard \"{}\"", name.substr(0, 120));
    shards.insert(name);
  }
  return {shards.begin(), shards.end()};
}

std::string encode_segment(std::string_view text) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : text) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

std::string encode_path(std::string_view path) {
  std::string out;
  std::size_t start = 0;
  while (true) {
    const std::size_t slash = path.find('/', start);
    out += encode_segment(path.substr(start, slash == std::string_view::npos ? std::string_view::npos : slash - start));
    if (slash == std::string_view::npos) break;
    out += '/';
    start = slash + 1;
  }
  return out;
}

Failure classify_failure(long status, std::string_view error_code, std::string_view error_message) {
  error_code = trim(error_code);
  if (error_code == "GatedRepo" && (status == 401 || status == 403)) return Failure::gated;
  if (error_code == "RepoNotFound") return Failure::repo_not_found;
  if (error_code == "RevisionNotFound") return Failure::revision_not_found;
  if (error_code == "EntryNotFound") return Failure::entry_not_found;
  if (status == 408 || status == 429 || (status >= 500 && status <= 599)) return Failure::transient;
  if (status == 416) return Failure::range_not_satisfiable;
  if (status == 401) {
    return trim(error_message) == "Invalid credentials in Authorization header" ? Failure::bad_token
                                                                                 : Failure::repo_not_found;
  }
  if (status == 403) return Failure::forbidden;
  if (status == 404) return Failure::repo_not_found;
  return Failure::other;
}

std::string error_body_message(std::string_view body) {
  if (body.size() > (1u << 20)) return "";
  const json value = json::parse(body.begin(), body.end(), nullptr, false);
  if (!value.is_object()) return "";
  const auto it = value.find("error");
  if (it == value.end()) return "";
  std::string message;
  if (it->is_string()) {
    message = it->get<std::string>();
  } else if (it->is_array()) {
    for (const json& item : *it)
      if (item.is_string()) message += (message.empty() ? "" : "; ") + item.get<std::string>();
  }
  for (char& c : message)
    if (static_cast<unsigned char>(c) < 0x20) c = ' ';
  if (message.size() > 300) message = message.substr(0, 300) + "...";
  return message;
}

}  // namespace flare::hub
