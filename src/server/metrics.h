// Server metrics and their Prometheus text exposition (GET /metrics): requests by endpoint
// and status, prompt and generated tokens, time-to-first-token and time-per-output-token
// histograms, plus the engine's gauges (running, waiting, KV pages, prefix-cache hit rate).
// Thread-safe: HTTP threads record, /metrics reads.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "engine/request.h"

namespace flare::server {

class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds) : bounds_(std::move(bounds)), counts_(bounds_.size() + 1, 0) {}
  void observe(double value);
  // Appends "name_bucket{le=...}", "name_sum", "name_count" lines.
  void render(const std::string& name, std::string& out) const;
  const std::vector<double>& bounds() const { return bounds_; }
  const std::vector<uint64_t>& counts() const { return counts_; }
  uint64_t count() const { return count_; }

 private:
  std::vector<double> bounds_;
  std::vector<uint64_t> counts_;  // per bucket (not cumulative); last is +Inf
  double sum_ = 0.0;
  uint64_t count_ = 0;
};

// A copy of the counters at one moment, for readers that difference two of them over a window
// (the live dashboard): cumulative counts only, so any two snapshots subtract.
struct MetricsSnapshot {
  std::map<int, uint64_t> requests_by_status;  // every endpoint but /health and /metrics
  uint64_t n_prompt_tokens = 0, n_generated_tokens = 0;
  std::vector<double> ttft_bounds_s, tpot_bounds_s;
  std::vector<uint64_t> ttft_counts, tpot_counts;  // per bucket, the last one +Inf
  int64_t n_open_connections = 0;
  uint64_t n_evicted_connections = 0;
};

// The value below which `quantile` of the observations counted in `counts` fall (per-bucket counts
// over `bounds`, the last bucket +Inf), interpolated linearly inside its bucket as Prometheus's
// histogram_quantile does; nullopt with no observations. An answer in the +Inf bucket is the
// largest finite bound.
std::optional<double> histogram_quantile(const std::vector<double>& bounds, const std::vector<uint64_t>& counts,
                                         double quantile);

class Metrics {
 public:
  Metrics();
  void record_request(const std::string& endpoint, int status);
  void record_tokens(int64_t n_prompt_tokens, int64_t n_generated_tokens);
  void record_time_to_first_token(double seconds);
  void record_time_per_output_token(double seconds);
  void record_e2e_latency(double seconds);
  // Connections: the server counts them as they open and close, and those it closes to make room.
  void connection_opened() { n_open_connections_.fetch_add(1, std::memory_order_relaxed); }
  void connection_closed() { n_open_connections_.fetch_sub(1, std::memory_order_relaxed); }
  void connection_evicted() { n_evicted_connections_.fetch_add(1, std::memory_order_relaxed); }
  std::string render(const engine::EngineStats& stats, const std::string& model_name) const;
  MetricsSnapshot snapshot() const;

 private:
  mutable std::mutex mutex_;
  std::map<std::pair<std::string, int>, uint64_t> requests_;
  uint64_t n_prompt_tokens_ = 0, n_generated_tokens_ = 0;
  Histogram ttft_s_, tpot_s_, e2e_s_;
  std::atomic<int64_t> n_open_connections_{0};
  std::atomic<uint64_t> n_evicted_connections_{0};
};

}  // namespace flare::server
