// The internal generation contract between the HTTP adapters (src/server) and the engine.
// Plain data (plus an optional token constraint object): no JSON, no HTTP, no Boost. Every API
// (OpenAI, Anthropic, Responses) is translated into one GenerationRequest; the engine answers
// through an OutputSink with a stream of StepOutputs. Threads: adapters build requests on HTTP threads; the engine thread
// calls the sink; the sink's owner must make its own hand-off (the server posts to the
// connection's strand).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/token_constraint.h"

namespace flare::engine {

using TokenId = int32_t;

// Sampling parameters after the adapter applied package defaults and clamped to package ranges.
struct SamplingParams {
  float temperature = 1.0f;         // 0 selects greedy decoding
  float top_p = 1.0f;               // (0, 1]
  int32_t top_k = 0;                // 0 disables the filter
  float min_p = 0.0f;               // [0, 1]
  float presence_penalty = 0.0f;    // [-2, 2]
  float frequency_penalty = 0.0f;   // [-2, 2]
  float repetition_penalty = 1.0f;  // (0, 2]; 1 is neutral
  std::optional<uint64_t> seed;     // per-request generator seed; absent: engine-chosen
  std::map<TokenId, float> logit_bias;  // added to logits before sampling, [-100, 100]
};

// Package sampling defaults (fill fields a request omits) and the ranges the package allows.
struct SamplingDefaults {
  float temperature = 1.0f;
  float top_p = 1.0f;
  int32_t top_k = 0;
  float min_p = 0.0f;
  float repetition_penalty = 1.0f;
};

struct SamplingRanges {
  float temperature_max = 2.0f;
  int32_t top_k_max = 0;             // 0: no limit beyond the vocabulary
  int32_t top_logprobs_max = 20;
  int32_t n_max = 16;                // completions per request
};

struct GenerationRequest {
  std::string request_id;            // unique, printable; shown in responses and logs
  std::vector<TokenId> prompt_token_ids;
  SamplingParams sampling;
  int32_t max_tokens = 16;           // generated tokens per choice, >= 1 (already clamped to context)
  int32_t min_tokens = 0;            // stop conditions are ignored before this many tokens
  int32_t n = 1;                     // independent choices sharing the prompt (prefix-shared)
  std::vector<TokenId> stop_token_ids;  // in addition to the model's end-of-sequence ids
  bool ignore_eos = false;           // end-of-sequence ids do not finish the choice
  bool logprobs = false;             // report the chosen token's log-probability
  int32_t top_logprobs = 0;          // and this many alternatives per position
  bool prompt_logprobs = false;      // report log-probabilities of the prompt tokens (echo)
  // Stop strings are matched by the server on detokenized text (it owns the detokenizer);
  // the server cancels the choice when one matches. Kept here so the engine can log them.
  std::vector<std::string> stop_strings;
  // Constrained decoding (token_constraint.h): the template each choice clones at admission; null
  // for free generation. A constrained choice ends when its constraint is finished (stop), or by
  // max_tokens / the context limit; min_tokens, stop ids and end-of-sequence ids do not apply,
  // except while the constraint says it does not decide the end (decides_end()).
  std::shared_ptr<const TokenConstraint> constraint;
};

enum class FinishReason : uint8_t {
  none = 0,   // the choice continues
  stop,       // end-of-sequence or a stop token id
  length,     // max_tokens or the context limit
  abort,      // cancelled (client disconnect, server shutdown)
  error,      // the engine failed this request; see StepOutput::error_message
};

const char* finish_reason_name(FinishReason reason);  // "stop", "length", "abort", "error"

struct TokenLogprob {
  TokenId token_id = 0;
  float logprob = 0.0f;
};

// One generated (or, for prompt logprobs, prompt) position.
struct TokenOutput {
  TokenId token_id = 0;
  float logprob = 0.0f;                  // valid when the request asked for logprobs
  std::vector<TokenLogprob> top_logprobs;  // best first, request.top_logprobs entries
};

struct Usage {
  int32_t n_prompt_tokens = 0;
  int32_t n_cached_prompt_tokens = 0;    // prompt tokens served from the prefix cache
  int32_t n_generated_tokens = 0;        // over all choices
};

// What the engine reports for one choice after one scheduler step.
struct StepOutput {
  int32_t choice_index = 0;              // 0 .. n-1
  std::vector<TokenOutput> tokens;       // new tokens this step (more than one with speculation)
  std::vector<TokenOutput> prompt_tokens;  // prompt logprobs, once, before the first token
  FinishReason finish_reason = FinishReason::none;
  TokenId stop_token_id = -1;            // the id that finished the choice with `stop`, if any
  std::string error_message;             // with FinishReason::error
  // With FinishReason::error: the engine ran out of KV memory for the request (the device refused
  // more pages); error_message has the spec's capacity form and a retry may fit.
  bool capacity_error = false;
  Usage usage;                           // cumulative for the whole request
  bool request_finished = false;         // every choice has finished; no more outputs follow
};

// Receives a request's outputs. Called from the engine thread, never concurrently for one
// request; implementations hand the data to their own thread and return quickly.
class OutputSink {
 public:
  virtual ~OutputSink() = default;
  virtual void on_output(StepOutput output) = 0;
};

// Why a request was not admitted. `fits_later` separates a busy engine (retry later: queue
// full) from a request that can never fit (prompt longer than the context limit).
// The message follows spec section 6: what is needed, what is available, and the setting
// that raises the limit.
struct AdmissionError {
  bool fits_later = false;
  std::string needed;     // "9,000 prompt tokens + 1 generated token = 9,001 tokens"
  std::string available;  // "a context limit of 8,192 tokens"
  std::string options;    // "--kv-cache-limit" ...
  std::string message() const;  // "needs ...; has ...; Options: ..."
};

using RequestHandle = uint64_t;

// Engine counters and gauges read by /metrics (any thread).
struct EngineStats {
  int64_t n_running = 0;
  int64_t n_waiting = 0;
  int64_t n_kv_pages_used = 0;
  int64_t n_kv_pages_free = 0;    // free now, or still to be backed while the device has memory
  int64_t n_kv_pages_backed = 0;  // pages with device memory behind them (the rest are reserved)
  int64_t n_prefix_queried_tokens = 0;  // cumulative prompt tokens looked up
  int64_t n_prefix_hit_tokens = 0;      // cumulative prompt tokens found in the prefix cache
  // Speculative decoding, cumulative: verify rows, the drafts they carried, the drafts accepted.
  int64_t n_verify_rows = 0;
  int64_t n_draft_tokens = 0;
  int64_t n_accepted_draft_tokens = 0;
};

// What the server needs from the engine. Implementations are thread-safe: submit, cancel and
// stats are called from HTTP threads.
class Engine {
 public:
  virtual ~Engine() = default;
  // Admits the request or returns an AdmissionError. The sink must stay alive until it has
  // received an output with request_finished (also after cancel).
  struct SubmitResult {
    RequestHandle handle = 0;
    std::optional<AdmissionError> rejected;
  };
  virtual SubmitResult submit(GenerationRequest request, std::shared_ptr<OutputSink> sink) = 0;
  // Retires the request (all choices) soon; the sink then receives a final `abort` output.
  // Cancelling a finished or unknown handle does nothing.
  virtual void cancel(RequestHandle handle) = 0;
  // Retires one choice of a request (a stop string matched on that choice).
  virtual void cancel_choice(RequestHandle handle, int32_t choice_index) { cancel(handle); }
  virtual EngineStats stats() const = 0;
};

}  // namespace flare::engine
