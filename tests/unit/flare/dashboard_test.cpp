// The live dashboard: window arithmetic (rates, latency percentiles from histogram differences,
// hit rates, draft acceptance, weight bandwidth), the rendered screen within any size, and the
// drawing thread on a terminal (alternate screen taken and given back) and redirected (plain
// lines only).
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <sstream>

#include "flare/dashboard.h"

namespace flare::cli {
namespace {

using namespace std::chrono_literals;

server::MetricsSnapshot histograms() {
  server::MetricsSnapshot m;
  m.ttft_bounds_s = {0.01, 0.1, 1.0};
  m.ttft_counts = {0, 0, 0, 0};
  m.tpot_bounds_s = {0.01, 0.02, 0.05};
  m.tpot_counts = {0, 0, 0, 0};
  return m;
}

DashboardInfo info() {
  DashboardInfo d;
  d.model = "demo";
  d.url = "http://127.0.0.1:8000";
  d.backend = "CPU backend, 2 threads";
  d.max_concurrency = 4;
  d.n_kv_pages = 1000;
  d.decode_weight_bytes = 1'000'000'000;
  d.device_bandwidth_bytes_per_s = 4e12;
  d.speculation = true;
  return d;
}

struct Samples {
  DashboardClock::time_point t0 = DashboardClock::now();
  DashboardSample first, second;
  Samples() {
    first.at = t0;
    first.metrics = histograms();
    first.metrics.n_prompt_tokens = 1000;
    first.metrics.ttft_counts = {5, 0, 0, 0};  // before the window: must not count
    first.n_steps = 100;
    first.engine.n_prefix_queried_tokens = 500;
    first.engine.n_prefix_hit_tokens = 100;
    second = first;
    second.at = t0 + 10s;
    second.metrics.n_prompt_tokens = 6000;              // 500 tokens/s
    second.metrics.ttft_counts = {5, 10, 0, 0};         // 10 first tokens, all in (0.01, 0.1]
    second.metrics.tpot_counts = {0, 90, 0, 0};         // 90 later tokens in (0.01, 0.02]
    second.metrics.requests_by_status = {{200, 10}, {429, 2}, {499, 1}};
    second.metrics.n_open_connections = 3;
    second.n_steps = 600;                        // 50 steps/s
    second.engine.n_running = 2;
    second.engine.n_waiting = 1;
    second.engine.n_kv_pages_used = 40;
    second.engine.n_kv_pages_free = 960;
    second.engine.n_kv_pages_backed = 200;
    second.engine.n_prefix_queried_tokens = 1500;       // 1000 in the window, 750 found
    second.engine.n_prefix_hit_tokens = 850;
    second.engine.n_verify_rows = 10;
    second.engine.n_draft_tokens = 40;
    second.engine.n_accepted_draft_tokens = 30;
  }
};

TEST(DashboardWindow, RatesAndPercentilesCoverTheWindowOnly) {
  Samples s;
  DashboardWindow window(10s);
  window.add(s.first);
  window.add(s.second);
  const DashboardView v = window.view(info(), s.t0 - 5s);
  EXPECT_DOUBLE_EQ(v.window_s, 10.0);
  EXPECT_DOUBLE_EQ(v.uptime_s, 15.0);
  EXPECT_DOUBLE_EQ(v.prompt_tokens_per_s, 500.0);
  EXPECT_DOUBLE_EQ(v.generated_tokens_per_s, 10.0);  // (10 first + 90 later) / 10 s
  EXPECT_DOUBLE_EQ(v.steps_per_s, 50.0);
  ASSERT_TRUE(v.ttft_p50_s && v.ttft_p99_s);
  EXPECT_NEAR(*v.ttft_p50_s, 0.01 + 0.09 * 0.5, 1e-12);  // the 5 older fast ones are out of the window
  EXPECT_NEAR(*v.ttft_p99_s, 0.01 + 0.09 * 0.99, 1e-12);
  ASSERT_TRUE(v.itl_p50_s);
  EXPECT_NEAR(*v.itl_p50_s, 0.015, 1e-12);
  EXPECT_EQ(v.n_running, 2);
  EXPECT_EQ(v.n_waiting, 1);
  EXPECT_EQ(v.n_succeeded, 10u);
  EXPECT_EQ(v.errors_by_status, (std::map<int, std::uint64_t>{{429, 2}, {499, 1}}));
  EXPECT_EQ(v.kv_pages_used, 40);
  EXPECT_EQ(v.kv_pages_backed, 200);
  EXPECT_EQ(v.kv_pages_reserved, 1000);
  ASSERT_TRUE(v.prefix_hit_rate);
  EXPECT_DOUBLE_EQ(*v.prefix_hit_rate, 0.75);
  ASSERT_TRUE(v.draft_acceptance && v.tokens_per_verify);
  EXPECT_DOUBLE_EQ(*v.draft_acceptance, 0.75);
  EXPECT_DOUBLE_EQ(*v.tokens_per_verify, 4.0);
  ASSERT_TRUE(v.weight_bytes_per_s && v.bandwidth_share);
  EXPECT_DOUBLE_EQ(*v.weight_bytes_per_s, 50e9);
  EXPECT_DOUBLE_EQ(*v.bandwidth_share, 50e9 / 4e12);
}

TEST(DashboardWindow, KeepsOneSampleAtLeastAWindowOld) {
  Samples s;
  DashboardWindow window(10s);
  for (int i = 0; i <= 40; ++i) {  // every second for 40 s, 10 steps a second
    DashboardSample sample = s.first;
    sample.at = s.t0 + std::chrono::seconds(i);
    sample.n_steps = 10 * i;
    window.add(sample);
  }
  const DashboardView v = window.view(info(), s.t0);
  EXPECT_DOUBLE_EQ(v.window_s, 10.0);
  EXPECT_DOUBLE_EQ(v.steps_per_s, 10.0);
}

TEST(DashboardWindow, QuietWindowFallsBackAndUnknownsStayEmpty) {
  Samples s;
  DashboardWindow window;
  DashboardSample only = s.second;
  window.add(only);
  DashboardInfo cpu = info();
  cpu.device_bandwidth_bytes_per_s.reset();
  cpu.speculation = false;
  const DashboardView v = window.view(cpu, s.t0);
  EXPECT_EQ(v.window_s, 0.0);
  EXPECT_EQ(v.generated_tokens_per_s, 0.0);
  EXPECT_FALSE(v.ttft_p50_s);                         // nothing in a window of one sample
  ASSERT_TRUE(v.prefix_hit_rate);                     // since start instead
  EXPECT_NEAR(*v.prefix_hit_rate, 850.0 / 1500.0, 1e-12);
  EXPECT_FALSE(v.draft_acceptance);                   // speculation off
  EXPECT_FALSE(v.bandwidth_share);                    // the CPU's bandwidth is unknown
  EXPECT_TRUE(v.weight_bytes_per_s);
}

DashboardView busy_view() {
  Samples s;
  DashboardWindow window;
  window.add(s.first);
  DashboardSample second = s.second;
  second.memory = DeviceMemoryUse{100ull << 30, 140ull << 30, false};
  window.add(second);
  return window.view(info(), s.t0);
}

TEST(DashboardRender, FitsEveryWidthAndHeight) {
  TerminalInfo terminal{true, true, 80};
  const DashboardView v = busy_view();
  for (int columns : {40, 64, 80, 120, 200}) {
    const auto lines = render_dashboard(terminal, info(), v, columns, 60);
    ASSERT_GT(lines.size(), 10u);
    for (const auto& line : lines) {
      EXPECT_LE(display_width(line), static_cast<std::size_t>(std::min(columns, 120))) << line;
    }
  }
  const auto full = render_dashboard(terminal, info(), v, 100, 60);
  const auto short_screen = render_dashboard(terminal, info(), v, 100, 12);
  EXPECT_LE(short_screen.size(), 12u);
  EXPECT_LT(short_screen.size(), full.size());
  // The lowest sections are the ones left out; the requests stay.
  std::string text;
  for (const auto& line : short_screen) text += line + "\n";
  EXPECT_NE(text.find("Requests"), std::string::npos);
  EXPECT_EQ(text.find("Device"), std::string::npos);
}

TEST(DashboardRender, ShowsTheFigures) {
  TerminalInfo plain{false, false, 80};
  std::string text;
  for (const auto& line : render_dashboard(plain, info(), busy_view(), 120, 60)) text += line + "\n";
  for (const char* expected : {"2 of 4, 1 queued", "10 ok", "429 \u00d72, 499 \u00d71", "500 tokens/s", "10 tokens/s",
                               "p50 55.0 ms", "p99 99.1 ms", "p50 15.0 ms", "40 used, 200 backed, 1,000 reserved",
                               "75% of prompt tokens", "75% accepted, 4.00 tokens a verify round",
                               "50.0 GB/s (1% of 4.00 TB/s)", "100.0 GiB of 140.0 GiB used (71%)"}) {
    EXPECT_NE(text.find(expected), std::string::npos) << "missing '" << expected << "' in\n" << text;
  }
  const std::string line = render_metrics_line(info(), busy_view());
  EXPECT_EQ(line.rfind("metrics: running 2/4, queued 1", 0), 0u) << line;
  EXPECT_NE(line.find("weights 50.0 GB/s (1%)"), std::string::npos) << line;
  EXPECT_EQ(line.find('\n'), std::string::npos);
}

std::string read_all(std::FILE* file) {
  std::fflush(file);
  std::rewind(file);
  std::string text;
  char buffer[4096];
  while (size_t n = std::fread(buffer, 1, sizeof buffer, file)) text.append(buffer, n);
  return text;
}

TEST(DashboardThread, TerminalScreenIsTakenAndGivenBack) {
  std::FILE* out = std::tmpfile();
  ASSERT_NE(out, nullptr);
  std::atomic<int> n_samples{0};
  Samples s;
  {
    Dashboard dashboard(TerminalInfo{true, true, 80}, out, info(), [&] {
      ++n_samples;
      DashboardSample sample = s.second;
      sample.at = DashboardClock::now();
      return sample;
    }, Dashboard::Timing{10ms, 1000ms, 1000ms});
    std::this_thread::sleep_for(100ms);
    dashboard.set_status("Stopping: draining active requests");
    std::this_thread::sleep_for(50ms);
  }
  const std::string text = read_all(out);
  std::fclose(out);
  EXPECT_GE(n_samples.load(), 3);
  EXPECT_EQ(text.rfind("\x1b[?1049h", 0), 0u);  // the alternate screen first
  const std::string restore = "\x1b[?7h\x1b[?25h\x1b[?1049l";
  ASSERT_GE(text.size(), restore.size());
  EXPECT_EQ(text.substr(text.size() - restore.size()), restore);  // and given back last
  EXPECT_NE(text.find("\x1b[H"), std::string::npos);
  EXPECT_NE(text.find("Stopping: draining"), std::string::npos);
  EXPECT_EQ(text.find("\x1b[2J"), std::string::npos) << "a full clear would flicker";
}

TEST(DashboardThread, RedirectedWritesPlainLinesOnly) {
  std::FILE* out = std::tmpfile();
  ASSERT_NE(out, nullptr);
  Samples s;
  std::atomic<bool> busy{true};
  std::int64_t n_steps = 0;
  {
    Dashboard dashboard(TerminalInfo{false, false, 80}, out, info(), [&] {
      DashboardSample sample = s.second;
      sample.at = DashboardClock::now();
      if (busy) ++n_steps;
      sample.n_steps = n_steps;
      return sample;
    }, Dashboard::Timing{5ms, 40ms, 1000ms});
    std::this_thread::sleep_for(150ms);
    busy = false;  // idle: no more lines until the last one
    std::this_thread::sleep_for(150ms);
  }
  const std::string text = read_all(out);
  std::fclose(out);
  EXPECT_EQ(text.find('\x1b'), std::string::npos) << text;
  size_t n_lines = 0;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    EXPECT_EQ(line.rfind("metrics: ", 0), 0u) << line;
    ++n_lines;
  }
  EXPECT_GE(n_lines, 2u);   // every 40 ms over the busy 150 ms, and one at the end
  EXPECT_LE(n_lines, 6u);   // not every 5 ms refresh, and none while idle
}

}  // namespace
}  // namespace flare::cli
