// The route table: method + path -> adapter, with authentication, the JSON limits and error
// shapes applied in one place. Plain types in and out (no Boost), so every route is testable
// without sockets; server.cpp runs the GenerationJobs it returns.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "server/api.h"
#include "server/auth.h"
#include "server/frontend.h"
#include "server/metrics.h"

namespace flare::server {

// Derived limits (spec: "Queue, frontend workers, event capacity, body limit: concurrency and
// recipe limits"). Times in milliseconds.
struct ServerLimits {
  size_t max_body_bytes = 8u << 20;
  int32_t max_json_depth = 64;
  uint32_t max_header_bytes = 16u << 10;
  int32_t max_connections = 512;      // at the cap, the oldest connection still sending its request goes
  int32_t n_threads = 4;
  int64_t header_timeout_ms = 10'000;  // from the first byte to the end of the headers
  int64_t body_timeout_ms = 60'000;    // from the end of the headers to the end of the body
  int64_t idle_timeout_ms = 60'000;    // keep-alive wait for the next request
  int64_t write_timeout_ms = 60'000;   // one write to a client that stopped reading
  int64_t drain_timeout_ms = 60'000;   // SIGTERM: how long active requests may finish
};

// Body limit: a full context of text (~16 bytes per token after JSON escaping) plus 1 MiB of
// tools and framing, at most 64 MiB. Connections: what the open-file limit allows
// (connection_limits.h), never fewer than every active request plus as many waiting.
ServerLimits derive_limits(const ModelInfo& model, int64_t open_file_limit = 1024);

struct RouteResult {
  HttpResponse response;              // the answer, unless `job` is set
  std::optional<GenerationJob> job;   // a generation for the server to run
  std::string endpoint;               // metrics label, e.g. "/v1/chat/completions"
  ApiStyle style = ApiStyle::openai;
};

class Router {
 public:
  Router(const Frontend& frontend, const ModelInfo& model, std::string api_key, const engine::Engine& engine,
         Metrics& metrics, const ServerLimits& limits);
  RouteResult route(const HttpRequest& request) const;
  const ModelInfo& model() const { return model_; }

 private:
  void route_checked(const HttpRequest& request, const std::string& path, RouteResult& result) const;

  const Frontend& frontend_;
  const ModelInfo& model_;
  ApiKeyAuth auth_;
  const engine::Engine& engine_;
  Metrics& metrics_;
  ServerLimits limits_;
};

}  // namespace flare::server
