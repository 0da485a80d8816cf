#include "hub/client.h"

#include <algorithm>
#include <fstream>
#include <thread>

#include "common/error.h"
#include "hub/protocol.h"

namespace flare::hub {
namespace {

constexpr int kMaxRedirects = 10;

bool transient_status(long status) { return status == 408 || status == 429 || (status >= 500 && status <= 599); }

std::string request_id_suffix(const HttpResponse& response) {
  const std::string id = response.header("x-request-id");
  if (id.empty() || id.size() > 100) return "";
  return fmt::format(" (request id {})", id);
}

}  // namespace

HubClient::HubClient(HubSettings settings) : settings_(std::move(settings)) {
  while (!settings_.endpoint.empty() && settings_.endpoint.back() == '/') settings_.endpoint.pop_back();
  origin_ = url_origin(settings_.endpoint);
  if (origin_.empty())
    fail_usage("[hub] endpoint must be an http:// or https:// URL, got \"{}\"", settings_.endpoint);
}

std::string HubClient::api_url(const std::string& repository, const std::string& suffix) const {
  return settings_.endpoint + "/api/models/" + repository + suffix;
}

std::string HubClient::resolve_url(const std::string& repository, const std::string& commit,
                                   const std::string& filename) const {
  return settings_.endpoint + "/" + repository + "/resolve/" + encode_segment(commit) + "/" + encode_path(filename);
}

std::vector<std::string> HubClient::headers_for(const std::string& url) const {
  std::vector<std::string> headers;
  if (settings_.token && url_origin(url) == origin_) headers.push_back("Authorization: Bearer " + *settings_.token);
  return headers;
}

void HubClient::wait_before_retry(int attempt, const HttpResponse* response) const {
  std::chrono::milliseconds delay = settings_.retry.first_delay;
  for (int i = 1; i < attempt && delay < settings_.retry.max_delay; ++i) delay *= 2;
  delay = std::min(delay, settings_.retry.max_delay);
  if (response) {
    const std::string header = response->header("retry-after");
    if (!header.empty())
      if (auto seconds = parse_retry_after(header, std::chrono::system_clock::now()))
        delay = std::min<std::chrono::milliseconds>(*seconds, settings_.retry.max_retry_after);
  }
  std::this_thread::sleep_for(delay);
}

HttpResponse HubClient::get(HttpSession& session, const std::string& url, const Target& target,
                            std::size_t max_body) const {
  for (int attempt = 1;; ++attempt) {
    std::string current = url;
    std::optional<HttpResponse> failure;
    try {
      for (int hop = 0;; ++hop) {
        HttpRequest request;
        request.url = current;
        request.headers = headers_for(current);
        request.max_captured_body = max_body;
        HttpResponse response = session.perform(request);
        if (response.status >= 300 && response.status < 400 && !response.redirect_url.empty()) {
          if (hop >= kMaxRedirects) fail(ExitCode::fetch, "{}: too many redirects from {}", target.repository, url);
          current = response.redirect_url;
          continue;
        }
        if (response.status >= 200 && response.status < 300) {
          if (response.body.size() >= max_body)
            fail(ExitCode::fetch, "{}: the hub's answer from {} is larger than {} bytes", target.repository, current, max_body);
          return response;
        }
        if (!transient_status(response.status) || attempt >= settings_.retry.n_attempts)
          fail_status(response, target, current);
        failure = std::move(response);
        break;
      }
    } catch (const TransportError& error) {
      const int limit = error.connect_failed ? std::min(3, settings_.retry.n_attempts) : settings_.retry.n_attempts;
      if (attempt >= limit) fail_unreachable(error.message, target);
    }
    wait_before_retry(attempt, failure ? &*failure : nullptr);
  }
}

FileLocation HubClient::locate(HttpSession& session, const Target& target, const std::string& commit) const {
  const std::string start = resolve_url(target.repository, commit, target.filename);
  for (int attempt = 1;; ++attempt) {
    std::optional<HttpResponse> failure;
    try {
      FileLocation location;
      std::string current = start;
      for (int hop = 0;; ++hop) {
        HttpRequest request;
        request.method = "HEAD";
        request.url = current;
        request.headers = headers_for(current);
        HttpResponse response = session.perform(request);
        if (location.commit.empty()) location.commit = response.header("x-repo-commit");
        if (location.etag.empty()) {
          const std::string linked = response.header("x-linked-etag");
          location.etag = normalize_etag(linked.empty() ? response.header("etag") : linked);
        }
        if (!location.size) {
          const std::string linked = response.header("x-linked-size");
          if (!linked.empty()) {
            location.size = std::strtoull(linked.c_str(), nullptr, 10);
          } else if (response.status >= 200 && response.status < 300 && !response.header("content-length").empty()) {
            location.size = std::strtoull(response.header("content-length").c_str(), nullptr, 10);
          }
        }
        if (response.status >= 300 && response.status < 400 && !response.redirect_url.empty()) {
          if (hop >= kMaxRedirects) fail(ExitCode::fetch, "{}: too many redirects for {}", target.repository, target.filename);
          // A same-origin redirect without the Hub's headers (a renamed repository) is followed;
          // any other is where the bytes live: the transfer goes there, without the token.
          const bool relative = url_origin(response.redirect_url) == origin_ && response.header("x-repo-commit").empty();
          current = response.redirect_url;
          if (relative) {
            location = FileLocation{};
            continue;
          }
          location.url = current;
          return location;
        }
        if (response.status >= 200 && response.status < 300) {
          location.url = current;
          return location;
        }
        if (!transient_status(response.status) || attempt >= settings_.retry.n_attempts)
          fail_status(response, target, current);
        failure = std::move(response);
        break;
      }
    } catch (const TransportError& error) {
      const int limit = error.connect_failed ? std::min(3, settings_.retry.n_attempts) : settings_.retry.n_attempts;
      if (attempt >= limit) fail_unreachable(error.message, target);
    }
    wait_before_retry(attempt, failure ? &*failure : nullptr);
  }
}

void HubClient::fail_status(const HttpResponse& response, const Target& target, const std::string& url) const {
  const std::string code = response.header("x-error-code");
  const std::string header_message = response.header("x-error-message");
  std::string detail = header_message.empty() ? error_body_message(response.body) : header_message.substr(0, 300);
  const std::string why = detail.empty() ? "" : fmt::format(" ({})", detail);
  const std::string id = request_id_suffix(response);
  const std::string& repo = target.repository;
  const std::string page = settings_.endpoint + "/" + repo;
  switch (classify_failure(response.status, code, header_message)) {
    case Failure::gated:
      if (settings_.token)
        fail(ExitCode::fetch,
             "{} is a gated repository and the account of the token from {} has no access yet: accept the license "
             "at {} with that account, then run this again{}",
             repo, settings_.token_source, page, id);
      fail(ExitCode::fetch, "{} is a gated repository: accept the license at {}, then pass --token-file FILE (a Hub "
                            "token of that account){}", repo, page, id);
    case Failure::repo_not_found:
      if (settings_.token)
        fail(ExitCode::fetch, "repository {} was not found on {}, or the token from {} cannot see it: check the "
                              "name{}", repo, settings_.endpoint, settings_.token_source, id);
      fail(ExitCode::fetch, "repository {} was not found on {}: check the name; a private repository needs "
                            "--token-file FILE{}", repo, settings_.endpoint, id);
    case Failure::revision_not_found:
      fail(ExitCode::fetch, "{} has no revision '{}': name an existing branch, tag or commit after '@'{}", repo,
           target.revision, id);
    case Failure::entry_not_found:
      fail(ExitCode::fetch, "{}@{} has no file {}: the repository is not a complete checkpoint at that revision{}",
           repo, target.revision, target.filename.empty() ? url : target.filename, id);
    case Failure::bad_token:
      fail(ExitCode::fetch, "{} rejected the token from {}: replace it with a valid Hub token{}", settings_.endpoint,
           settings_.token_source, id);
    case Failure::forbidden:
      fail(ExitCode::fetch, "{} refused access to {}{}: check the repository's page {} and the token's permissions{}",
           settings_.endpoint, repo, why, page, id);
    case Failure::transient:
      throw HubUnreachable(fmt::format("fetching {} from {} still failed with HTTP {}{} after {} attempts: run this "
                                       "again later{}", repo, url_origin(url), response.status, why,
                                       settings_.retry.n_attempts, id));
    default:
      fail(ExitCode::fetch, "fetching {} from {} failed with HTTP {}{}{}", repo, url_origin(url), response.status,
           why, id);
  }
}

void HubClient::fail_unreachable(const std::string& reason, const Target& target) const {
  throw HubUnreachable(fmt::format(
      "cannot reach {} for {} ({}): check the network or [hub] endpoint, or pass --offline to use the hub cache alone",
      settings_.endpoint, target.repository, reason));
}

std::optional<std::string> read_token_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail_usage("cannot read the token file {}", path);
  std::string text(4097, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<std::size_t>(in.gcount()));
  if (text.size() > 4096) fail_usage("the token file {} is larger than 4 KiB; it should hold one Hub token", path);
  const auto space = [](char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; };
  while (!text.empty() && space(text.back())) text.pop_back();
  std::size_t start = 0;
  while (start < text.size() && space(text[start])) ++start;
  text = text.substr(start);
  if (text.empty()) return std::nullopt;
  for (char c : text)
    if (static_cast<unsigned char>(c) <= 0x20 || static_cast<unsigned char>(c) >= 0x7f)
      fail_usage("the token file {} holds characters a Hub token cannot have (one token on one line expected)", path);
  return text;
}

}  // namespace flare::hub
