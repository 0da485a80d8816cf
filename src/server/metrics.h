// Server metrics and their Prometheus text exposition (GET /metrics): requests by endpoint
// and status, prompt and generated tokens, time-to-first-token and time-per-output-token
// histograms, plus the engine's gauges (running, waiting, KV pages, prefix-cache hit rate).
// Thread-safe: HTTP threads record, /metrics reads.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <mutex>
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

 private:
  std::vector<double> bounds_;
  std::vector<uint64_t> counts_;  // per bucket (not cumulative); last is +Inf
  double sum_ = 0.0;
  uint64_t count_ = 0;
};

class Metrics {
 public:
  Metrics();
  void record_request(const std::string& endpoint, int status);
  void record_tokens(int64_t n_prompt_tokens, int64_t n_generated_tokens);
  void record_time_to_first_token(double seconds);
  void record_time_per_output_token(double seconds);
  void record_e2e_latency(double seconds);
  std::string render(const engine::EngineStats& stats, const std::string& model_name) const;

 private:
  mutable std::mutex mutex_;
  std::map<std::pair<std::string, int>, uint64_t> requests_;
  uint64_t n_prompt_tokens_ = 0, n_generated_tokens_ = 0;
  Histogram ttft_s_, tpot_s_, e2e_s_;
};

}  // namespace flare::server
