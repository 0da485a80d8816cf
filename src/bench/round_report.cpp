// Speculative rounds in the benchmark report (see round_report.h).
#include "bench/round_report.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace flare::bench {

void rounds_derive(BenchReport& r) {
  double sum = 0.0;
  bool all_complete = !r.rounds.empty();
  for (RoundCase& c : r.rounds) {
    std::vector<double> samples;
    for (const Timing& t : c.by_seed) samples.insert(samples.end(), t.samples_ms.begin(), t.samples_ms.end());
    c.complete = c.failure.empty() && !c.seeds.empty() && c.by_seed.size() == c.seeds.size();
    if (!samples.empty()) c.timing = timing_of(samples);
    c.round_over_decode = c.decode.median_ms > 0 && !samples.empty() ? c.timing.median_ms / c.decode.median_ms : 0.0;
    all_complete = all_complete && c.complete;
    sum += c.timing.median_ms;
  }
  r.rounds_aggregate_ms = all_complete ? sum / double(r.rounds.size()) : 0.0;
}

std::string rounds_table(const BenchReport& r) {
  if (r.rounds.empty()) return "";
  std::string out = fmt::format(
      "\nspeculative rounds ({} tokens a row: the pending token and {} drafts; verify graph, every position sampled "
      "on the device, drafts accepted; events around each round):\n",
      r.rounds.front().width, r.rounds.front().width - 1);
  out += fmt::format("  {:>5} {:>7} {:>10} {:>10} {:>10} {:>11} {:>8} {:>9}  {}\n", "batch", "context", "median ms",
                     "p25 ms", "p75 ms", "decode ms", "/ decode", "accepted", "status");
  for (const RoundCase& c : r.rounds) {
    out += fmt::format("  {:>5} {:>7} {:>10.3f} {:>10.3f} {:>10.3f} {:>11.3f} {:>7.2f}x {:>9.2f}  {}\n", c.batch,
                       c.context, c.timing.median_ms, c.timing.p25_ms, c.timing.p75_ms, c.decode.median_ms,
                       c.round_over_decode, c.accepted_per_round,
                       c.complete ? "complete" : "incomplete: " + (c.failure.empty() ? "not run" : c.failure));
  }
  if (r.rounds_aggregate_ms > 0) {
    out += fmt::format("aggregate (mean of the {} case medians, lower is better): {:.3f} ms\n", r.rounds.size(),
                       r.rounds_aggregate_ms);
  } else {
    out += "aggregate: none (a case did not complete)\n";
  }
  return out;
}

nlohmann::json rounds_json(const BenchReport& r) {
  using nlohmann::json;
  json cases = json::array();
  for (const RoundCase& c : r.rounds) {
    json samples = json::object();
    for (std::size_t i = 0; i < c.by_seed.size() && i < c.seeds.size(); ++i)
      samples[std::to_string(c.seeds[i])] = c.by_seed[i].samples_ms;
    json entry = {{"batch", c.batch},
                  {"context", c.context},
                  {"verify_width", c.width},
                  {"target_rows", c.batch * c.width},
                  {"complete", c.complete},
                  {"median_ms", c.timing.median_ms},
                  {"p25_ms", c.timing.p25_ms},
                  {"p75_ms", c.timing.p75_ms},
                  {"iqr_ms", c.timing.p75_ms - c.timing.p25_ms},
                  {"decode_median_ms", c.decode.median_ms},
                  {"round_over_decode", c.round_over_decode},
                  {"accepted_per_round", c.accepted_per_round},
                  {"samples_ms_by_seed", samples}};
    if (!c.failure.empty()) entry["failure"] = c.failure;
    cases.push_back(entry);
  }
  return {{"drafts", "random tokens (history drafts: proposals cost nothing, so a round is the verify step, "
                     "sampling and acceptance)"},
          {"context_state", "random KV pages; every round verifies the same positions, so each starts from the "
                            "same state"},
          {"seeds", r.options.seeds},
          {"cases", cases},
          {"aggregate_ms", r.rounds_aggregate_ms > 0 ? json(r.rounds_aggregate_ms) : json(nullptr)}};
}

}  // namespace flare::bench
