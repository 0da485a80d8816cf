// Admission: capacity rejections in the spec's form and request validation (see admission.h).
#include "engine/admission.h"

#include <algorithm>

#include "common/error.h"
#include "common/sizes.h"
#include "helios/history.h"

namespace flare::engine {
namespace {

std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }

std::string tokens_text(std::int64_t n, const char* noun) {
  return format_count(std::uint64_t(n)) + " " + noun + (n == 1 ? "" : "s");
}

}  // namespace

std::int64_t admission_worst_case_pages(const EngineOptions& options, const GenerationRequest& request) {
  const std::int64_t page = options.page_size_tokens;
  const auto n_prompt = std::int64_t(request.prompt_token_ids.size());
  const std::int64_t n_total = std::min<std::int64_t>(n_prompt + std::max(request.max_tokens, 1), options.context_limit);
  const std::int64_t n_shared = n_prompt / page;
  const std::int64_t n_private = ceil_div(std::max(n_total, n_prompt), page) - n_shared;
  const std::int64_t n_worst = n_shared + std::int64_t(std::max(request.n, 1)) * n_private;
  // A group 0 of sliding-window layers holds about a window of pages per choice at most.
  const std::int32_t window = options.history_groups().front().window_tokens;
  if (window <= 0) return n_worst;
  const std::int64_t n_window =
      helios::history_window_pages(window, options.step_token_budget(), options.page_size_tokens);
  return std::min(n_worst, std::int64_t(std::max(request.n, 1)) * n_window);
}

std::optional<AdmissionError> admission_check(const EngineOptions& options, const GenerationRequest& request,
                                              std::int64_t n_waiting) {
  const auto n_prompt = std::int64_t(request.prompt_token_ids.size());
  if (n_prompt + 1 > options.context_limit) {
    AdmissionError error;
    error.needed = tokens_text(n_prompt, "prompt token") + " + 1 generated token = " +
                   tokens_text(n_prompt + 1, "token");
    error.available = "a context limit of " + tokens_text(options.context_limit, "token");
    error.options = "a prompt of at most " + tokens_text(options.context_limit - 1, "token");
    return error;
  }
  if (request.n > options.max_concurrency) {
    AdmissionError error;
    error.needed = format_count(std::uint64_t(request.n)) + " choices generated at once";
    error.available = "--max-concurrency " + format_count(std::uint64_t(options.max_concurrency));
    error.options = "--max-concurrency " + std::to_string(request.n) + ", or n <= " +
                    std::to_string(options.max_concurrency);
    return error;
  }
  const std::int64_t n_pages = admission_worst_case_pages(options, request);
  if (n_pages > options.n_pages) {
    const std::int64_t page = options.page_size_tokens;
    AdmissionError error;
    error.needed = tokens_text(n_pages * page, "token") + " of KV cache (" + tokens_text(n_pages, "page") + " of " +
                   std::to_string(page) + " for " + tokens_text(n_prompt, "prompt token") + " and " +
                   std::to_string(request.n) + " x " + tokens_text(request.max_tokens, "generated token") + ")";
    error.available = tokens_text(std::int64_t(options.n_pages) * page, "token") + " of KV cache (" +
                      tokens_text(options.n_pages, "page") + ")";
    error.options = options.kv_capacity_options + ", a smaller max_tokens or n";
    return error;
  }
  if (n_waiting >= options.max_waiting) {
    AdmissionError error;
    error.fits_later = true;
    error.needed = "a place in the request queue";
    error.available = tokens_text(options.max_waiting, "queued request") + " waiting for " +
                      std::to_string(options.max_concurrency) + " active slots";
    error.options = "retry later, a larger --max-concurrency";
    return error;
  }
  return std::nullopt;
}

helios::SamplingParams admission_sampling_params(const GenerationRequest& request, std::uint64_t engine_seed) {
  const SamplingParams& in = request.sampling;
  helios::SamplingParams out;
  out.temperature = in.temperature;
  out.top_k = in.top_k;
  out.top_p = in.top_p;
  out.min_p = in.min_p;
  out.presence_penalty = in.presence_penalty;
  out.frequency_penalty = in.frequency_penalty;
  out.repetition_penalty = in.repetition_penalty;
  out.logit_bias.assign(in.logit_bias.begin(), in.logit_bias.end());
  out.seed = in.seed.value_or(engine_seed);
  out.n_top_logprobs = request.logprobs || request.prompt_logprobs ? request.top_logprobs : 0;
  return out;
}

void admission_validate(const GenerationRequest& request, std::int32_t vocab_size) {
  if (request.prompt_token_ids.empty()) fail_usage("the prompt is empty: at least one token is needed");
  for (std::size_t i = 0; i < request.prompt_token_ids.size(); ++i) {
    const TokenId token = request.prompt_token_ids[i];
    if (token < 0 || token >= vocab_size) {
      fail_usage("prompt token {} at position {} is outside the vocabulary 0..{}", token, i, vocab_size - 1);
    }
  }
  if (request.n < 1) fail_usage("n must be >= 1, got {}", request.n);
  if (request.max_tokens < 1) fail_usage("max_tokens must be >= 1, got {}", request.max_tokens);
  if (request.min_tokens < 0) fail_usage("min_tokens must be >= 0, got {}", request.min_tokens);
  if (request.top_logprobs < 0 || request.top_logprobs > vocab_size) {
    fail_usage("top_logprobs must be in 0..{}, got {}", vocab_size, request.top_logprobs);
  }
  helios::sampling_params_validate(admission_sampling_params(request, 0), vocab_size);
}

}  // namespace flare::engine
