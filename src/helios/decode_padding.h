// Padding a decode step up to a captured batch bucket. A CUDA graph is captured per bucket of
// decode rows (powers of two up to the concurrency limit); a decode step of n rows runs the graph
// of the smallest bucket >= n after dummy rows fill it up. A dummy row computes token 0 at position
// 0 of a scratch page that no sequence owns: it writes its K and V there (only there) and produces
// a logits row nobody reads. Real rows keep their order, so their logits rows come first.
#pragma once

#include <cstdint>
#include <span>

#include "helios/step.h"

namespace flare::helios {

// True when every row computes one token and wants its logits (the shape decode graphs run).
bool step_is_decode(const Step& step);

// The smallest of `buckets` (any order) that holds the rows of `step`, when `step` is a non-empty
// decode step; 0 otherwise (the step runs eagerly).
std::int32_t decode_bucket_for(const Step& step, std::span<const std::int32_t> buckets);

// `step` with dummy rows appended up to n_rows rows (see above); n_rows >= step.n_rows().
Step step_pad_decode(const Step& step, std::int32_t n_rows, std::int32_t scratch_page);

}  // namespace flare::helios
