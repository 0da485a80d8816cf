// Boost.Beast listener and connection sessions (server.h). Threads: `limits.n_threads` HTTP
// threads run one io_context; each connection's handlers run on its own strand. The engine
// thread calls a request's sink, which posts the output onto the session's strand, so a
// session's state is only touched on its strand. Streaming responses use chunked encoding.
//
// Connections: the listener always accepts. Sessions still sending their request (or idle
// between requests, or closing) sit in a queue ordered by when they began waiting; at the
// connection cap, each new connection closes the queue's oldest, so stalled clients can neither
// exhaust descriptors nor keep /health and /metrics from answering. Sessions generating or
// writing a response are never evicted.
#include "server/server.h"

#include <atomic>
#include <cerrno>
#include <functional>
#include <chrono>
#include <deque>
#include <list>
#include <mutex>
#include <set>
#include <thread>

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ip/v6_only.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include "common/error.h"

namespace flare::server {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;
using Clock = std::chrono::steady_clock;

class Session;

struct ServerState {
  ServerOptions options;
  engine::Engine& engine;
  Metrics metrics;
  ModelInfo model;
  std::unique_ptr<Router> router;
  std::atomic<bool> stopping{false};
  std::atomic<int32_t> n_connections{0};
  std::atomic<int32_t> n_active_generations{0};
  // Sessions that may be evicted, oldest first (see the file comment). A session adds and removes
  // itself (its destructor too) under `waiting_mutex`, so every pointer here is still alive.
  std::mutex waiting_mutex;
  std::list<Session*> waiting;
  std::mutex sessions_mutex;
  std::set<std::weak_ptr<Session>, std::owner_less<std::weak_ptr<Session>>> sessions;
  asio::io_context ioc;  // last: destroyed first, with the handlers that reference the rest

  ServerState(ServerOptions opts, engine::Engine& eng, ModelInfo info)
      : options(std::move(opts)), engine(eng), model(std::move(info)) {}
};

// Hands engine outputs to the session's strand.
class SessionSink final : public engine::OutputSink {
 public:
  // Holds the session alive until the engine drops the sink after the request's last output.
  SessionSink(std::shared_ptr<Session> session, size_t request_index) : session_(std::move(session)), index_(request_index) {}
  void on_output(engine::StepOutput output) override;

 private:
  std::shared_ptr<Session> session_;
  size_t index_;
};

class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(tcp::socket socket, ServerState& state)
      : stream_(std::move(socket)), state_(state), write_timer_(stream_.get_executor()) {
    state_.metrics.connection_opened();
  }
  ~Session() {
    {
      std::lock_guard lock(state_.waiting_mutex);
      if (in_waiting_) state_.waiting.erase(waiting_at_);
      in_waiting_ = false;
    }
    state_.n_connections.fetch_sub(1);
    state_.metrics.connection_closed();
  }

  void start() {
    asio::dispatch(stream_.get_executor(), [self = shared_from_this()] { self->wait_for_request(); });
  }

  // From Server::stop(): close now unless a generation is running.
  void close_if_idle() {
    asio::post(stream_.get_executor(), [self = shared_from_this()] {
      if (!self->generating_) self->close();
    });
  }

  // From the listener, at the connection cap: close this session if it is still waiting for its
  // request (it may have finished reading it since it was chosen; then it stays).
  void evict() {
    asio::post(stream_.get_executor(), [self = shared_from_this()] {
      if (!self->evictable_) return;
      self->state_.metrics.connection_evicted();
      self->close();
    });
  }

  // Called by the listener with `waiting_mutex` held, after taking this session off the queue.
  void left_waiting_queue() { in_waiting_ = false; }

  void deliver(size_t request_index, engine::StepOutput output) {
    asio::post(stream_.get_executor(), [self = shared_from_this(), request_index, output = std::move(output)]() mutable {
      self->on_output(request_index, std::move(output));
    });
  }

 private:
  const ServerLimits& limits() const { return state_.options.limits; }

  // Enters the eviction queue (at its back) unless already there; on the strand.
  void enter_waiting() {
    evictable_ = true;
    std::lock_guard lock(state_.waiting_mutex);
    if (in_waiting_) return;
    waiting_at_ = state_.waiting.insert(state_.waiting.end(), this);
    in_waiting_ = true;
  }

  // The request has arrived whole (or is being answered): no longer evictable; on the strand.
  void leave_waiting() {
    evictable_ = false;
    std::lock_guard lock(state_.waiting_mutex);
    if (in_waiting_) state_.waiting.erase(waiting_at_);
    in_waiting_ = false;
  }

  void close() {
    beast::error_code ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_both, ignored);
    stream_.socket().close(ignored);
  }

  // Keep-alive: wait for the first byte of the next request under the idle timeout.
  void wait_for_request() {
    if (state_.stopping) return close();
    enter_waiting();
    if (buffer_.size() > 0) return read_header();
    stream_.expires_after(std::chrono::milliseconds(limits().idle_timeout_ms));
    stream_.async_read_some(buffer_.prepare(4096), [self = shared_from_this()](beast::error_code error, size_t n) {
      if (error) return self->close();
      self->buffer_.commit(n);
      self->read_header();
    });
  }

  void read_header() {
    parser_.emplace();
    parser_->header_limit(limits().max_header_bytes);
    parser_->body_limit(limits().max_body_bytes);
    request_start_ = Clock::now();
    stream_.expires_after(std::chrono::milliseconds(limits().header_timeout_ms));
    http::async_read_header(stream_, buffer_, *parser_, [self = shared_from_this()](beast::error_code error, size_t) {
      self->on_header(error);
    });
  }

  bool answer_read_error(beast::error_code error) {
    if (error == http::error::body_limit) {
      respond_plain(413, fmt::format("request body exceeds the limit of {} bytes", limits().max_body_bytes));
      return true;
    }
    if (error == http::error::header_limit) {
      respond_plain(431, "request headers are too large");
      return true;
    }
    if (error.category() == http::make_error_code(http::error::bad_method).category() && error != http::error::end_of_stream &&
        error != http::error::partial_message) {
      respond_plain(400, "malformed HTTP request: " + error.message());
      return true;
    }
    return false;
  }

  void on_header(beast::error_code error) {
    if (error) {
      if (!answer_read_error(error)) close();
      return;
    }
    auto expect = parser_->get()[http::field::expect];
    if (beast::iequals(expect, "100-continue")) {
      static const std::string continue_line = "HTTP/1.1 100 Continue\r\n\r\n";
      beast::error_code ignored;
      asio::write(stream_.socket(), asio::buffer(continue_line), ignored);
    }
    stream_.expires_after(std::chrono::milliseconds(limits().body_timeout_ms));
    http::async_read(stream_, buffer_, *parser_, [self = shared_from_this()](beast::error_code error, size_t) {
      if (error) {
        if (!self->answer_read_error(error)) self->close();
        return;
      }
      self->on_request();
    });
  }

  void respond_plain(int status, const std::string& message) {
    leave_waiting();
    keep_alive_ = false;
    std::string path = parser_ ? std::string(parser_->get().target()) : "";
    ApiStyle style = path.rfind("/v1/messages", 0) == 0 ? ApiStyle::anthropic : ApiStyle::openai;
    state_.metrics.record_request("other", status);
    write_response({status, "application/json", error_body(style, status, message), {}});
  }

  void on_request() {
    leave_waiting();
    auto& message = parser_->get();
    HttpRequest request;
    request.method = std::string(message.method_string());
    request.target = std::string(message.target());
    for (const auto& field : message) {
      std::string name(field.name_string());
      for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      request.headers[name] = std::string(field.value());
    }
    request.body = std::move(message.body());
    keep_alive_ = message.keep_alive() && !state_.stopping;
    head_only_ = message.method() == http::verb::head;
    RouteResult result = state_.router->route(request);
    endpoint_ = result.endpoint;
    style_ = result.style;
    if (!result.job) {
      state_.metrics.record_request(endpoint_, result.response.status);
      return write_response(std::move(result.response));
    }
    start_generation(std::move(*result.job));
  }

  void write_response(HttpResponse response) {
    auto message = std::make_shared<http::response<http::string_body>>(static_cast<http::status>(response.status), 11);
    message->set(http::field::server, "flare");
    if (response.status == 529) message->reason("Overloaded");  // Anthropic's status; Beast has no name for it
    message->set(http::field::content_type, response.content_type);
    for (const auto& [name, value] : response.headers) message->set(name, value);
    message->body() = std::move(response.body);
    message->keep_alive(keep_alive_);
    message->prepare_payload();
    if (head_only_) message->body().clear();
    stream_.expires_after(std::chrono::milliseconds(limits().write_timeout_ms));
    http::async_write(stream_, *message, [self = shared_from_this(), message](beast::error_code error, size_t) {
      if (error) return self->close();
      if (!self->keep_alive_) return self->graceful_close();
      self->wait_for_request();
    });
  }

  // Half-close, then discard what the client still sends (an unread body would make the
  // kernel reset the connection and lose the response), then close.
  void graceful_close() {
    enter_waiting();
    beast::error_code ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_send, ignored);
    stream_.expires_after(std::chrono::milliseconds(1000));
    buffer_.clear();
    stream_.async_read_some(buffer_.prepare(4096), [self = shared_from_this()](beast::error_code error, size_t) {
      if (error) return self->close();
      self->graceful_close();
    });
  }

  // ---- generation ----
  void start_generation(GenerationJob job) {
    job_ = std::move(job);
    generating_ = true;
    first_token_ = {};
    last_token_ = {};
    state_.n_active_generations.fetch_add(1);
    for (size_t i = 0; i < job_.requests.size(); ++i) {
      auto sink = std::make_shared<SessionSink>(shared_from_this(), i);
      engine::Engine::SubmitResult submitted;
      try {
        submitted = state_.engine.submit(job_.requests[i], sink);
      } catch (const std::exception& error) {
        // A request the engine refuses as malformed (flare::Error, usage: e.g. a prompt token the
        // tokenizer knows but the model's vocabulary lacks) is the client's 400, not a dead thread.
        RenderedError rendered = render_exception(style_, error);
        return abandon_generation({rendered.status, "application/json", std::move(rendered.body), {}});
      }
      if (submitted.rejected) return abandon_generation(admission_error_response(style_, *submitted.rejected));
      handles_.push_back(submitted.handle);
    }
    streaming_ = job_.responder->streaming();
    if (streaming_) {
      std::string head = fmt::format(
          "HTTP/1.1 200 OK\r\nServer: flare\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n"
          "Connection: {}\r\nTransfer-Encoding: chunked\r\n\r\n",
          keep_alive_ ? "keep-alive" : "close");
      queue_write(std::move(head), false);
      queue_write(job_.responder->stream_start(), true);
    }
    monitor_client();
  }

  // Before any output: cancels what was submitted and answers `response` instead.
  void abandon_generation(HttpResponse response) {
    for (auto handle : handles_) state_.engine.cancel(handle);
    handles_.clear();
    generating_ = false;
    state_.n_active_generations.fetch_sub(1);
    state_.metrics.record_request(endpoint_, response.status);
    write_response(std::move(response));
  }

  // While generating, a read that fails means the client went away: cancel the request.
  void monitor_client() {
    stream_.expires_never();
    monitoring_ = true;
    stream_.async_read_some(buffer_.prepare(1024), [self = shared_from_this()](beast::error_code error, size_t n) {
      self->monitoring_ = false;
      if (n > 0) self->buffer_.commit(n);
      if (self->pending_after_monitor_) {
        self->pending_after_monitor_ = false;
        return self->run_after_monitor();
      }
      if (error == asio::error::operation_aborted && self->resume_after_monitor_) {
        self->resume_after_monitor_ = false;
        if (self->keep_alive_ && !self->state_.stopping) return self->wait_for_request();
        return self->close();
      }
      if (error) return self->client_gone();
      if (self->generating_ && self->buffer_.size() < self->limits().max_header_bytes) return self->monitor_client();
    });
  }

  void client_gone() {
    if (!generating_) return close();
    client_gone_ = true;
    for (auto handle : handles_) state_.engine.cancel(handle);
    close();
  }

  void on_output(size_t request_index, engine::StepOutput output) {
    if (!generating_) return;
    auto now = Clock::now();
    if (!output.tokens.empty()) {
      if (first_token_ == Clock::time_point{}) {
        first_token_ = now;
        state_.metrics.record_time_to_first_token(std::chrono::duration<double>(now - request_start_).count());
      } else {
        double step_s = std::chrono::duration<double>(now - last_token_).count();
        for (size_t i = 0; i < output.tokens.size(); ++i) {
          state_.metrics.record_time_per_output_token(step_s / static_cast<double>(output.tokens.size()));
        }
      }
      last_token_ = now;
    }
    std::string bytes = job_.responder->on_output(request_index, output);
    for (auto [request, choice] : job_.responder->take_cancelled_choices()) {
      if (request < handles_.size()) state_.engine.cancel_choice(handles_[request], choice);
    }
    if (client_gone_) {
      if (job_.responder->done()) finish_generation_state();
      return;
    }
    if (streaming_) {
      queue_write(std::move(bytes), true);
      if (job_.responder->done()) {
        queue_write("0\r\n\r\n", false);
        finish_generation_state();
      }
    } else if (job_.responder->done()) {
      HttpResponse response = job_.responder->final_response();
      finish_generation_state();
      stop_monitor_then([self = shared_from_this(), response = std::move(response)]() mutable {
        self->write_response(std::move(response));
      });
    }
  }

  template <typename Next>
  void stop_monitor_then(Next next) {
    // The monitor read completes with operation_aborted once cancelled; resume from there.
    after_monitor_ = std::move(next);
    if (!monitoring_) return run_after_monitor();
    pending_after_monitor_ = true;
    beast::error_code ignored;
    stream_.socket().cancel(ignored);
  }

  void run_after_monitor() {
    auto next = std::move(after_monitor_);
    after_monitor_ = nullptr;
    if (next) next();
  }

  void finish_generation_state() {
    if (!generating_) return;
    generating_ = false;
    state_.n_active_generations.fetch_sub(1);
    const auto& usage = job_.responder ? job_.responder->usage() : engine::Usage{};
    state_.metrics.record_tokens(usage.n_prompt_tokens, usage.n_generated_tokens);
    state_.metrics.record_e2e_latency(std::chrono::duration<double>(Clock::now() - request_start_).count());
    if (!client_gone_ && job_.responder) state_.metrics.record_request(endpoint_, 200);
    else if (client_gone_) state_.metrics.record_request(endpoint_, 499);
    handles_.clear();
  }

  void queue_write(std::string bytes, bool as_chunk) {
    if (bytes.empty()) return;
    if (as_chunk) bytes = fmt::format("{:x}\r\n", bytes.size()) + bytes + "\r\n";
    writes_.push_back(std::move(bytes));
    if (!writing_) write_next();
  }

  void write_next() {
    if (writes_.empty()) {
      writing_ = false;
      if (streaming_ && !generating_) {
        // The last chunk went out: next request, or close.
        streaming_ = false;
        if (monitoring_) {
          resume_after_monitor_ = true;
          beast::error_code ignored;
          stream_.socket().cancel(ignored);
        } else if (keep_alive_ && !state_.stopping) {
          wait_for_request();
        } else {
          close();
        }
      }
      return;
    }
    writing_ = true;
    write_timer_.expires_after(std::chrono::milliseconds(limits().write_timeout_ms));
    write_timer_.async_wait([self = shared_from_this()](beast::error_code error) {
      if (!error) self->client_gone();  // the client stopped reading
    });
    asio::async_write(stream_.socket(), asio::buffer(writes_.front()),
                      [self = shared_from_this()](beast::error_code error, size_t) {
                        self->write_timer_.cancel();
                        self->writes_.pop_front();
                        if (error) {
                          self->writes_.clear();
                          self->writing_ = false;
                          return self->client_gone();
                        }
                        self->write_next();
                      });
  }

  beast::tcp_stream stream_;
  ServerState& state_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  asio::steady_timer write_timer_;
  bool keep_alive_ = false, head_only_ = false;
  std::string endpoint_;
  ApiStyle style_ = ApiStyle::openai;
  GenerationJob job_;
  std::vector<engine::RequestHandle> handles_;
  bool generating_ = false, streaming_ = false, client_gone_ = false;
  bool monitoring_ = false, resume_after_monitor_ = false, pending_after_monitor_ = false;
  std::function<void()> after_monitor_;
  std::deque<std::string> writes_;
  bool writing_ = false;
  Clock::time_point request_start_, first_token_, last_token_;
  bool evictable_ = false;                     // on the strand
  bool in_waiting_ = false;                    // under state_.waiting_mutex
  std::list<Session*>::iterator waiting_at_;   // under state_.waiting_mutex

  friend class SessionSink;
};

void SessionSink::on_output(engine::StepOutput output) {
  session_->deliver(index_, std::move(output));
}

struct Server::Impl {
  ServerState state;
  const Frontend& frontend;
  std::optional<tcp::acceptor> acceptor;
  uint16_t bound_port = 0;
  std::atomic<bool> stop_requested{false};

  std::optional<asio::steady_timer> accept_retry;
  size_t n_sessions_after_prune = 16;  // under state.sessions_mutex

  Impl(ServerOptions options, engine::Engine& engine, const Frontend& fe, ModelInfo model)
      : state(std::move(options), engine, std::move(model)), frontend(fe) {
    state.router = std::make_unique<Router>(frontend, state.model, state.options.api_key, state.engine,
                                            state.metrics, state.options.limits);
  }

  // Closes the session that has waited longest for its request; false when none is waiting.
  bool evict_oldest_waiting() {
    std::shared_ptr<Session> victim;
    {
      std::lock_guard lock(state.waiting_mutex);
      while (!victim && !state.waiting.empty()) {
        Session* oldest = state.waiting.front();
        state.waiting.pop_front();
        oldest->left_waiting_queue();
        victim = oldest->weak_from_this().lock();  // empty when it is being destroyed already
      }
    }
    if (victim) victim->evict();
    return victim != nullptr;
  }

  void accept() {
    if (state.stopping || !acceptor->is_open()) return;
    acceptor->async_accept(asio::make_strand(state.ioc), [this](beast::error_code error, tcp::socket socket) {
      if (error) {
        if (error == asio::error::operation_aborted || !acceptor->is_open()) return;
        // Out of descriptors (the cap sits below the limit, but other files count too): make
        // room and try again shortly rather than spinning on the failing accept.
        if (error == asio::error::no_descriptors || error.value() == ENFILE) {
          evict_oldest_waiting();
          accept_retry.emplace(state.ioc);
          accept_retry->expires_after(std::chrono::milliseconds(10));
          accept_retry->async_wait([this](beast::error_code wait_error) {
            if (!wait_error) accept();
          });
          return;
        }
        return accept();
      }
      if (state.n_connections.fetch_add(1) + 1 > state.options.limits.max_connections) evict_oldest_waiting();
      auto session = std::make_shared<Session>(std::move(socket), state);
      {
        std::lock_guard lock(state.sessions_mutex);
        // Pruning walks the whole set: only when it has doubled since, so a flood stays linear.
        if (state.sessions.size() >= 2 * n_sessions_after_prune) {
          for (auto it = state.sessions.begin(); it != state.sessions.end();) {
            it = it->expired() ? state.sessions.erase(it) : std::next(it);
          }
          n_sessions_after_prune = std::max<size_t>(state.sessions.size(), 16);
        }
        state.sessions.insert(session);
      }
      session->start();
      if (!state.stopping) accept();
    });
  }

  void begin_stop() {
    if (state.stopping.exchange(true)) return;
    if (state.options.on_stopping) state.options.on_stopping();
    beast::error_code ignored;
    acceptor->close(ignored);
    std::lock_guard lock(state.sessions_mutex);
    for (const auto& weak : state.sessions) {
      if (auto session = weak.lock()) session->close_if_idle();
    }
  }
};

Server::Server(ServerOptions options, engine::Engine& engine, const Frontend& frontend, ModelInfo model)
    : impl_(std::make_unique<Impl>(std::move(options), engine, frontend, std::move(model))) {}

Server::~Server() = default;

Metrics& Server::metrics() { return impl_->state.metrics; }

void Server::bind() {
  auto& state = impl_->state;
  beast::error_code error;
  auto address = asio::ip::make_address(state.options.host, error);
  if (error) fail_usage("--host {} is not a numeric IPv4 or IPv6 address", state.options.host);
  tcp::endpoint endpoint(address, state.options.port);
  tcp::acceptor acceptor(state.ioc);
  acceptor.open(endpoint.protocol(), error);
  if (!error) acceptor.set_option(asio::socket_base::reuse_address(true), error);
  if (!error && address.is_v6()) acceptor.set_option(asio::ip::v6_only(true), error);
  if (!error) acceptor.bind(endpoint, error);
  if (!error) acceptor.listen(asio::socket_base::max_listen_connections, error);
  if (error) fail_usage("cannot listen on {}:{}: {}", state.options.host, state.options.port, error.message());
  impl_->bound_port = acceptor.local_endpoint().port();
  impl_->acceptor.emplace(std::move(acceptor));
}

uint16_t Server::port() const { return impl_->bound_port; }

void Server::run() {
  auto& state = impl_->state;
  if (!impl_->acceptor) bind();
  impl_->accept();
  std::optional<asio::signal_set> signals;
  if (state.options.handle_signals) {
    signals.emplace(state.ioc, SIGINT, SIGTERM);
    signals->async_wait([this](beast::error_code error, int) {
      if (!error) stop();
    });
  }
  // Drain watcher: once stopping, wait for active generations, then cancel what is left.
  asio::steady_timer watcher(state.ioc);
  Clock::time_point drain_deadline{};
  std::function<void(beast::error_code)> watch = [&](beast::error_code) {
    if (state.stopping) {
      if (drain_deadline == Clock::time_point{}) {
        drain_deadline = Clock::now() + std::chrono::milliseconds(state.options.limits.drain_timeout_ms);
        if (signals) signals->cancel();
      }
      if (state.n_active_generations.load() == 0 || Clock::now() > drain_deadline + std::chrono::seconds(5)) {
        state.ioc.stop();
        return;
      }
      if (Clock::now() > drain_deadline) {
        std::lock_guard lock(state.sessions_mutex);
        for (const auto& weak : state.sessions) {
          if (auto session = weak.lock()) session->close_if_idle();
        }
      }
    }
    watcher.expires_after(std::chrono::milliseconds(20));
    watcher.async_wait(watch);
  };
  watcher.expires_after(std::chrono::milliseconds(20));
  watcher.async_wait(watch);
  int32_t n_threads = std::max(1, state.options.limits.n_threads);
  std::vector<std::thread> threads;
  for (int32_t i = 1; i < n_threads; ++i) threads.emplace_back([&] { state.ioc.run(); });
  state.ioc.run();
  for (auto& thread : threads) thread.join();
}

void Server::stop() {
  asio::post(impl_->state.ioc, [impl = impl_.get()] { impl->begin_stop(); });
}

}  // namespace flare::server
