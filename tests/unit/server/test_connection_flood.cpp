// A slowloris flood against the real server: thousands of connections that each send half a
// request line and stall. At the connection cap the server closes the oldest of them, /health
// still answers at once, a stream that was running finishes whole, ordinary requests are served,
// and once the clients leave every descriptor the server opened is closed again.
#include <dirent.h>
#include <poll.h>
#include <sys/resource.h>

#include <algorithm>
#include <vector>

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
using Clock = std::chrono::steady_clock;

constexpr int kStalled = 5000;
constexpr int32_t kCap = 1000;

int count_open_descriptors() {
  int n = 0;
  DIR* dir = opendir("/proc/self/fd");
  if (!dir) return -1;
  while (dirent* entry = readdir(dir)) {
    if (entry->d_name[0] != '.') ++n;
  }
  closedir(dir);
  return n - 1;  // the directory's own descriptor
}

// True once the server closed its end (a read would return 0 or fail).
bool peer_closed(int fd) {
  pollfd p{fd, POLLIN, 0};
  if (poll(&p, 1, 0) <= 0) return false;
  char byte;
  return recv(fd, &byte, 1, MSG_DONTWAIT | MSG_PEEK) <= 0;
}

template <typename Done>
bool wait_until(Done done, double seconds) {
  const auto deadline = Clock::now() + std::chrono::duration<double>(seconds);
  while (!done()) {
    if (Clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return true;
}

double timed_health_ms(uint16_t port, std::string& response) {
  const auto start = Clock::now();
  int fd = connect_to(port);
  if (fd < 0) return 1e9;
  send_all(fd, "GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  response = receive(fd);
  close(fd);
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

TEST(ConnectionFlood, StalledClientsAreEvictedAndHealthStillAnswers) {
  // The clients' and the server's descriptors share this process: room for both.
  rlimit limit{};
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &limit), 0);
  const rlim_t needed = kStalled + kCap + 256;
  if (limit.rlim_cur < needed) {
    limit.rlim_cur = std::min<rlim_t>(needed, limit.rlim_max);
    setrlimit(RLIMIT_NOFILE, &limit);
  }
  if (limit.rlim_cur < needed) GTEST_SKIP() << "the open-file hard limit " << limit.rlim_max << " is below " << needed;

  testing::FakeFrontend frontend;
  testing::ScriptedEngine engine;
  ServerOptions options;
  options.host = "127.0.0.1";
  options.port = 0;
  options.handle_signals = false;
  options.limits.n_threads = 2;
  options.limits.max_connections = kCap;  // header timeout stays 10 s: the stalled clients outlive the test
  Server server(options, engine, frontend, testing::fake_model());
  server.bind();
  const uint16_t port = server.port();
  std::thread serving([&] { server.run(); });
  std::string health;
  ASSERT_LT(timed_health_ms(port, health), 5000.0);
  const int baseline = count_open_descriptors();

  // A stream that is running when the flood starts must finish whole.
  engine.step_ms = 5;
  engine.script = std::string(60, 's');
  int streaming = connect_to(port);
  ASSERT_GE(streaming, 0);
  send_all(streaming, post("/v1/chat/completions", R"({"messages": [{"role": "user", "content": "hi"}], "stream": true})"));
  std::string stream = receive(streaming, "\"content\":\"s\"");
  ASSERT_NE(stream.find("\"content\":\"s\""), std::string::npos) << stream;

  std::vector<int> stalled;
  stalled.reserve(kStalled);
  for (int i = 0; i < kStalled; ++i) {
    int fd = connect_to(port);
    ASSERT_GE(fd, 0) << "connection " << i << " refused";
    send_all(fd, "GET /v1/mod");
    stalled.push_back(fd);
  }
  // Every connection beyond the cap pushes out the oldest stalled one.
  auto n_closed = [&] { return std::count_if(stalled.begin(), stalled.end(), peer_closed); };
  EXPECT_TRUE(wait_until([&] { return n_closed() >= kStalled - kCap; }, 20.0)) << n_closed() << " closed";
  // The newest stalled connections are the ones still open.
  EXPECT_FALSE(peer_closed(stalled.back()));
  EXPECT_TRUE(peer_closed(stalled.front()));

  std::vector<double> health_ms;
  for (int i = 0; i < 5; ++i) {
    health_ms.push_back(timed_health_ms(port, health));
    EXPECT_EQ(health.rfind("HTTP/1.1 200", 0), 0u) << health;
  }
  std::vector<double> sorted = health_ms;
  std::sort(sorted.begin(), sorted.end());
  std::printf("/health with %d stalled connections: %.2f %.2f %.2f %.2f %.2f ms\n", kStalled, health_ms[0],
              health_ms[1], health_ms[2], health_ms[3], health_ms[4]);
  EXPECT_LT(sorted[2], 100.0) << "median /health time";

  stream += receive(streaming);
  close(streaming);
  EXPECT_NE(stream.find("data: [DONE]"), std::string::npos) << stream;
  EXPECT_EQ(engine.n_aborted.load(), 0);

  engine.script = "ok";
  engine.step_ms = 1;
  int chat = connect_to(port);
  send_all(chat, post("/v1/chat/completions", R"({"messages": [{"role": "user", "content": "hi"}]})"));
  std::string answer = receive(chat);
  close(chat);
  EXPECT_NE(answer.find("\"content\":\"ok\""), std::string::npos) << answer;

  int metrics_fd = connect_to(port);
  send_all(metrics_fd, "GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  std::string metrics = receive(metrics_fd);
  close(metrics_fd);
  const size_t at = metrics.find("flare_http_connections_evicted_total{model=\"demo\"} ");
  ASSERT_NE(at, std::string::npos) << metrics;
  EXPECT_GE(std::stol(metrics.substr(metrics.find('}', at) + 2)), kStalled - kCap);

  for (int fd : stalled) close(fd);
  EXPECT_TRUE(wait_until([&] { return count_open_descriptors() <= baseline; }, 10.0))
      << count_open_descriptors() << " descriptors open against " << baseline << " before the flood";
  server.stop();
  serving.join();
}

}  // namespace
}  // namespace flare::server
