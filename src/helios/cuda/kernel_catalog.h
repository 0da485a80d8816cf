// Which kernel module (source + defines) each CUDA backend launch site loads, and from those the
// kernel catalog: every module a backend on one platform loads while serving some KernelNeeds
// (serving_catalog.h). The launch sites and the catalog call the same choosers below, so the
// catalog is the backend's own choice, not a parallel guess; an export proves it complete by
// checking that its warm-up forwards loaded nothing else.
//
// Pure functions of shapes, device facts and options: no driver, no NVRTC, so they are tested
// without a GPU. The choosers throw flare::Error (usage) for shapes the backend cannot serve, so an
// export or `flare run` refuses them before serving does.
#pragma once

#include <compare>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "helios/cuda/cuda_backend_options.h"
#include "helios/cuda/driver.h"
#include "helios/dtype.h"
#include "helios/serving_catalog.h"

namespace flare::helios::cuda {

using Defines = std::vector<std::pair<std::string, std::string>>;

struct KernelModule {
  std::string source;  // kernels/<source>.cu
  Defines defines;     // in the order its key names them
  std::string key() const;  // module_key(source, defines)
  auto operator<=>(const KernelModule&) const = default;
};

// "attention -DHEAD_DIM=128 -DKV_FP8=0": how packages and the kernel cache name a module.
std::string module_key(const std::string& source, const Defines& defines);

// A module whose defines hold this name compiles for the device's architecture-specific target
// ("sm_90a"), the others for "sm_90".
inline constexpr const char* k_arch_specific_define = "FLARE_ARCH_SPECIFIC";

// One module per GEMM tile (as one program, the skinny GEMM's forty entry points compile in about
// 15 s): x-row tiles of the skinny and FP8 kernels, n tiles of the stream GEMM (sm_90a: wgmma, TMA).
Defines skinny_tile_defines(int tile);
Defines stream_tile_defines(int tile);
Defines fp8_tile_defines(int tile);

// What every backend compiles (or loads) at construction: the kernels without shape defines, the
// sampler for this device and options, and, with cuBLASLt, the bias add and the skinny GEMM's tiles
// (with the stream GEMM's tiles where it races). swiglu.cu also holds GeGLU and scale.cu the soft
// cap, so no operation beyond these needs a module of its own except those below.
// The mixture-of-experts modules (router_topk, moe_experts: cuda_moe.cpp), without defines.
std::vector<KernelModule> moe_modules();
std::vector<KernelModule> fixed_modules(const DeviceInfo& device, const CudaBackendOptions& options, bool cublaslt,
                                        bool stream_gemm);
// The FP8-weight GEMMs' tiles (reserve_fp8_linear, once FP8 weights are loaded).
std::vector<KernelModule> fp8_linear_modules();
// The sampler for rows of `vocab` ids (sample()).
KernelModule sampler_module(const DeviceInfo& device, std::int32_t vocab, const CudaBackendOptions& options);

// The KV_FP8 define of pages of `kv`; throws (usage) for a dtype the backend does not keep pages in.
std::string kv_fp8_define(DType kv);
KernelModule rotary_kv_store_module(std::int32_t head_dim, std::int64_t rotary_half, DType kv);
KernelModule rotary_module(std::int32_t head_dim, std::int64_t rotary_half);
KernelModule head_rms_norm_module(std::int32_t head_dim);
KernelModule kv_store_module(std::int32_t head_dim, DType kv);

// Head sizes the tensor-core attention kernels (decode and prefill) take; others run the plain one.
bool fast_attention_covers(std::int32_t head_dim);

// A pure decode step's attention (attention_decode.cu): query heads per work item, the copy ring's
// depth and the kernel's dynamic shared memory for a device giving a CTA `max_shared_bytes`.
// query_tokens > 1: the module for rows of up to that many tokens (QTOK: verify rows), its heads
// per item chosen so that heads x tokens fit the kernel's columns.
struct DecodeAttention {
  KernelModule module;
  int heads_per_cta = 1;
  int query_tokens = 1;
  int stages = 1;
  unsigned smem_bytes = 0;
};
DecodeAttention decode_attention(std::int32_t n_heads, std::int32_t n_kv_heads, std::int32_t head_dim,
                                 std::int32_t page_size_tokens, DType kv, int max_shared_bytes, int query_tokens = 1);
// The attention of a step of several tokens in some row, none more than k_max_verify_query_tokens
// (`max_row_tokens`: verify rows, short prompt chunks): the decode kernel's module of the smallest
// QTOK that holds them (verify_query_tokens), or nullopt where the prefill kernel serves them (longer
// rows, head sizes the decode kernel lacks, columns a CTA's shared memory cannot hold).
std::optional<DecodeAttention> verify_attention(std::int32_t n_heads, std::int32_t n_kv_heads, std::int32_t head_dim,
                                                std::int32_t page_size_tokens, DType kv, int max_shared_bytes,
                                                std::int32_t max_row_tokens);
// Any other step's attention (attention_prefill.cu): warps of 16 query tokens and the dynamic
// shared memory (the tiles at head dim 256; throws (usage) where the device cannot give it).
struct PrefillAttention {
  KernelModule module;
  int warps = 8;
  unsigned smem_bytes = 0;
};
PrefillAttention prefill_attention(std::int32_t head_dim, DType kv, int max_shared_bytes);
// Head sizes fast_attention_covers() does not take (attention.cu, BF16 pages only: throws usage else).
KernelModule plain_attention_module(std::int32_t head_dim, DType kv);

// The platform a backend on `device` with `options` is (CudaBackend::platform()), and back.
KernelPlatform kernel_platform(const DeviceInfo& device, const CudaBackendOptions& options, bool cublaslt,
                               bool stream_gemm);
DeviceInfo platform_device(const KernelPlatform& platform);
CudaBackendOptions platform_options(const KernelPlatform& platform);

// Every module a backend on `platform` loads while serving `needs`, by key, ascending. May list
// the FP8 GEMM tiles where cuBLASLt keeps none of the FP8 weights (a load cannot know before it
// asks); never fewer modules than the backend loads. Throws (usage) for needs it cannot serve.
std::vector<KernelModule> kernel_catalog_modules(const KernelPlatform& platform, const KernelNeeds& needs);
// The modules' keys and serving_step_shapes(needs), with both inputs.
ServingCatalog kernel_catalog(const KernelPlatform& platform, const KernelNeeds& needs);

}  // namespace flare::helios::cuda
