// What serving a model needs from a backend's kernels (helios/serving_catalog.h): its
// architecture's part (attention shapes, FP8 projections) and the serving settings' part (KV
// dtypes, page size, decode buckets, prefill chunk). One function for `ignition export`, which
// compiles the catalog, and `flare run`, which checks a package holds it.
#pragma once

#include <cstdint>
#include <vector>

#include "helios/dtype.h"
#include "helios/serving_catalog.h"
#include "model/spec.h"

namespace flare::model {

struct ServingSettings {
  std::vector<std::int32_t> decode_buckets;  // rows of the decode steps captured as graphs
  std::int32_t prefill_chunk_tokens = 0;
  std::int32_t page_size_tokens = 0;
  std::vector<helios::DType> kv_dtypes;      // KV page dtypes served
  // Speculative decoding (helios::KernelNeeds; 0: none): 1 + the most drafts a row verifies, the
  // verify rows' tokens a step, and the most verify graphs.
  std::int32_t max_verify_tokens = 0;
  std::int32_t verify_token_capacity = 0;
  std::int32_t verify_graph_budget = 0;
};

// Lists come out distinct and ascending, as the catalog keeps them. `draft`: a learned draft model
// served beside the target (speculative decoding) on the same backend; its attention shapes and
// FP8 projections join the target's (it shares the target's vocabulary).
helios::KernelNeeds kernel_needs(const ModelSpec& spec, const ServingSettings& serving,
                                 const ModelSpec* draft = nullptr);

}  // namespace flare::model
