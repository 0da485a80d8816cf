// What a model's weights amount to, from its weight table and the bytes each prepared tensor is
// stored in: parameters in all and active for one token, and the bytes one decode step reads for
// one request (dense weights, the experts one token activates and the output head, at stored
// precision; the embedding contributes only its tokens' rows and is left out, unless tied as the
// head). `flare inspect` and the export's memory plan show these.
#pragma once

#include <cstdint>
#include <functional>
#include <string_view>

#include "model/spec.h"

namespace flare::model {

struct WeightSummary {
  std::int64_t n_parameters = 0;
  std::int64_t n_active_parameters = 0;  // what one token multiplies by
  std::int32_t n_experts = 0;            // 0: dense
  std::int32_t experts_per_token = 0;
  std::uint64_t stored_bytes = 0;         // every prepared tensor, with its scales
  std::uint64_t expert_bytes = 0;         // of which the expert stacks
  std::uint64_t decode_weight_bytes = 0;  // one decode step of one request
};

// `stored_bytes(name)`: the bytes the prepared tensor `name` is stored in (its scales included).
WeightSummary weight_summary(const ModelSpec& spec, const std::function<std::uint64_t(std::string_view)>& stored_bytes);

}  // namespace flare::model
