// Preparation on a GPU (`ignition export` for an sm_NN target): the serving catalog's kernel
// modules (helios/serving_catalog.h, enumerated from the model and the settings) are compiled
// through the on-disk kernel cache, the prepared weights are uploaded to the selected GPU, every
// GEMM shape the serving steps use is tuned (cuBLASLt candidates timed), the forwards the runtime
// will execute are run once, and the catalog's graphs are captured once to prove they capture.
// What comes out is what the package carries so that `flare run` compiles and tunes nothing: the
// catalog, its kernel images by module key and the GEMM tuning table. A warm-up that loads a
// module the catalog does not list fails the export: the enumeration missed a launch.
//
// Builds without the CUDA toolkit headers have no GPU preparation: the constructor throws.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "helios/serving_catalog.h"
#include "model/prepared_weights.h"
#include "model/spec.h"

namespace flare::ignition {

struct GpuPreparationOptions {
  int device_index = 0;                      // CUDA ordinal (relative to CUDA_VISIBLE_DEVICES)
  std::filesystem::path kernel_cache_dir;
  std::filesystem::path cuda_root = "/usr/local/cuda";
  std::string autotune_effort = "default";   // off | default | audit
  std::vector<std::uint32_t> buckets;        // decode concurrency buckets
  std::int32_t prefill_chunk_tokens = 2048;
  std::int32_t page_size_tokens = 16;
  // Speculative decoding (0: none): 1 + the most drafts a verify row carries, the verify rows'
  // tokens a step, and the most verify graphs (helios::serving_verify_shapes).
  std::int32_t max_verify_tokens = 0;
  std::int32_t verify_token_capacity = 0;
  std::int32_t verify_graph_budget = 0;
  // A learned draft model prepared beside the target (its tensors under "draft/" in the lookup
  // load_weights gets): its kernels join the catalog, its GEMM shapes are tuned, its forwards run
  // and its decode graphs captured like the target's.
  std::optional<model::ModelSpec> draft;
};

struct GpuPreparationCounts {
  std::int64_t n_compiled = 0;   // kernels NVRTC compiled (kernel cache misses)
  std::int64_t n_reused = 0;     // kernels found in the kernel cache
  std::int64_t n_tuned = 0;      // GEMM shapes timed
  std::int64_t n_shapes = 0;     // GEMM shapes in the table the package carries
  std::int64_t n_fused = 0;      // and its fused operations' choices (GemmTuning::n_fused)
  std::int32_t n_forwards = 0;   // warm-up forwards run
  std::int32_t n_graphs = 0;     // decode graphs captured
  std::int32_t n_prefill_graphs = 0;  // prefill-chunk graphs captured (with and without logits)
  std::int32_t n_verify_graphs = 0;   // verify-step graphs captured (speculative decoding)
  std::int32_t n_draft_graphs = 0;    // the learned draft's decode graphs captured
};

// A captured step shape's time on this GPU (see GpuPreparation::time_steps).
struct MeasuredStepTime {
  std::int32_t rows = 0;
  std::int32_t tokens_per_row = 0;  // 1: a decode step; 2 or more: a verify step
  double milliseconds = 0.0;
};

class GpuPreparation {
 public:
  GpuPreparation(const model::ModelSpec& spec, const GpuPreparationOptions& options);
  ~GpuPreparation();

  std::string arch() const;               // "sm_90"
  std::string device_name() const;
  std::string compiler() const;           // "nvrtc 13.0"
  const helios::ServingCatalog& catalog() const;  // what the package must carry, and records
  void compile_catalog();                 // compiles (or finds) every module of the catalog
  void load_weights(const model::PreparedLookup& lookup);
  void tune_gemms();                      // times every serving GEMM shape
  void compile_forwards();                // one prefill chunk, each decode bucket, a mixed step
  void capture_graphs();                  // the catalog's graphs, when the backend captures graphs
  // Times every captured decode and verify graph (after capture_graphs) at a short context, the
  // median of three runs of ten back-to-back replays each: what adaptive verification starts from.
  // Empty when the backend captured no graphs.
  std::vector<MeasuredStepTime> time_steps();
  const GpuPreparationCounts& counts() const;
  std::uint64_t device_bytes_in_use() const;  // weights + scratch measured on the device

  // The catalog's images (module key -> CUBIN). Throws flare::Error (internal) when the warm-up
  // loaded a module the catalog does not list.
  std::map<std::string, std::string> kernel_images() const;
  std::string gemm_tuning_table() const;                      // serialized (empty: no cuBLASLt)

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace flare::ignition
