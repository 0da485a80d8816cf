// The speculative-round part of a benchmark report (--rounds): each case's statistics over every
// seed's samples, the aggregate (the equal-weight mean of case medians, only when every case
// completed), the table and the JSON section with raw samples by seed.
#pragma once

#include <string>

#include <nlohmann/json_fwd.hpp>

#include "bench/bench_report.h"

namespace flare::bench {

// Fills each case's timing and ratio from its samples and the report's aggregate.
void rounds_derive(BenchReport& report);
std::string rounds_table(const BenchReport& report);
nlohmann::json rounds_json(const BenchReport& report);

}  // namespace flare::bench
