#include "hub/http_session.h"

#include <algorithm>
#include <cctype>

#include "common/error.h"
#include "hub/curl_library.h"

namespace flare::hub {
namespace {

constexpr std::size_t kMaxHeaderLines = 200;

struct TransferState {
  const HttpRequest* request = nullptr;
  const BodySink* sink = nullptr;
  HttpResponse response;
  std::size_t n_header_lines = 0;
  bool sink_aborted = false;
};

std::string lower(std::string text) {
  std::transform(text.begin(), text.end(), text.begin(), [](unsigned char c) { return std::tolower(c); });
  return text;
}

std::size_t on_header(char* data, std::size_t size, std::size_t n, void* user) {
  auto* state = static_cast<TransferState*>(user);
  const std::size_t bytes = size * n;
  std::string line(data, bytes);
  while (!line.empty() && (line.back() == '\r' || line.back() == '\n')) line.pop_back();
  if (line.rfind("HTTP/", 0) == 0) {
    // A new response (after 100 Continue, for instance): only the last one's headers count.
    state->response.headers.clear();
    state->n_header_lines = 0;
    const std::size_t space = line.find(' ');
    state->response.status = space == std::string::npos ? 0 : std::atol(line.c_str() + space + 1);
    return bytes;
  }
  if (++state->n_header_lines > kMaxHeaderLines) return 0;  // hostile: abort
  const std::size_t colon = line.find(':');
  if (colon == std::string::npos || colon == 0) return bytes;
  std::string value = line.substr(colon + 1);
  const std::size_t first = value.find_first_not_of(" \t");
  value = first == std::string::npos ? "" : value.substr(first);
  while (!value.empty() && (value.back() == ' ' || value.back() == '\t')) value.pop_back();
  state->response.headers[lower(line.substr(0, colon))] = value.substr(0, 16384);
  return bytes;
}

std::size_t on_body(char* data, std::size_t size, std::size_t n, void* user) {
  auto* state = static_cast<TransferState*>(user);
  const std::size_t bytes = size * n;
  const long status = state->response.status;
  if (status >= 200 && status < 300 && state->sink) {
    if (!(*state->sink)(state->response, data, bytes)) {
      state->sink_aborted = true;
      return 0;
    }
    return bytes;
  }
  std::string& body = state->response.body;
  const std::size_t room = state->request->max_captured_body > body.size() ? state->request->max_captured_body - body.size() : 0;
  body.append(data, std::min(room, bytes));
  return bytes;
}

}  // namespace

HttpSession::HttpSession() {
  handle_ = curl_library().easy_init();
  if (!handle_) fail(ExitCode::fetch, "libcurl could not create a transfer handle");
}

HttpSession::~HttpSession() {
  if (handle_) curl_library().easy_cleanup(static_cast<CURL*>(handle_));
}

HttpResponse HttpSession::perform(const HttpRequest& request, const BodySink* sink) {
  const CurlLibrary& curl = curl_library();
  CURL* h = static_cast<CURL*>(handle_);
  curl.easy_reset(h);  // keeps live connections, clears options
  TransferState state;
  state.request = &request;
  state.sink = sink;

  curl_slist* headers = nullptr;
  for (const auto& header : request.headers) headers = curl.slist_append(headers, header.c_str());
  // The stored bytes, never a compressed form: sizes and hashes are checked against them.
  headers = curl.slist_append(headers, "Accept-Encoding: identity");
  const std::string range =
      request.range ? std::to_string(request.range->first) + "-" + std::to_string(request.range->second) : "";

  curl.easy_setopt(h, CURLOPT_URL, request.url.c_str());
  curl.easy_setopt(h, CURLOPT_HTTPHEADER, headers);
  curl.easy_setopt(h, CURLOPT_FOLLOWLOCATION, 0L);
  curl.easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
  curl.easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
  curl.easy_setopt(h, CURLOPT_USERAGENT, "flare/0.1 (+libcurl)");
  curl.easy_setopt(h, CURLOPT_CONNECTTIMEOUT, 15L);
  // A stalled transfer (under 1 KiB/s for 60 s) fails and is retried from where it stopped.
  curl.easy_setopt(h, CURLOPT_LOW_SPEED_LIMIT, 1024L);
  curl.easy_setopt(h, CURLOPT_LOW_SPEED_TIME, 60L);
  curl.easy_setopt(h, CURLOPT_BUFFERSIZE, 512L * 1024L);
  curl.easy_setopt(h, CURLOPT_HEADERFUNCTION, &on_header);
  curl.easy_setopt(h, CURLOPT_HEADERDATA, &state);
  curl.easy_setopt(h, CURLOPT_WRITEFUNCTION, &on_body);
  curl.easy_setopt(h, CURLOPT_WRITEDATA, &state);
  if (request.method == "HEAD") curl.easy_setopt(h, CURLOPT_NOBODY, 1L);
  if (request.range) curl.easy_setopt(h, CURLOPT_RANGE, range.c_str());

  const CURLcode code = curl.easy_perform(h);
  curl.slist_free_all(headers);
  if (code != CURLE_OK) {
    TransportError error;
    error.aborted_by_sink = state.sink_aborted;
    error.connect_failed = code == CURLE_COULDNT_RESOLVE_HOST || code == CURLE_COULDNT_CONNECT ||
                           code == CURLE_COULDNT_RESOLVE_PROXY;
    error.message = curl.easy_strerror(code);
    throw error;
  }
  long status = 0;
  curl.easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
  state.response.status = status;
  if (status >= 300 && status < 400) {
    char* location = nullptr;
    if (curl.easy_getinfo(h, CURLINFO_REDIRECT_URL, &location) == CURLE_OK && location)
      state.response.redirect_url = location;
  }
  return std::move(state.response);
}

std::string url_origin(const std::string& url) {
  const std::size_t scheme_end = url.find("://");
  if (scheme_end == std::string::npos) return "";
  const std::string scheme = lower(url.substr(0, scheme_end));
  if (scheme != "http" && scheme != "https") return "";
  const std::size_t host_start = scheme_end + 3;
  const std::size_t host_end = url.find_first_of("/?#", host_start);
  std::string authority = lower(url.substr(host_start, host_end == std::string::npos ? std::string::npos : host_end - host_start));
  if (const std::size_t at = authority.rfind('@'); at != std::string::npos) authority = authority.substr(at + 1);
  if (authority.empty()) return "";
  const std::size_t bracket = authority.rfind(']');
  const std::size_t colon = authority.rfind(':');
  const bool has_port = colon != std::string::npos && (bracket == std::string::npos || colon > bracket);
  if (!has_port) authority += scheme == "https" ? ":443" : ":80";
  return scheme + "://" + authority;
}

}  // namespace flare::hub
