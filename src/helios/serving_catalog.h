// The serving catalog: every kernel module and step graph one rank needs to serve a package's
// capacities, and the inputs they were enumerated from. `ignition export` computes it, compiles
// exactly its modules and records it in the signed manifest; `flare run` computes it again for the
// GPU and settings it runs with and refuses, before it opens a socket, a package that lacks any of
// its modules, so that no shape first reached while serving can fail at request time.
//
// Plain data with no CUDA dependency (the CUDA backend's enumeration is cuda/kernel_catalog.h), so
// it serializes, parses and checks on any machine:
//   - KernelNeeds: the work (the model's attention shapes and FP8 projections, the serving steps);
//     model::kernel_needs fills it from a spec and the serving settings;
//   - KernelPlatform: the device facts and backend choices the kernels' defines depend on;
//   - ServingCatalog: both, the module keys and the step shapes.
#pragma once

#include <compare>
#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "helios/dtype.h"
#include "helios/step_shape.h"

namespace flare::helios {

// One attention shape: the layers that share it launch the same rotary/KV-store and attention
// modules whatever their window (a window is a launch argument).
struct AttentionNeeds {
  std::int32_t n_heads = 0;      // query heads
  std::int32_t n_kv_heads = 0;
  std::int32_t head_dim = 0;
  std::int32_t rotary_half = 0;  // rotated pairs per head: the rotary frequencies' width

  auto operator<=>(const AttentionNeeds&) const = default;
};

// What a rank computes. Gated activations, scaling, soft-capping, biases and norms are absent: their
// kernels live in modules every backend loads at construction (kernel_catalog.h's fixed modules).
struct KernelNeeds {
  std::vector<AttentionNeeds> attention;     // distinct, ascending
  bool fp8_linears = false;                  // projections whose weights may stay FP8
  bool mixture_of_experts = false;           // router_topk and moe_experts
  std::int32_t vocab_size = 0;
  std::vector<DType> kv_dtypes;              // KV page dtypes served, distinct, ascending
  std::int32_t page_size_tokens = 0;
  std::vector<std::int32_t> decode_buckets;  // rows of the decode steps captured as graphs, ascending
  std::int32_t prefill_chunk_tokens = 0;
  // Speculative decoding (0: none): the most tokens a verify row computes (1 + drafts), the most
  // tokens the verify rows of one step carry, and the most verify graphs (serving_verify_shapes).
  // Kernel modules do not depend on them (every catalog holds the verify attention modules).
  std::int32_t max_verify_tokens = 0;
  std::int32_t verify_token_capacity = 0;
  std::int32_t verify_graph_budget = 0;

  bool operator==(const KernelNeeds&) const = default;
};

// The device facts and backend choices module defines depend on (CudaBackend::platform()). The SM
// count is absent: splits and grids are launch arguments, never defines.
struct KernelPlatform {
  std::int32_t compute_major = 0;
  std::int32_t compute_minor = 0;
  std::int32_t max_shared_bytes_per_block = 0;  // dynamic shared memory a kernel may opt into
  bool cublaslt = false;         // cuBLASLt loaded: the skinny GEMM and bias-add modules serve beside it
  bool stream_gemm = false;      // the stream GEMM races (its modules)
  bool sampler_one_cta = false;  // CudaBackendOptions::sampler_one_cta (the sampler's module)

  std::string arch() const;  // "sm_90"
  bool operator==(const KernelPlatform&) const = default;
};

struct ServingCatalog {
  KernelPlatform platform;
  KernelNeeds needs;
  std::vector<std::string> modules;  // module keys ("attention_decode -DHEAD_DIM=128 ..."), ascending
  std::vector<StepShape> graphs;     // serving_step_shapes(needs)

  bool operator==(const ServingCatalog&) const = default;
};

// The decode buckets of a concurrency limit: powers of two up to the first >= max_concurrency.
std::vector<std::int32_t> serving_decode_buckets(std::int32_t max_concurrency);

// The verify steps captured as graphs, {rows, w, w} for a decode bucket of rows and a width w of 2 to
// max_verify_tokens (every row verifying w - 1 drafts, all w logits rows wanted) whose rows x w fit
// token_capacity, at most `budget` of them: the smallest buckets first (a verify step of few rows is
// the most launch-bound), every width of a bucket before the next bucket, the widest first. Largest
// step first in the result, as serving_step_shapes orders them. Only uniform verify steps (every
// row of one width) replay a graph, padded with dummy rows up to the bucket; others run eagerly.
std::vector<StepShape> serving_verify_shapes(std::span<const std::int32_t> decode_buckets, std::int32_t max_verify_tokens,
                                             std::int32_t token_capacity, std::int32_t budget, DType kv_dtype);

// The step shapes a rank captures as graphs, in the order it captures them (largest first, so that
// scratch sized by the step has its final size before smaller graphs record it): per KV dtype, the
// prefill chunk without and with its last token's logits (chunks of 2 tokens or more), the verify
// shapes (serving_verify_shapes; none without speculation), then the decode buckets from the largest.
std::vector<StepShape> serving_step_shapes(std::span<const std::int32_t> decode_buckets,
                                           std::int32_t prefill_chunk_tokens, std::span<const DType> kv_dtypes,
                                           std::int32_t max_verify_tokens = 0, std::int32_t verify_token_capacity = 0,
                                           std::int32_t verify_graph_budget = 0);
std::vector<StepShape> serving_step_shapes(const KernelNeeds& needs);

// JSON text (the manifest's `kernel_catalog`): {"format": 1, "platform", "needs", "modules", "graphs"}.
std::string serving_catalog_serialize(const ServingCatalog& catalog);
// Throws flare::Error (input) naming `origin` and what is wrong: bytes are untrusted.
ServingCatalog serving_catalog_parse(std::string_view text, std::string_view origin);

// The modules of `catalog` that `images` (module key -> CUBIN) lacks, ascending.
std::vector<std::string> serving_catalog_missing(const ServingCatalog& catalog,
                                                 const std::map<std::string, std::string>& images);
// Throws flare::Error (usage: the package does not fit this GPU or these settings, as a package of
// another architecture does not) unless `images` holds every module of `run`. The message names
// `origin`, the missing modules, how `run`'s inputs differ from `recorded` (the catalog the images
// were exported with; null when there is none) and what to do.
void serving_catalog_require(const ServingCatalog& run, const std::map<std::string, std::string>& images,
                             std::string_view origin, const ServingCatalog* recorded);

// What differs between two catalogs' inputs, one phrase each ("page size 16 tokens, here 32").
std::vector<std::string> serving_catalog_differences(const ServingCatalog& recorded, const ServingCatalog& run);

}  // namespace flare::helios
