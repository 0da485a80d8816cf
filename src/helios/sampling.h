// Token sampling with one semantics for every backend (the CUDA backend's kernels are checked
// against this). Order of processing, as vLLM: logit bias, repetition penalty (prompt and output
// tokens), presence and frequency penalties (output tokens), then greedy (temperature 0) or
// temperature, top-k, top-p, min-p and a draw. Randomness is counter-based (Philox4x32-10): the draw for a
// request's i-th generated token depends only on (seed, i), so the same seed and prompt give the
// same tokens whatever else shares the batch. Logprobs are the raw model's (before any processing).
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <utility>
#include <vector>

namespace flare::helios {

struct SamplingParams {
  float temperature = 1.0f;          // 0: greedy
  std::int32_t top_k = 0;            // 0: off
  float top_p = 1.0f;                // 1: off
  float min_p = 0.0f;                // 0: off
  float presence_penalty = 0.0f;     // subtracted once from every token already generated
  float frequency_penalty = 0.0f;    // subtracted per occurrence in the generated tokens
  float repetition_penalty = 1.0f;   // divides positive / multiplies negative logits of seen tokens
  std::vector<std::pair<std::int32_t, float>> logit_bias;  // token id -> added to its logit
  std::uint64_t seed = 0;
  std::int32_t n_top_logprobs = 0;   // alternatives to report with their logprobs (0: none)
};

// A request's tokens so far, for the penalties.
struct TokenHistory {
  std::span<const std::int32_t> prompt;
  std::span<const std::int32_t> output;
};

struct SampledToken {
  std::int32_t token = 0;
  float logprob = 0.0f;                                         // raw logprob of `token`
  std::vector<std::pair<std::int32_t, float>> top_logprobs;    // best first, raw
};

// Samples one token from logits [vocab] f32 for the request's `output_index`-th generated token.
// Throws flare::Error (usage) for parameters out of range or bias ids outside the vocabulary.
SampledToken sample_token(std::span<const float> logits, const SamplingParams& params,
                          const TokenHistory& history, std::uint64_t output_index);

// Checks parameters once at admission: ranges and the vocabulary size.
void sampling_params_validate(const SamplingParams& params, std::int32_t vocab_size);

// The uniform [0, 1) number the draw uses: Philox4x32-10 keyed by the seed (low word first) at
// counter (output_index low, high, 0, 0); the top 53 bits of words 0 and 1. The CUDA sampler
// computes the same bits, so a seeded request draws the same tokens on every backend.
double sampling_uniform(std::uint64_t seed, std::uint64_t output_index);

// Philox4x32-10 itself (exposed for its known-answer test).
std::array<std::uint32_t, 4> sampling_philox(std::array<std::uint32_t, 4> counter, std::array<std::uint32_t, 2> key);

}  // namespace flare::helios
