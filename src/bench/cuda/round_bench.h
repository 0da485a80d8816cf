// --rounds on the CUDA backend: complete speculative rounds per batch x context x seed (see
// bench_options.h). A round replays the verify graph of its rows (every token's logits wanted),
// samples each position on the device with a seeded sampler and accepts the drafts that match,
// as the engine's verify rows do; proposals are random tokens (history drafts, which cost nothing).
#pragma once

#include <cstdint>
#include <functional>
#include <string_view>

#include "bench/bench_report.h"
#include "bench/cuda/device_fill.h"
#include "bench/cuda/timing_backend.h"
#include "model/model.h"

namespace flare::bench::cuda {

// Measures every case into report.rounds; a case that fails records its failure and the run goes on.
void measure_rounds(TimingBackend& timing, model::Model& model, DeviceFill& fill, const BenchOptions& options,
                    std::int32_t page_size_tokens, BenchReport& report,
                    const std::function<void(std::string_view)>& progress);

}  // namespace flare::bench::cuda
