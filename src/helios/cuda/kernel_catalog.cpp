// The CUDA backend's module choices and kernel catalog (see kernel_catalog.h).
#include "helios/cuda/kernel_catalog.h"

#include <algorithm>

#include "common/error.h"
#include "helios/cuda/attention_decode_plan.h"
#include "helios/cuda/cuda_sampler.h"
#include "helios/cuda/fp8_kernels.h"
#include "helios/cuda/skinny_gemm.h"
#include "helios/cuda/stream_gemm.h"

namespace flare::helios::cuda {
namespace {

std::string str(std::int64_t v) { return std::to_string(v); }

// k_warps of attention_prefill.cu (16 query tokens each), and its dynamic shared memory
// (k_smem_bytes: the K, V and Q tiles at head dim 256; the other sizes' tiles are static).
int prefill_warps(std::int32_t head_dim) { return head_dim == 256 ? 4 : 8; }
unsigned prefill_dynamic_smem_bytes(std::int32_t head_dim) {
  return head_dim == 256 ? unsigned((2 * 64 + 16 * prefill_warps(head_dim)) * head_dim * 2) : 0;
}

}  // namespace

std::string KernelModule::key() const { return module_key(source, defines); }

std::string module_key(const std::string& source, const Defines& defines) {
  std::string key = source;
  for (const auto& [name, value] : defines) key += " -D" + name + "=" + value;
  return key;
}

Defines skinny_tile_defines(int tile) { return {{"SKINNY_M", str(tile)}}; }
Defines stream_tile_defines(int tile) { return {{"STREAM_N", str(tile)}, {k_arch_specific_define, "1"}}; }
Defines fp8_tile_defines(int tile) { return {{"FP8_SKINNY_M", str(tile)}}; }

std::vector<KernelModule> fixed_modules(const DeviceInfo& device, const CudaBackendOptions& options, bool cublaslt,
                                        bool stream_gemm) {
  // The sampler's module depends on its CTAs a row (a define), not on the vocabulary.
  std::vector<KernelModule> modules = {{"embedding", {}}, {"rms_norm", {}},    {"swiglu", {}},
                                       {"linear", {}},    {"gather_rows", {}}, {"scale", {}},
                                       sampler_module(device, 1, options)};
  if (!cublaslt) return modules;  // the NVRTC GEMM (linear.cu) serves every projection
  modules.push_back({"bias_add", {}});
  for (const int tile : SkinnyGemm::k_tiles) modules.push_back({k_skinny_gemm_source, skinny_tile_defines(tile)});
  if (stream_gemm) {
    for (const int tile : StreamGemm::k_tiles) modules.push_back({k_stream_gemm_source, stream_tile_defines(tile)});
  }
  return modules;
}

std::vector<KernelModule> moe_modules() { return {{"moe_router", {}}, {"moe_experts", {}}}; }

std::vector<KernelModule> fp8_linear_modules() {
  std::vector<KernelModule> modules;
  for (const int tile : Fp8Kernels::k_tiles) modules.push_back({k_fp8_linear_source, fp8_tile_defines(tile)});
  return modules;
}

KernelModule sampler_module(const DeviceInfo& device, std::int32_t vocab, const CudaBackendOptions& options) {
  return {"sample", sampler_defines(sampler_layout(device, vocab, options))};
}

std::string kv_fp8_define(DType kv) {
  if (kv != DType::bf16 && kv != DType::f8_e4m3) {
    fail_usage("the CUDA backend keeps KV pages as bf16 or f8_e4m3, not {}", dtype_name(kv));
  }
  return kv == DType::f8_e4m3 ? "1" : "0";
}

KernelModule rotary_kv_store_module(std::int32_t head_dim, std::int64_t rotary_half, DType kv) {
  return {"rotary_kv_store", {{"HEAD_DIM", str(head_dim)}, {"ROTARY_HALF", str(rotary_half)}, {"KV_FP8", kv_fp8_define(kv)}}};
}

KernelModule rotary_module(std::int32_t head_dim, std::int64_t rotary_half) {
  return {"rotary", {{"HEAD_DIM", str(head_dim)}, {"ROTARY_HALF", str(rotary_half)}}};
}

KernelModule head_rms_norm_module(std::int32_t head_dim) { return {"head_rms_norm", {{"HEAD_DIM", str(head_dim)}}}; }

KernelModule kv_store_module(std::int32_t head_dim, DType kv) {
  return {"attention", {{"HEAD_DIM", str(head_dim)}, {"KV_FP8", kv_fp8_define(kv)}}};
}

bool fast_attention_covers(std::int32_t head_dim) { return head_dim == 64 || head_dim == 128 || head_dim == 256; }

DecodeAttention decode_attention(std::int32_t n_heads, std::int32_t n_kv_heads, std::int32_t head_dim,
                                 std::int32_t page_size_tokens, DType kv, int max_shared_bytes, int query_tokens) {
  if (n_kv_heads < 1 || n_heads % n_kv_heads != 0 || query_tokens < 1 || query_tokens > k_max_verify_query_tokens) {
    fail(ExitCode::failure, "internal: decode attention of {} query heads over {} KV heads, {} tokens a row", n_heads,
         n_kv_heads, query_tokens);
  }
  const bool fp8 = kv == DType::f8_e4m3;
  const std::string fp8_define = kv_fp8_define(kv);
  DecodeAttention d;
  d.heads_per_cta = decode_heads_per_cta(n_heads / n_kv_heads, head_dim, fp8, max_shared_bytes, query_tokens);
  d.query_tokens = query_tokens;
  const int columns = d.heads_per_cta * query_tokens;
  d.stages = decode_ring_stages(head_dim, fp8, columns, max_shared_bytes);
  d.smem_bytes = decode_dynamic_smem_bytes(head_dim, fp8, columns, d.stages);
  d.module = {"attention_decode",
              {{"HEAD_DIM", str(head_dim)}, {"PAGE_SIZE", str(page_size_tokens)}, {"GROUP", str(d.heads_per_cta)}}};
  // Decode modules keep the keys they had before verify rows (no QTOK define), so packages match.
  if (query_tokens > 1) d.module.defines.emplace_back("QTOK", str(query_tokens));
  d.module.defines.emplace_back("KV_FP8", fp8_define);
  d.module.defines.emplace_back("KV_STAGES", str(d.stages));
  return d;
}

std::optional<DecodeAttention> verify_attention(std::int32_t n_heads, std::int32_t n_kv_heads, std::int32_t head_dim,
                                                std::int32_t page_size_tokens, DType kv, int max_shared_bytes,
                                                std::int32_t max_row_tokens) {
  const int query_tokens = verify_query_tokens(max_row_tokens);
  if (query_tokens == 0 || !fast_attention_covers(head_dim) || n_kv_heads < 1 || n_heads % n_kv_heads != 0) {
    return std::nullopt;
  }
  const bool fp8 = kv == DType::f8_e4m3;
  const int heads = decode_heads_per_cta(n_heads / n_kv_heads, head_dim, fp8, max_shared_bytes, query_tokens);
  if (!decode_columns_fit(head_dim, fp8, heads * query_tokens, max_shared_bytes)) return std::nullopt;
  return decode_attention(n_heads, n_kv_heads, head_dim, page_size_tokens, kv, max_shared_bytes, query_tokens);
}

PrefillAttention prefill_attention(std::int32_t head_dim, DType kv, int max_shared_bytes) {
  PrefillAttention p;
  p.module = {"attention_prefill", {{"HEAD_DIM", str(head_dim)}, {"KV_FP8", kv_fp8_define(kv)}}};
  p.warps = prefill_warps(head_dim);
  p.smem_bytes = prefill_dynamic_smem_bytes(head_dim);
  if (int(p.smem_bytes) > max_shared_bytes) {
    fail_usage("prefill attention at head size {} needs {} bytes of shared memory; this GPU gives a CTA {}", head_dim,
               p.smem_bytes, max_shared_bytes);
  }
  return p;
}

KernelModule plain_attention_module(std::int32_t head_dim, DType kv) {
  if (kv != DType::bf16) fail_usage("{} KV pages need head size 64, 128 or 256, not {}", dtype_name(kv), head_dim);
  return {"attention", {{"HEAD_DIM", str(head_dim)}}};
}

KernelPlatform kernel_platform(const DeviceInfo& device, const CudaBackendOptions& options, bool cublaslt,
                               bool stream_gemm) {
  return {.compute_major = device.compute_major,
          .compute_minor = device.compute_minor,
          .max_shared_bytes_per_block = device.max_shared_bytes_per_block,
          .cublaslt = cublaslt,
          .stream_gemm = stream_gemm,
          .sampler_one_cta = options.sampler_one_cta};
}

DeviceInfo platform_device(const KernelPlatform& platform) {
  DeviceInfo device;
  device.compute_major = platform.compute_major;
  device.compute_minor = platform.compute_minor;
  device.max_shared_bytes_per_block = platform.max_shared_bytes_per_block;
  return device;
}

CudaBackendOptions platform_options(const KernelPlatform& platform) {
  CudaBackendOptions options;
  options.stream_gemm = platform.stream_gemm;
  options.sampler_one_cta = platform.sampler_one_cta;
  return options;
}

std::vector<KernelModule> kernel_catalog_modules(const KernelPlatform& platform, const KernelNeeds& needs) {
  if (needs.vocab_size < 1 || needs.page_size_tokens < 1) {
    fail(ExitCode::failure, "internal: kernel needs of a vocabulary of {} and pages of {} tokens", needs.vocab_size,
         needs.page_size_tokens);
  }
  const DeviceInfo device = platform_device(platform);
  const CudaBackendOptions options = platform_options(platform);
  const int smem = platform.max_shared_bytes_per_block;
  std::vector<KernelModule> modules = fixed_modules(device, options, platform.cublaslt, platform.stream_gemm);
  modules.push_back(sampler_module(device, needs.vocab_size, options));
  // FP8 weights stay FP8 only where cuBLASLt has an FP8 GEMM for them (supports_fp8_weights).
  if (needs.fp8_linears && platform.cublaslt) {
    for (KernelModule& m : fp8_linear_modules()) modules.push_back(std::move(m));
  }
  if (needs.mixture_of_experts) {
    for (KernelModule& m : moe_modules()) modules.push_back(std::move(m));
  }
  // Serving reaches every attention path on every KV dtype: decode steps (one token a row), steps
  // whose rows compute at most k_max_verify_query_tokens tokens (verify rows, short prompt chunks:
  // the decode kernel of each QTOK) and any other step (a prompt chunk, a mixed step).
  for (const DType kv : needs.kv_dtypes) {
    for (const AttentionNeeds& a : needs.attention) {
      modules.push_back(rotary_kv_store_module(a.head_dim, a.rotary_half, kv));
      if (fast_attention_covers(a.head_dim)) {
        modules.push_back(decode_attention(a.n_heads, a.n_kv_heads, a.head_dim, needs.page_size_tokens, kv, smem).module);
        for (const int q : k_verify_query_tokens) {
          const auto verify = verify_attention(a.n_heads, a.n_kv_heads, a.head_dim, needs.page_size_tokens, kv, smem, q);
          if (verify) modules.push_back(verify->module);
        }
        modules.push_back(prefill_attention(a.head_dim, kv, smem).module);
      } else {
        modules.push_back(plain_attention_module(a.head_dim, kv));
      }
    }
  }
  std::ranges::sort(modules, {}, &KernelModule::key);
  const auto same_key = [](const KernelModule& a, const KernelModule& b) { return a.key() == b.key(); };
  modules.erase(std::unique(modules.begin(), modules.end(), same_key), modules.end());
  return modules;
}

ServingCatalog kernel_catalog(const KernelPlatform& platform, const KernelNeeds& needs) {
  ServingCatalog catalog{platform, needs, {}, serving_step_shapes(needs)};
  for (const KernelModule& m : kernel_catalog_modules(platform, needs)) catalog.modules.push_back(m.key());
  return catalog;
}

}  // namespace flare::helios::cuda
