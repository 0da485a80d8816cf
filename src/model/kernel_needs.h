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
};

// Lists come out distinct and ascending, as the catalog keeps them.
helios::KernelNeeds kernel_needs(const ModelSpec& spec, const ServingSettings& serving);

}  // namespace flare::model
