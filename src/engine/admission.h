// Admission checks run on the submitting thread before a request enters the engine: requests that
// can never fit (prompt beyond the context limit, more choices than concurrency slots, more KV
// than the whole pool) and a full queue (fits later) are answered with the spec's capacity form
// (section 6: what is needed, what is available, the setting that raises the limit). Malformed
// requests (token ids outside the vocabulary, sampling parameters out of range) throw
// flare::Error (usage). Pure functions; no engine state.
#pragma once

#include <cstdint>
#include <optional>

#include "engine/engine_options.h"
#include "engine/request.h"
#include "helios/sampling.h"

namespace flare::engine {

// Pages a request needs at most: its prompt's whole pages shared by the choices, and each
// choice's own pages from there to prompt + max_tokens (capped by the context limit).
std::int64_t admission_worst_case_pages(const EngineOptions& options, const GenerationRequest& request);

// A rejection, or nothing when the request may enter the queue (n_waiting requests queued now).
std::optional<AdmissionError> admission_check(const EngineOptions& options, const GenerationRequest& request,
                                              std::int64_t n_waiting);

// The base sampling parameters of a request (choice 0's seed; engine_seed when it set none).
helios::SamplingParams admission_sampling_params(const GenerationRequest& request, std::uint64_t engine_seed);

// Throws flare::Error (usage) for a malformed request against a vocabulary of vocab_size ids.
void admission_validate(const GenerationRequest& request, std::int32_t vocab_size);

}  // namespace flare::engine
