// Requests to one Hub endpoint: API reads (revision, tree pages) and file location (`HEAD
// /resolve`), each with redirects followed by hand so the token goes only to the endpoint's own
// origin (never to a CDN host), and retried with exponential backoff on 408/429/5xx and
// transport failures, honouring Retry-After. Every failure becomes a flare::Error(fetch) that
// names the repository and says what to do.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/error.h"
#include "hub/http_session.h"

namespace flare::hub {

// The Hub could not be reached (no connection, or still 408/429/5xx after every retry): a fetch
// error that a caller holding a usable cached snapshot may fall back from.
class HubUnreachable : public Error {
 public:
  explicit HubUnreachable(std::string message) : Error(ExitCode::fetch, std::move(message)) {}
};

struct RetryPolicy {
  int n_attempts = 5;                                  // per request (transport failures to connect: 3)
  std::chrono::milliseconds first_delay{500};          // doubled after each failure
  std::chrono::milliseconds max_delay{8000};
  std::chrono::milliseconds max_retry_after{300000};   // a longer Retry-After is cut to this
};

struct HubSettings {
  std::string endpoint = "https://huggingface.co";  // no trailing '/'
  std::optional<std::string> token;
  std::string token_source;  // where the token came from, for messages ("--token-file PATH")
  RetryPolicy retry;
};

// What a request was for, so an error can name it.
struct Target {
  std::string repository;
  std::string revision;
  std::string filename;  // empty for API requests
};

// Where a file's bytes come from, from `HEAD /resolve/{commit}/{file}`.
struct FileLocation {
  std::string url;       // the final URL (a CDN URL after a cross-origin redirect)
  std::string etag;      // X-Linked-Etag, else ETag, normalised
  std::string commit;    // X-Repo-Commit
  std::optional<std::uint64_t> size;  // X-Linked-Size, else a 2xx Content-Length
};

class HubClient {
 public:
  explicit HubClient(HubSettings settings);
  const HubSettings& settings() const { return settings_; }

  std::string api_url(const std::string& repository, const std::string& suffix) const;
  std::string resolve_url(const std::string& repository, const std::string& commit, const std::string& filename) const;

  // GET with redirects and retries; a final non-2xx throws. The body is capped at `max_body`.
  HttpResponse get(HttpSession& session, const std::string& url, const Target& target,
                   std::size_t max_body = 64u << 20) const;
  FileLocation locate(HttpSession& session, const Target& target, const std::string& commit) const;

  // Request headers for `url`: the token only when the URL has the endpoint's origin.
  std::vector<std::string> headers_for(const std::string& url) const;

  [[noreturn]] void fail_status(const HttpResponse& response, const Target& target, const std::string& url) const;
  [[noreturn]] void fail_unreachable(const std::string& reason, const Target& target) const;
  // Waits before retry `attempt` (1-based): Retry-After when the response has one, else backoff.
  void wait_before_retry(int attempt, const HttpResponse* response) const;

 private:
  HubSettings settings_;
  std::string origin_;
};

// Reads a token file: surrounding whitespace is dropped; an empty file means no token. A token
// with characters a header cannot carry, or a file over 4 KiB, is a usage error naming the file.
std::optional<std::string> read_token_file(const std::string& path);

}  // namespace flare::hub
