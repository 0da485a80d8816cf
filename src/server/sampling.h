// Sampling and stopping fields shared by the adapters: reads them from a request body (each
// API's names), applies the package's defaults to omitted fields and clamps to its ranges,
// and sizes max_tokens against the context limit (a prompt that cannot fit is a capacity
// error in the spec section 6 form).
#pragma once

#include <optional>

#include "server/frontend.h"
#include "server/json_body.h"

namespace flare::server {

// temperature, top_p, top_k, min_p, penalties, seed, logit_bias, ignore_eos, min_tokens,
// stop_token_ids. `path` prefixes field names in errors.
void read_sampling_fields(const json& body, const ModelInfo& model, int32_t vocab_size,
                          engine::GenerationRequest& request);
// `stop` (OpenAI: string or array of strings) into request.stop_strings.
void read_stop_field(const json& body, const std::string& key, engine::GenerationRequest& request);
// n (1..model n_max).
void read_n_field(const json& body, const ModelInfo& model, engine::GenerationRequest& request);
// Sets request.max_tokens from the request's value (if any) and the context left after the
// prompt; throws ApiError 400 with the capacity form when the prompt leaves no room.
void apply_max_tokens(const ModelInfo& model, std::optional<int64_t> requested_max_tokens,
                      engine::GenerationRequest& request, const std::string& prompt_field);
// Checks that the requested model is served (404 otherwise, naming the served names).
void check_model_name(const ModelInfo& model, const std::optional<std::string>& name, bool required);

}  // namespace flare::server
