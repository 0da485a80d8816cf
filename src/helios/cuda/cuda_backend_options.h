// What a CudaBackend is built with beyond its device and kernel cache: switches for measuring what
// a kernel or launch mode brings, and for tests that reach a kernel layout the device would not
// pick. The defaults are what ignition export, flare run and every other caller get; a package is
// exported with them, and `flare run` loads it with them. The backend hands each switch to the part
// that uses it (the GEMM runner, the launch path, the sampler) at construction; nothing reads them
// from the environment.
//
// Plain data with no dependencies, so the benchmark's options (src/bench/bench_options.h) hold one
// in builds without the CUDA headers.
#pragma once

#include <string_view>

namespace flare::helios::cuda {

// Which kernels launch with programmatic dependent launch (sm_90+; earlier devices never do).
enum class DependentLaunch {
  // The kernels with work to do before they wait for the previous one (the skinny, streaming and
  // FP8 GEMMs, the decode attention): their first loads hide under the previous kernel's tail.
  early_work,
  // Every kernel. Slower on the Llama-3.1-8B batch-1 decode step of an H200 (docs/PERF.md).
  all,
  // None.
  off,
};

// "early-work", "all", "off" (the `--dependent-launch` values).
constexpr std::string_view dependent_launch_name(DependentLaunch mode) {
  switch (mode) {
    case DependentLaunch::all: return "all";
    case DependentLaunch::off: return "off";
    case DependentLaunch::early_work: break;
  }
  return "early-work";
}

struct CudaBackendOptions {
  // Whether the tensor-core streaming GEMM (kernels/stream_gemm.cu, sm_90 only) races cuBLASLt for
  // 9 <= m <= 128. false leaves its modules uncompiled, so an export made so carries none of them,
  // and the race picks among the others. Default true (`--no-stream-gemm` turns it off, to measure
  // what it brings). A package without its modules loads with it off whatever this says.
  bool stream_gemm = true;
  // Which kernels overlap the previous one's tail; default early_work (`--dependent-launch`).
  DependentLaunch dependent_launch = DependentLaunch::early_work;
  // Whether each GEMM race prints its entrants (kind/variant=µs, the winner starred) on stderr, to
  // see why a kernel won. Default false (`--gemm-race-log`).
  bool gemm_race_log = false;
  // Whether the sampler runs one CTA a row where the device has thread block clusters (sm_90+),
  // instead of a cluster of 8: the layout devices before sm_90 get. It changes the sampler's module
  // (kernels/sample.cu compiled with FLARE_CLUSTER=1 instead of 8), which the constructor compiles.
  // Default false; tests set it to check that layout on an sm_90 device.
  bool sampler_one_cta = false;
  // Whether the sampler's CTAs read their slices of a row from global memory even where they fit in
  // shared memory (the path of vocabularies too large for it; the same module, a launch argument).
  // Default false; tests set it.
  bool sampler_global_slices = false;
  // moe_experts takes the grouped GEMV kernels for steps of up to this many (token, slot) pairs and
  // the tensor-core grouped GEMMs above (a shape-only choice, so graphs replay). Default -1: up to
  // max(64, 2 x the expert count) pairs, where the GEMVs won on an H200 (Qwen3-30B-A3B's experts: to
  // 32 tokens x 8 slots); tests and measurements set 0 (always the GEMMs) or a large count (always
  // the GEMVs).
  long long moe_gemv_max_pairs = -1;
  // moe_experts takes the fused decode kernels (two launches: no align or combine kernel; each warp
  // groups the step's pairs itself) for GEMV steps of up to this many pairs, at most 32. Default
  // -1: min(32, a quarter of the expert count); tests set 0 to check the unfused GEMVs and 32 to
  // check the fused ones.
  long long moe_fused_max_pairs = -1;
};

}  // namespace flare::helios::cuda
