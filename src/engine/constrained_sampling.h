// Sampling under a TokenRule (token_constraint.h) on the host: forced tokens skip the draw,
// allowed lists mask every other id to -inf before the ordinary sampler runs. The reported
// logprob and top logprobs are the raw model's, as for unconstrained tokens.
#pragma once

#include <cstdint>
#include <span>

#include "engine/token_constraint.h"
#include "helios/sampling.h"

namespace flare::engine {

// logits: [vocab] f32 of the choice's position. Throws flare::Error (failure) for a rule that
// names ids outside the vocabulary or an empty allowed list (a constraint bug, not user input).
helios::SampledToken sample_constrained(const TokenRule& rule, std::span<const float> logits,
                                        const helios::SamplingParams& params, const helios::TokenHistory& history,
                                        std::uint64_t output_index);

}  // namespace flare::engine
