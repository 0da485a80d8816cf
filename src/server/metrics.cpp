// Prometheus text format 0.0.4 exposition (metrics.h).
#include "server/metrics.h"

#include <algorithm>

#include <fmt/format.h>

namespace flare::server {

void Histogram::observe(double value) {
  size_t i = 0;
  while (i < bounds_.size() && value > bounds_[i]) ++i;
  ++counts_[i];
  sum_ += value;
  ++count_;
}

void Histogram::render(const std::string& name, std::string& out) const {
  uint64_t cumulative = 0;
  for (size_t i = 0; i < bounds_.size(); ++i) {
    cumulative += counts_[i];
    out += fmt::format("{}_bucket{{le=\"{}\"}} {}\n", name, bounds_[i], cumulative);
  }
  out += fmt::format("{}_bucket{{le=\"+Inf\"}} {}\n{}_sum {}\n{}_count {}\n", name, count_, name, sum_, name, count_);
}

Metrics::Metrics()
    : ttft_s_({0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0}),
      tpot_s_({0.001, 0.0025, 0.005, 0.01, 0.015, 0.02, 0.025, 0.03, 0.04, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.5, 1.0}),
      e2e_s_({0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 20.0, 30.0, 60.0, 120.0, 300.0}) {}

void Metrics::record_request(const std::string& endpoint, int status) {
  std::lock_guard lock(mutex_);
  ++requests_[{endpoint, status}];
}

void Metrics::record_tokens(int64_t n_prompt_tokens, int64_t n_generated_tokens) {
  std::lock_guard lock(mutex_);
  n_prompt_tokens_ += n_prompt_tokens;
  n_generated_tokens_ += n_generated_tokens;
}

void Metrics::record_time_to_first_token(double seconds) {
  std::lock_guard lock(mutex_);
  ttft_s_.observe(seconds);
}

void Metrics::record_time_per_output_token(double seconds) {
  std::lock_guard lock(mutex_);
  tpot_s_.observe(seconds);
}

void Metrics::record_e2e_latency(double seconds) {
  std::lock_guard lock(mutex_);
  e2e_s_.observe(seconds);
}

std::optional<double> histogram_quantile(const std::vector<double>& bounds, const std::vector<uint64_t>& counts,
                                         double quantile) {
  uint64_t total = 0;
  for (uint64_t c : counts) total += c;
  if (total == 0 || bounds.empty()) return std::nullopt;
  const double rank = quantile * static_cast<double>(total);
  uint64_t below = 0;
  for (size_t i = 0; i < counts.size(); ++i) {
    if (counts[i] == 0 || static_cast<double>(below + counts[i]) < rank) {
      below += counts[i];
      continue;
    }
    if (i >= bounds.size()) return bounds.back();
    const double lower = i == 0 ? 0.0 : bounds[i - 1];
    const double within = (rank - static_cast<double>(below)) / static_cast<double>(counts[i]);
    return lower + (bounds[i] - lower) * std::clamp(within, 0.0, 1.0);
  }
  return bounds.back();
}

MetricsSnapshot Metrics::snapshot() const {
  MetricsSnapshot s;
  std::lock_guard lock(mutex_);
  for (const auto& [key, count] : requests_) {
    if (key.first == "/health" || key.first == "/metrics") continue;  // probes, not traffic
    s.requests_by_status[key.second] += count;
  }
  s.n_prompt_tokens = n_prompt_tokens_;
  s.n_generated_tokens = n_generated_tokens_;
  s.ttft_bounds_s = ttft_s_.bounds();
  s.ttft_counts = ttft_s_.counts();
  s.tpot_bounds_s = tpot_s_.bounds();
  s.tpot_counts = tpot_s_.counts();
  s.n_open_connections = n_open_connections_.load(std::memory_order_relaxed);
  s.n_evicted_connections = n_evicted_connections_.load(std::memory_order_relaxed);
  return s;
}

namespace {
std::string escape_label(const std::string& value) {
  std::string out;
  for (char c : value) {
    if (c == '\\' || c == '"') out += '\\';
    if (c == '\n') { out += "\\n"; continue; }
    out += c;
  }
  return out;
}
}  // namespace

std::string Metrics::render(const engine::EngineStats& stats, const std::string& model_name) const {
  std::lock_guard lock(mutex_);
  std::string model = escape_label(model_name);
  std::string out;
  out += "# HELP flare_requests_total HTTP requests by endpoint and status.\n# TYPE flare_requests_total counter\n";
  for (const auto& [key, count] : requests_) {
    out += fmt::format("flare_requests_total{{endpoint=\"{}\",status=\"{}\"}} {}\n", escape_label(key.first),
                       key.second, count);
  }
  out += "# HELP flare_prompt_tokens_total Prompt tokens of finished requests.\n# TYPE flare_prompt_tokens_total counter\n";
  out += fmt::format("flare_prompt_tokens_total{{model=\"{}\"}} {}\n", model, n_prompt_tokens_);
  out += "# HELP flare_generation_tokens_total Generated tokens.\n# TYPE flare_generation_tokens_total counter\n";
  out += fmt::format("flare_generation_tokens_total{{model=\"{}\"}} {}\n", model, n_generated_tokens_);
  out += "# HELP flare_time_to_first_token_seconds Time from arrival to the first generated token.\n"
         "# TYPE flare_time_to_first_token_seconds histogram\n";
  ttft_s_.render("flare_time_to_first_token_seconds", out);
  out += "# HELP flare_time_per_output_token_seconds Time between generated tokens after the first.\n"
         "# TYPE flare_time_per_output_token_seconds histogram\n";
  tpot_s_.render("flare_time_per_output_token_seconds", out);
  out += "# HELP flare_e2e_request_latency_seconds Time from arrival to the last byte.\n"
         "# TYPE flare_e2e_request_latency_seconds histogram\n";
  e2e_s_.render("flare_e2e_request_latency_seconds", out);
  auto gauge = [&](const char* name, const char* help, double value) {
    out += fmt::format("# HELP {} {}\n# TYPE {} gauge\n{}{{model=\"{}\"}} {}\n", name, help, name, name, model, value);
  };
  gauge("flare_num_requests_running", "Requests in the running batch.", static_cast<double>(stats.n_running));
  gauge("flare_num_requests_waiting", "Requests admitted and waiting.", static_cast<double>(stats.n_waiting));
  gauge("flare_kv_pages_used", "KV cache pages in use.", static_cast<double>(stats.n_kv_pages_used));
  gauge("flare_kv_pages_free", "KV cache pages free.", static_cast<double>(stats.n_kv_pages_free));
  gauge("flare_kv_pages_backed", "KV cache pages with device memory behind them.",
        static_cast<double>(stats.n_kv_pages_backed));
  double hit_rate = stats.n_prefix_queried_tokens > 0
                        ? static_cast<double>(stats.n_prefix_hit_tokens) / static_cast<double>(stats.n_prefix_queried_tokens)
                        : 0.0;
  gauge("flare_prefix_cache_hit_rate", "Prompt tokens found in the prefix cache / prompt tokens looked up.", hit_rate);
  auto counter = [&](const char* name, const char* help, std::int64_t value) {
    out += fmt::format("# HELP {} {}\n# TYPE {} counter\n{}{{model=\"{}\"}} {}\n", name, help, name, name, model, value);
  };
  counter("flare_spec_decode_verify_rounds_total", "Decode rows that verified draft tokens.", stats.n_verify_rows);
  counter("flare_spec_decode_draft_tokens_total", "Draft tokens proposed for verification.", stats.n_draft_tokens);
  counter("flare_spec_decode_accepted_tokens_total", "Draft tokens the target accepted.", stats.n_accepted_draft_tokens);
  // Tokens a verify round commits: the accepted drafts plus the round's own token.
  const double mean_accepted = stats.n_verify_rows > 0 ? 1.0 + static_cast<double>(stats.n_accepted_draft_tokens) /
                                                                   static_cast<double>(stats.n_verify_rows)
                                                       : 0.0;
  gauge("flare_spec_decode_mean_accepted_length", "Tokens committed per verify round (accepted drafts + 1).",
        mean_accepted);
  gauge("flare_http_connections", "Open HTTP connections.",
        static_cast<double>(n_open_connections_.load(std::memory_order_relaxed)));
  counter("flare_http_connections_evicted_total",
          "Connections closed before they finished sending a request, to make room at the connection cap.",
          static_cast<std::int64_t>(n_evicted_connections_.load(std::memory_order_relaxed)));
  return out;
}

}  // namespace flare::server
