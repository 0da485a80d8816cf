// Times GEMM candidates on the real operands with CUDA events and picks the fastest (the spec's
// "algorithm chosen by timing the candidates cuBLASLt returns on the real shapes"). Generic over what
// a candidate is: the caller enqueues candidate i. Each candidate runs n_warmup times, then
// n_reps times between two events; a race is n_rounds such passes over all candidates, interleaved
// so clock ramps and neighbours' noise hit every candidate alike, and a candidate's time is its best
// round's mean. Candidate 0 (the heuristic's first choice) keeps the race unless another beats it by
// 2%. Synchronizes the stream: never call it while the stream is being captured.
#pragma once

#include <functional>
#include <vector>

#include "helios/cuda/driver.h"
#include "helios/gemm_tuning.h"

namespace flare::helios::cuda {

struct RaceSettings {
  int n_candidates = 8;  // how many of the heuristic's candidates to ask for and time
  int n_warmup = 3;
  int n_reps = 10;
  int n_rounds = 2;
  // off: 1 candidate, no timing; default: 8 candidates; audit: 16 candidates, more repetitions.
  static RaceSettings for_effort(TuneEffort effort);
};

struct RaceResult {
  int winner = -1;                  // index of the fastest candidate, -1 when none ran
  float time_us = 0.0f;             // its time per run
  std::vector<float> times_us;      // per candidate; negative for one that failed to launch
};

// enqueue(i) enqueues candidate i once on `stream` and returns false if it cannot run (it is then
// dropped from the race).
RaceResult race(int n_candidates, const std::function<bool(int)>& enqueue, const Stream& stream,
                const RaceSettings& settings);

}  // namespace flare::helios::cuda
