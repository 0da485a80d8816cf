// The HTTP server: a Boost.Beast listener on an IPv4 or IPv6 address, a pool of HTTP threads,
// and one session per connection that reads a request under header/body/idle timeouts, routes
// it (router.h), submits generation jobs to the Engine and streams their outputs back.
// Boost stays inside server.cpp. run() blocks until stop() or SIGINT/SIGTERM (when
// handle_signals): the listener closes, idle connections close, active requests drain (up to
// limits.drain_timeout_ms, then they are cancelled), and run() returns.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "server/frontend.h"
#include "server/router.h"

namespace flare::server {

struct ServerOptions {
  std::string host = "127.0.0.1";  // numeric IPv4 or IPv6 (unbracketed, e.g. ::1)
  uint16_t port = 8000;            // 0: an ephemeral port (see Server::port())
  std::string api_key;             // empty: no authentication
  ServerLimits limits;
  bool handle_signals = true;
  // Called once, on an HTTP thread, when stopping begins (before the drain), e.g. to say so.
  std::function<void()> on_stopping;
};

class Server {
 public:
  Server(ServerOptions options, engine::Engine& engine, const Frontend& frontend, ModelInfo model);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Binds and listens; throws flare::Error (usage) for a bad address or a port in use.
  void bind();
  uint16_t port() const;  // the bound port
  // Serves until stop(); binds first if bind() was not called.
  void run();
  // Thread-safe and idempotent; run() returns once active requests drained.
  void stop();
  Metrics& metrics();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace flare::server
