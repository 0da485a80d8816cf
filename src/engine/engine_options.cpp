// Engine settings: policy names and range checks (see engine_options.h).
#include "engine/engine_options.h"

#include <cmath>

#include "common/error.h"

namespace flare::engine {

SchedulerPolicy scheduler_policy_parse(std::string_view text) {
  if (text == "balanced") return SchedulerPolicy::balanced;
  if (text == "throughput") return SchedulerPolicy::throughput;
  fail_usage("--scheduler-policy must be balanced or throughput, got '{}'", text);
}

const char* scheduler_policy_name(SchedulerPolicy policy) {
  return policy == SchedulerPolicy::throughput ? "throughput" : "balanced";
}

void engine_options_validate(const EngineOptions& options) {
  if (options.max_concurrency < 1) fail_usage("--max-concurrency must be >= 1, got {}", options.max_concurrency);
  if (options.prefill_chunk_tokens < 1) {
    fail_usage("--prefill-chunk-size must be >= 1, got {}", options.prefill_chunk_tokens);
  }
  if (options.page_size_tokens < 1) fail_usage("KV page size must be >= 1 token, got {}", options.page_size_tokens);
  if (options.n_pages < 1) fail_usage("the KV cache needs at least one page, got {}", options.n_pages);
  if (!options.kv_groups.empty() && options.kv_groups.front().n_pages != options.n_pages) {
    fail_usage("history group 0 has {} pages, n_pages says {}", options.kv_groups.front().n_pages, options.n_pages);
  }
  for (const auto& group : options.kv_groups) {
    if (group.n_pages < 1 || group.window_tokens < 0) {
      fail_usage("a history group needs at least one page and a window >= 0, got {} pages, window {}", group.n_pages,
                 group.window_tokens);
    }
  }
  if (options.context_limit < 2) fail_usage("context limit must be >= 2 tokens, got {}", options.context_limit);
  if (options.max_waiting < 0) fail_usage("request queue size must be >= 0, got {}", options.max_waiting);
  if (options.prefix_checkpoints_per_slot < 0) {
    fail_usage("prefix checkpoints per slot must be >= 0, got {}", options.prefix_checkpoints_per_slot);
  }
  if (options.prefix_snapshots_per_slot < 0) {
    fail_usage("prefix snapshots per slot must be >= 0, got {}", options.prefix_snapshots_per_slot);
  }
  if (options.max_draft_tokens < 0 || options.max_draft_tokens > k_max_draft_tokens) {
    fail_usage("--mtp-draft-tokens must be within 0..{}, got {}", k_max_draft_tokens, options.max_draft_tokens);
  }
  if (!std::isfinite(options.terminal_value) || options.terminal_value < 0) {
    fail_usage("--scheduler-terminal-value must be finite and nonnegative, got {}", options.terminal_value);
  }
  if (!std::isfinite(options.terminal_age_price) || options.terminal_age_price < 0) {
    fail_usage("--scheduler-terminal-age-price must be finite and nonnegative, got {}", options.terminal_age_price);
  }
}

}  // namespace flare::engine
