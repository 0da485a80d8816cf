// The live metrics of `flare run` (spec cli-design 5.2: "after startup, a usable terminal switches
// to the live metrics dashboard"): samples of the server's counters (server/metrics.h) and the
// engine's stats taken a few times a second, and what a sliding window of them says (rates and
// latency percentiles). Plain data and pure functions, so the figures are testable apart from
// the terminal; dashboard.h draws them.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <string>

#include "engine/request.h"
#include "server/metrics.h"

namespace flare::cli {

using DashboardClock = std::chrono::steady_clock;

struct DeviceMemoryUse {
  std::uint64_t used_bytes = 0;
  std::uint64_t total_bytes = 0;
  bool host = false;  // resident memory of this process (the CPU backend), not a GPU's
};

// What does not change while serving.
struct DashboardInfo {
  std::string model;            // the first served name
  std::string url;              // http://127.0.0.1:8000
  std::string backend;          // "CPU backend, 2 threads", "GPU 0 (NVIDIA H200, sm_90)"
  std::int64_t max_concurrency = 1;
  std::int64_t n_kv_pages = 0;  // reserved in the pool
  std::int64_t page_tokens = 16;
  bool speculation = false;
  std::uint64_t decode_weight_bytes = 0;                 // one step's weight reads (0: unknown)
  std::optional<double> device_bandwidth_bytes_per_s;   // for the share of it; unknown on the CPU
};

struct DashboardSample {
  DashboardClock::time_point at;
  server::MetricsSnapshot metrics;
  engine::EngineStats engine;
  std::int64_t n_steps = 0;  // forward steps since start: each reads every weight once
  std::optional<DeviceMemoryUse> memory;
};

// Everything the dashboard and the plain log lines show.
struct DashboardView {
  double uptime_s = 0;
  double window_s = 0;  // the span the rates and percentiles cover (0: one sample so far)
  std::int64_t n_running = 0, n_waiting = 0;
  std::int64_t n_connections = 0;
  std::uint64_t n_evicted_connections = 0;
  std::uint64_t n_succeeded = 0;                  // responses with a 2xx status, since start
  std::map<int, std::uint64_t> errors_by_status;  // 4xx and 5xx (499: client went away), since start
  double prompt_tokens_per_s = 0;     // prompts of requests that finished in the window
  double generated_tokens_per_s = 0;  // tokens as they were sent
  double steps_per_s = 0;
  std::optional<double> ttft_p50_s, ttft_p99_s, itl_p50_s, itl_p99_s;
  std::int64_t kv_pages_used = 0, kv_pages_backed = 0, kv_pages_reserved = 0;
  std::optional<double> prefix_hit_rate;      // over the window, else since start
  std::optional<double> draft_acceptance;     // accepted / proposed drafts, when speculating
  std::optional<double> tokens_per_verify;    // tokens a verify row commits (accepted + 1)
  std::optional<double> weight_bytes_per_s;   // decode_weight_bytes x steps/s
  std::optional<double> bandwidth_share;      // of the device's bandwidth, when known
  std::optional<DeviceMemoryUse> memory;
};

// A sliding window of samples: add() keeps the newest and the last one at least `window` old,
// so differences always span about the window once it has filled.
class DashboardWindow {
 public:
  explicit DashboardWindow(std::chrono::milliseconds window = std::chrono::seconds(10)) : window_(window) {}
  void add(DashboardSample sample);
  bool empty() const { return samples_.empty(); }
  DashboardView view(const DashboardInfo& info, DashboardClock::time_point started) const;

 private:
  std::chrono::milliseconds window_;
  std::deque<DashboardSample> samples_;
};

}  // namespace flare::cli
