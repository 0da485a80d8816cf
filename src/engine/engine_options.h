// Engine settings (spec cli-design 3.2): concurrency, prefill chunk, KV geometry, context limit,
// scheduler policy and terminal-value coefficients, end-of-sequence ids. `flare run` derives them
// from flags, configuration and the package; tests set them directly. Plain data.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "engine/history_drafts.h"

namespace flare::engine {

// balanced: decode rows first every step (steady output cadence), prefill chunks fill the rest of
// the token budget. throughput: prefill chunks and admissions first (the batch fills sooner, output
// comes in larger bursts); a row skipped in one step goes first in the next (token-service
// fairness, no row waits two steps in a row).
enum class SchedulerPolicy : std::uint8_t { balanced, throughput };

SchedulerPolicy scheduler_policy_parse(std::string_view text);  // "balanced" | "throughput"
const char* scheduler_policy_name(SchedulerPolicy policy);

// Most draft tokens one verify row carries (a row computes at most 1 + this many tokens).
inline constexpr std::int32_t k_max_draft_tokens = 15;

// One step shape's measured time: `rows` rows of `tokens_per_row` tokens (1: decode).
struct MeasuredStepCost {
  std::int32_t rows = 0;
  std::int32_t tokens_per_row = 0;
  double milliseconds = 0.0;
};

struct EngineOptions {
  std::int32_t max_concurrency = 8;          // active choices (rows) at once
  std::int32_t prefill_chunk_tokens = 2048;  // most tokens one row computes in a step
  std::int32_t page_size_tokens = 16;
  std::int32_t n_pages = 4096;               // KV pages shared by requests and prefix checkpoints
  // A model of several history groups (helios/history.h): each group's pages and window, group 0
  // first (its n_pages is n_pages). Empty: one group of n_pages pages that keeps every position.
  struct KvGroup {
    std::int32_t n_pages = 0;
    std::int32_t window_tokens = 0;  // > 0: its sequences give back pages behind the window
  };
  std::vector<KvGroup> kv_groups;
  std::int32_t context_limit = 8192;         // prompt + generated tokens per choice
  std::int32_t max_waiting = 1024;           // queued requests; beyond: rejected, retry later
  std::int32_t prefix_checkpoints_per_slot = 8;  // prefix-cache checkpoints per concurrency slot
  // Of them, checkpoints that may end mid-page (each holds one partly filled snapshot page): spec
  // 3.3's "up to eight snapshot slots per concurrent request".
  std::int32_t prefix_snapshots_per_slot = 8;
  SchedulerPolicy scheduler_policy = SchedulerPolicy::balanced;
  // Terminal retirement (spec 3.2): a row whose next token certainly finishes its choice is worth
  // terminal_value prompt-token units plus terminal_age_price * (ms since that was observed)^2;
  // the value orders such rows ahead of others of their class. Zero disables a term.
  double terminal_value = 256.0;
  double terminal_age_price = 1.0;
  std::vector<std::int32_t> eos_token_ids;   // finish a choice unless the request ignores EOS
  std::uint64_t seed = 0x5eed;               // seeds of requests without one derive from this
  // Replay decode steps as captured graphs where the backend has them (the CUDA backend); off runs
  // every step op by op, for debugging (ModelStepRunner::capture_graphs then captures none).
  bool cuda_graphs = true;
  // Settings named by capacity rejections that a larger KV pool would fit.
  std::string kv_capacity_options = "--kv-cache-limit memory, a larger --memory-limit";
  // Speculative decoding: a decode row verifies its pending token plus up to max_draft_tokens
  // drafts (0: ordinary decoding). history_drafts: drafts copied from the choice's own prompt and
  // output (history_drafts.h), tried first. learned_drafts: the StepRunner has a draft model
  // (draft_plan.h), which then follows every sequence and drafts where history does not.
  std::int32_t max_draft_tokens = 0;
  bool history_drafts = false;
  bool learned_drafts = false;
  HistoryDraftSettings history_draft_settings;
  // The verify rows of one step carry at most this many tokens (pending tokens and drafts); rows
  // past it decode ordinarily. adaptive_verification: each round's draft count follows the
  // choice's measured acceptance (verify_policy.h) instead of always max_draft_tokens.
  std::int32_t speculative_token_capacity = 128;
  bool adaptive_verification = true;
  // The most verify step shapes captured as CUDA graphs (helios::serving_verify_shapes: the
  // smallest decode buckets first, every verify width of a bucket within the token capacity);
  // only uniform verify steps (every row of one width) replay one.
  std::int32_t speculative_graph_budget = 64;
  // Step times the package measured at export (decode and verify graphs on its GPU): adaptive
  // verification starts from them, then follows the steps this engine times.
  std::vector<MeasuredStepCost> measured_step_costs;
  // The most tokens a verify row computes when speculating (1 + max_draft_tokens), else 0.
  std::int32_t max_verify_tokens() const { return speculates() ? 1 + max_draft_tokens : 0; }

  // Tokens computed in one step over all rows: the prefill chunk, and at least a full verify row
  // (the pending token and the drafts) per slot.
  std::int32_t step_token_budget() const {
    const std::int32_t per_slot = max_concurrency * (1 + max_draft_tokens);
    return prefill_chunk_tokens > per_slot ? prefill_chunk_tokens : per_slot;
  }
  bool speculates() const { return max_draft_tokens > 0 && (history_drafts || learned_drafts); }
  // kv_groups, or the one group n_pages describes.
  std::vector<KvGroup> history_groups() const {
    return kv_groups.empty() ? std::vector<KvGroup>{KvGroup{n_pages, 0}} : kv_groups;
  }
};

// Throws flare::Error (usage) naming the first setting out of range.
void engine_options_validate(const EngineOptions& options);

}  // namespace flare::engine
