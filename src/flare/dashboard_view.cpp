// Window arithmetic of the live dashboard (dashboard_view.h).
#include "flare/dashboard_view.h"

#include <algorithm>

namespace flare::cli {
namespace {

std::vector<std::uint64_t> subtract(const std::vector<std::uint64_t>& now, const std::vector<std::uint64_t>& then) {
  std::vector<std::uint64_t> out(now.size(), 0);
  for (std::size_t i = 0; i < now.size(); ++i) out[i] = now[i] - (i < then.size() ? std::min(then[i], now[i]) : 0);
  return out;
}

std::uint64_t total(const std::vector<std::uint64_t>& counts) {
  std::uint64_t sum = 0;
  for (auto c : counts) sum += c;
  return sum;
}

double per_second(double delta, double seconds) { return seconds > 0 ? delta / seconds : 0.0; }

}  // namespace

void DashboardWindow::add(DashboardSample sample) {
  samples_.push_back(std::move(sample));
  const auto horizon = samples_.back().at - window_;
  // Drop the oldest while the next one is old enough to be the window's base.
  while (samples_.size() > 2 && samples_[1].at <= horizon) samples_.pop_front();
}

DashboardView DashboardWindow::view(const DashboardInfo& info, DashboardClock::time_point started) const {
  DashboardView v;
  if (samples_.empty()) return v;
  const DashboardSample& now = samples_.back();
  const DashboardSample& then = samples_.front();
  v.uptime_s = std::chrono::duration<double>(now.at - started).count();
  v.window_s = std::chrono::duration<double>(now.at - then.at).count();
  const double dt = v.window_s;

  v.n_running = now.engine.n_running;
  v.n_waiting = now.engine.n_waiting;
  v.n_connections = now.metrics.n_open_connections;
  v.n_evicted_connections = now.metrics.n_evicted_connections;
  for (const auto& [status, count] : now.metrics.requests_by_status) {
    if (status >= 200 && status < 300) v.n_succeeded += count;
    if (status >= 400) v.errors_by_status[status] += count;
  }

  v.prompt_tokens_per_s = per_second(static_cast<double>(now.metrics.n_prompt_tokens - then.metrics.n_prompt_tokens), dt);
  // A first token counts in the TTFT histogram, each later one in the inter-token histogram.
  const auto ttft = subtract(now.metrics.ttft_counts, then.metrics.ttft_counts);
  const auto itl = subtract(now.metrics.tpot_counts, then.metrics.tpot_counts);
  v.generated_tokens_per_s = per_second(static_cast<double>(total(ttft) + total(itl)), dt);
  v.steps_per_s = per_second(static_cast<double>(now.n_steps - then.n_steps), dt);
  v.ttft_p50_s = server::histogram_quantile(now.metrics.ttft_bounds_s, ttft, 0.50);
  v.ttft_p99_s = server::histogram_quantile(now.metrics.ttft_bounds_s, ttft, 0.99);
  v.itl_p50_s = server::histogram_quantile(now.metrics.tpot_bounds_s, itl, 0.50);
  v.itl_p99_s = server::histogram_quantile(now.metrics.tpot_bounds_s, itl, 0.99);

  v.kv_pages_used = now.engine.n_kv_pages_used;
  v.kv_pages_backed = now.engine.n_kv_pages_backed;
  v.kv_pages_reserved = std::max(info.n_kv_pages, now.engine.n_kv_pages_used + now.engine.n_kv_pages_free);
  const auto queried = now.engine.n_prefix_queried_tokens - then.engine.n_prefix_queried_tokens;
  if (queried > 0) {
    v.prefix_hit_rate = static_cast<double>(now.engine.n_prefix_hit_tokens - then.engine.n_prefix_hit_tokens) /
                        static_cast<double>(queried);
  } else if (now.engine.n_prefix_queried_tokens > 0) {
    v.prefix_hit_rate = static_cast<double>(now.engine.n_prefix_hit_tokens) /
                        static_cast<double>(now.engine.n_prefix_queried_tokens);
  }
  if (info.speculation) {
    auto drafts = now.engine.n_draft_tokens - then.engine.n_draft_tokens;
    auto accepted = now.engine.n_accepted_draft_tokens - then.engine.n_accepted_draft_tokens;
    auto rows = now.engine.n_verify_rows - then.engine.n_verify_rows;
    if (drafts == 0) {  // nothing verified in the window: since start
      drafts = now.engine.n_draft_tokens;
      accepted = now.engine.n_accepted_draft_tokens;
      rows = now.engine.n_verify_rows;
    }
    if (drafts > 0) v.draft_acceptance = static_cast<double>(accepted) / static_cast<double>(drafts);
    if (rows > 0) v.tokens_per_verify = 1.0 + static_cast<double>(accepted) / static_cast<double>(rows);
  }
  if (info.decode_weight_bytes > 0) {
    v.weight_bytes_per_s = static_cast<double>(info.decode_weight_bytes) * v.steps_per_s;
    if (info.device_bandwidth_bytes_per_s && *info.device_bandwidth_bytes_per_s > 0)
      v.bandwidth_share = *v.weight_bytes_per_s / *info.device_bandwidth_bytes_per_s;
  }
  v.memory = now.memory;
  return v;
}

}  // namespace flare::cli
