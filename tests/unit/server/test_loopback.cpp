// The real HTTP server on an ephemeral loopback port with a scripted engine, driven by raw
// sockets: full requests, streaming, half-sent requests timing out, clients disconnecting
// mid-stream (their request is cancelled), and the server still serving afterwards.
#include <gtest/gtest.h>

#include "fakes.h"
#include "server/server.h"
#include "sockets.h"

namespace flare::server {
namespace {

using testing::connect_to;
using testing::post;
using testing::receive;
using testing::send_all;

class LoopbackTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ServerOptions options;
    options.host = "127.0.0.1";
    options.port = 0;
    options.handle_signals = false;
    options.limits.header_timeout_ms = 300;
    options.limits.body_timeout_ms = 300;
    options.limits.idle_timeout_ms = 300;
    options.limits.max_body_bytes = 4096;
    options.limits.n_threads = 2;
    server = std::make_unique<Server>(options, engine, frontend, testing::fake_model());
    server->bind();
    port = server->port();
    thread = std::thread([this] { server->run(); });
  }
  void TearDown() override {
    server->stop();
    thread.join();
  }
  std::string request(const std::string& raw) {
    int fd = connect_to(port);
    EXPECT_GE(fd, 0);
    send_all(fd, raw);
    std::string response = receive(fd);
    close(fd);
    return response;
  }

  testing::FakeFrontend frontend;
  testing::ScriptedEngine engine;
  std::unique_ptr<Server> server;
  uint16_t port = 0;
  std::thread thread;
};

const std::string kChat = R"({"messages": [{"role": "user", "content": "hi"}])";

TEST_F(LoopbackTest, ServesHealthAndChat) {
  std::string health = request("GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  EXPECT_EQ(health.rfind("HTTP/1.1 200", 0), 0u) << health;
  std::string chat = request(post("/v1/chat/completions", kChat + "}"));
  EXPECT_EQ(chat.rfind("HTTP/1.1 200", 0), 0u) << chat;
  EXPECT_NE(chat.find("\"content\":\"Hello world\""), std::string::npos) << chat;
  EXPECT_NE(chat.find("\"finish_reason\":\"stop\""), std::string::npos) << chat;
}

TEST_F(LoopbackTest, KeepAliveServesSeveralRequestsOnOneConnection) {
  int fd = connect_to(port);
  for (int i = 0; i < 3; ++i) {
    send_all(fd, post("/v1/completions", R"({"prompt": "x", "max_tokens": 3})", true));
    std::string response = receive(fd, "}}");
    EXPECT_NE(response.find("\"text\":\"Hel\""), std::string::npos) << response;
  }
  close(fd);
}

TEST_F(LoopbackTest, StreamsChunkedSse) {
  std::string stream = request(post("/v1/chat/completions", kChat + R"(, "stream": true})"));
  EXPECT_NE(stream.find("Transfer-Encoding: chunked"), std::string::npos) << stream;
  EXPECT_NE(stream.find("text/event-stream"), std::string::npos);
  EXPECT_NE(stream.find("data: [DONE]"), std::string::npos) << stream;
  EXPECT_NE(stream.find("\r\n0\r\n\r\n"), std::string::npos);  // last chunk
}

TEST_F(LoopbackTest, HalfSentRequestsTimeOutAndServerKeepsServing) {
  int partial_header = connect_to(port);
  send_all(partial_header, "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n");
  int partial_body = connect_to(port);
  send_all(partial_body, "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{\"mess");
  int silent = connect_to(port);
  auto start = std::chrono::steady_clock::now();
  receive(partial_header);  // returns when the server closes
  receive(partial_body);
  receive(silent);
  double waited_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_LT(waited_s, 3.0);
  close(partial_header);
  close(partial_body);
  close(silent);
  EXPECT_EQ(request("GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").rfind("HTTP/1.1 200", 0), 0u);
}

TEST_F(LoopbackTest, MalformedAndOversizeRequests) {
  std::string garbage = request("BLAH\r\n\r\n");
  EXPECT_EQ(garbage.rfind("HTTP/1.1 400", 0), 0u) << garbage;
  std::string oversize = request(post("/v1/chat/completions", std::string(8000, ' ')));
  EXPECT_EQ(oversize.rfind("HTTP/1.1 413", 0), 0u) << oversize;
  std::string bad_json = request(post("/v1/messages", "{"));
  EXPECT_EQ(bad_json.rfind("HTTP/1.1 400", 0), 0u) << bad_json;
  EXPECT_NE(bad_json.find("\"type\":\"error\""), std::string::npos) << bad_json;
}

TEST_F(LoopbackTest, DisconnectMidStreamCancelsTheRequest) {
  engine.step_ms = 50;
  engine.script = std::string(100, 'a');
  int fd = connect_to(port);
  send_all(fd, post("/v1/chat/completions", kChat + R"(, "stream": true})"));
  std::string first = receive(fd, "\"content\":\"a\"");
  EXPECT_NE(first.find("text/event-stream"), std::string::npos);
  close(fd);
  for (int i = 0; i < 100 && engine.n_aborted.load() == 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(engine.n_aborted.load(), 1);
  EXPECT_GE(engine.n_cancel_calls.load(), 1);
  engine.step_ms = 1;
  engine.script = "ok";
  std::string after = request(post("/v1/chat/completions", kChat + "}"));
  EXPECT_NE(after.find("\"content\":\"ok\""), std::string::npos) << after;
}

TEST_F(LoopbackTest, AdmissionRejectionUsesTheCapacityForm) {
  engine.reject = engine::AdmissionError{true, "a request slot", "4 of 4 running", "--max-concurrency"};
  std::string busy = request(post("/v1/chat/completions", kChat + "}"));
  EXPECT_EQ(busy.rfind("HTTP/1.1 503", 0), 0u) << busy;
  EXPECT_NE(busy.find("Options: --max-concurrency"), std::string::npos) << busy;
  // Anthropic clients expect 529 overloaded_error for the same condition.
  std::string overloaded = request(post("/v1/messages",
                                        R"({"model": "demo", "max_tokens": 8, "messages": [{"role": "user", "content": "hi"}]})"));
  EXPECT_EQ(overloaded.rfind("HTTP/1.1 529 Overloaded", 0), 0u) << overloaded;
  EXPECT_NE(overloaded.find(R"("type":"overloaded_error")"), std::string::npos) << overloaded;
  EXPECT_NE(overloaded.find("Options: --max-concurrency"), std::string::npos) << overloaded;
}

// The engine refuses a request the adapters let through (LocalEngine::submit throws flare::Error,
// usage: a prompt token past the model's vocabulary, as Gemma 3's <image_soft_token> is for the
// 1B model): a 400 in the API's shape, streaming or not, and the server keeps serving.
TEST_F(LoopbackTest, EngineRefusingAMalformedRequestIsABadRequest) {
  engine.malformed = "prompt token 262144 at position 3 is outside the vocabulary 0..262143";
  std::string chat = request(post("/v1/chat/completions", kChat + R"(, "stream": true})"));
  EXPECT_EQ(chat.rfind("HTTP/1.1 400", 0), 0u) << chat;
  EXPECT_NE(chat.find(R"("type":"invalid_request_error")"), std::string::npos) << chat;
  EXPECT_NE(chat.find("outside the vocabulary 0..262143"), std::string::npos) << chat;
  std::string messages = request(post("/v1/messages",
                                      R"({"model": "demo", "max_tokens": 8, "messages": [{"role": "user", "content": "hi"}]})"));
  EXPECT_EQ(messages.rfind("HTTP/1.1 400", 0), 0u) << messages;
  EXPECT_NE(messages.find(R"("error":{"message":"prompt token 262144)"), std::string::npos) << messages;
  EXPECT_NE(messages.find(R"("type":"invalid_request_error"},"type":"error")"), std::string::npos) << messages;
  engine.malformed.clear();
  std::string after = request(post("/v1/chat/completions", kChat + "}"));
  EXPECT_EQ(after.rfind("HTTP/1.1 200", 0), 0u) << after;
  EXPECT_NE(after.find("\"content\":\"Hello world\""), std::string::npos) << after;
}

// Stopping (what SIGINT/SIGTERM do) closes the listener but lets an active stream finish: the
// client receives every token and [DONE], new connections are refused, and run() returns.
TEST_F(LoopbackTest, StopDrainsActiveStreamsAndRefusesNewConnections) {
  engine.step_ms = 10;
  engine.script = std::string(40, 'z');
  int fd = connect_to(port);
  ASSERT_GE(fd, 0);
  send_all(fd, post("/v1/chat/completions", kChat + R"(, "stream": true, "max_tokens": 100})"));
  std::string first = receive(fd, "\"content\":\"z\"");
  ASSERT_NE(first.find("\"content\":\"z\""), std::string::npos) << first;
  server->stop();
  std::string rest = first + receive(fd);
  close(fd);
  size_t n_tokens = 0;
  for (size_t at = rest.find("\"content\":\"z\""); at != std::string::npos; at = rest.find("\"content\":\"z\"", at + 1)) ++n_tokens;
  EXPECT_EQ(n_tokens, 40u) << rest;
  EXPECT_NE(rest.find("data: [DONE]"), std::string::npos) << rest;
  EXPECT_EQ(engine.n_aborted.load(), 0);
  thread.join();  // run() returned after the drain
  EXPECT_LT(connect_to(port), 0) << "the listener still accepts after stop()";
  thread = std::thread([] {});  // TearDown stops and joins again
}

TEST(ServerBind, RejectsBadHostAndAcceptsIpv6) {
  testing::FakeFrontend frontend;
  testing::ScriptedEngine engine;
  ServerOptions options;
  options.host = "not-an-address";
  options.port = 0;
  Server bad(options, engine, frontend, testing::fake_model());
  EXPECT_THROW(bad.bind(), Error);
  options.host = "::1";
  Server v6(options, engine, frontend, testing::fake_model());
  try {
    v6.bind();
    EXPECT_GT(v6.port(), 0);
  } catch (const Error&) {
    GTEST_SKIP() << "no IPv6 loopback here";
  }
}

}  // namespace
}  // namespace flare::server
