// One HTTP connection context (a libcurl easy handle) used by one thread at a time: a request
// is performed exactly as asked, without following redirects (the caller decides where the
// token may go) and without content decoding (sizes and hashes are of the stored bytes). A 2xx
// body goes to the caller's sink as it arrives; any other body is kept (capped) for the error
// message. Keep-alive connections are reused across requests on the same session.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace flare::hub {

struct HttpResponse {
  long status = 0;
  std::map<std::string, std::string> headers;  // lower-case names, of the final response only
  std::string body;                            // non-2xx bodies, or 2xx without a sink (capped)
  std::string redirect_url;                    // a 3xx's Location, made absolute

  std::string header(const std::string& lower_name) const {
    const auto it = headers.find(lower_name);
    return it == headers.end() ? std::string() : it->second;
  }
};

// Receives a 2xx body piece by piece, with the response's status and headers (already complete);
// returning false aborts the transfer (a TransportError with `aborted_by_sink` set).
using BodySink = std::function<bool(const HttpResponse& head, const char* data, std::size_t size)>;

// A failure below HTTP: DNS, connect, TLS, a dropped connection, a stall, or the sink aborting.
struct TransportError {
  std::string message;
  bool aborted_by_sink = false;
  bool connect_failed = false;  // never reached the server: DNS or connect
};

struct HttpRequest {
  std::string method = "GET";  // GET or HEAD
  std::string url;
  std::vector<std::string> headers;                  // "Name: value"
  std::optional<std::pair<std::uint64_t, std::uint64_t>> range;  // inclusive bytes
  std::size_t max_captured_body = 1u << 20;          // for non-2xx, and 2xx without a sink
};

class HttpSession {
 public:
  HttpSession();
  ~HttpSession();
  HttpSession(const HttpSession&) = delete;
  HttpSession& operator=(const HttpSession&) = delete;

  // Throws TransportError on a failure below HTTP, flare::Error when libcurl is unavailable.
  HttpResponse perform(const HttpRequest& request, const BodySink* sink = nullptr);

 private:
  void* handle_ = nullptr;  // CURL*
};

// "scheme://host:port" of an absolute URL (lower-case scheme and host; default ports made
// explicit), or "" when the URL is not absolute http(s).
std::string url_origin(const std::string& url);

}  // namespace flare::hub
