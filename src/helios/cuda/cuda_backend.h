// The CUDA backend: the backend interface (backend.h) on one NVIDIA GPU through the driver API
// (driver.h) and NVRTC kernels (src/helios/kernels) compiled for the device's architecture through
// the on-disk kernel cache. Activations are BF16, weights BF16 (norm weights and biases F32), logits
// F32, KV pages BF16. Every operation is enqueued on the backend's one stream; download() and
// synchronize() wait. Written for correctness first: the GEMM and attention kernels are plain.
//
// Kernels without shape defines compile at construction; those specialized on the head size
// (head_rms_norm, rotary, attention) compile on first use for each shape and are kept. Which module
// each launch loads is kernel_catalog.h's choice, so an export can compile the whole catalog up
// front and a backend built from a package's kernels checks it holds them all.
//
// Ownership: the backend owns its context binding, stream, modules and step buffers; one engine
// thread uses it (the constructor makes the device's primary context current on that thread).
#pragma once

#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "helios/backend.h"
#include "helios/cuda/cublaslt.h"
#include "helios/cuda/cuda_backend_options.h"
#include "helios/cuda/cuda_sampler.h"
#include "helios/cuda/driver.h"
#include "helios/cuda/gemm_runner.h"
#include "helios/cuda/kernel_catalog.h"
#include "helios/cuda/step_staging.h"
#include "helios/cuda/nvrtc.h"
#include "helios/gemm_tuning.h"
#include "helios/kernel_cache.h"
#include "helios/serving_catalog.h"

namespace flare::helios::cuda {

struct MoeExpertStack;  // cuda_moe.cpp

// A package's kernels and the work a backend built from them serves.
struct PackageKernels {
  std::map<std::string, std::string> images;  // module key -> CUBIN
  KernelNeeds needs;                          // what the backend will run: its catalog must be in images
  std::string origin;                         // names the images in errors ("package /x")
  std::optional<ServingCatalog> recorded;     // the catalog they were exported with, when recorded
};

class CudaBackend final : public Backend {
 public:
  // Throws flare::Error when the driver, the device or NVRTC is unavailable, or a kernel fails to compile.
  // `options` (cuda_backend_options.h): measurement and test switches; the defaults serve.
  CudaBackend(int device_index, const std::filesystem::path& kernel_cache_dir,
              const std::filesystem::path& cuda_root = std::filesystem::path(k_default_cuda_root),
              const CudaBackendOptions& options = {});
  // Kernels only from a package (flare run compiles nothing): NVRTC is never loaded. Before any
  // module loads, the catalog of kernels.needs on this platform is checked against the images, and
  // a package lacking any of its modules is refused (serving_catalog_require: usage), so no shape
  // first reached while serving fails for want of a kernel.
  CudaBackend(int device_index, const std::filesystem::path& kernel_cache_dir, PackageKernels kernels,
              const std::filesystem::path& cuda_root = std::filesystem::path(k_default_cuda_root),
              const CudaBackendOptions& options = {});
  ~CudaBackend() override;

  std::string_view name() const override { return "cuda"; }
  DType activation_dtype() const override { return DType::bf16; }
  const DeviceInfo& device() const { return context_.device(); }
  KernelCache& kernel_cache() { return cache_; }
  // Every module loaded so far, by module key ("attention -DHEAD_DIM=128").
  const std::map<std::string, std::string>& loaded_images() const { return images_; }
  // The device facts and choices this backend's module defines depend on (kernel_catalog.h).
  KernelPlatform platform() const;
  // Built from a package: the catalog it was checked against (what load_prebuilt_modules loads).
  const ServingCatalog& package_catalog() const { return package_catalog_; }
  // Compiles (or finds in the kernel cache) each module on its own thread and loads them, so that
  // launches find them; nothing without NVRTC (a package's kernels are prebuilt). NVRTC compiles
  // one program per thread, so the set takes the time of its slowest.
  void precompile(const std::vector<KernelModule>& modules);
  std::int64_t n_compiled() const { return cache_.n_builds(); }  // NVRTC runs (kernel cache misses)
  std::string compiler() const { return nvrtc_ ? "nvrtc " + nvrtc_->version() : "none (package kernels)"; }
  // Loads every module of the package's catalog now (flare run's "Load kernels"); returns the
  // number of modules loaded in all.
  std::size_t load_prebuilt_modules();
  // Binds the device's context to the calling thread (the engine thread, before its first step).
  void bind_thread() override { context_.make_current(); }
  // The stream every operation is enqueued on (benchmarks record CUDA events on it).
  const Stream& stream() const { return stream_; }
  // GEMMs (cuda_backend_gemm.cpp): "cublaslt" when cuBLASLt loaded, else "nvrtc" (the plain tiled
  // kernel, also used for any problem cuBLASLt has no algorithm for).
  std::string_view gemm_engine_name() const { return gemm_ ? "cublaslt" : "nvrtc"; }
  // Whether the tensor-core streaming GEMM races here (stream_gemm_wanted() at construction).
  bool has_stream_gemm() const { return gemm_ && gemm_->has_stream_gemm(); }
  // The algorithm table. It starts at effort default, attached to the kernel cache's table for this
  // GPU, cuBLASLt version and effort, which its races update.
  GemmTuning& gemm_tuning() { return gemm_tuning_; }
  // --autotune-effort: a fresh table attached to that effort's saved table (call before linear()).
  void set_gemm_effort(TuneEffort effort);
  // Replaces the table as it is (settings and file attachment included), e.g. with a package's
  // frozen table; forgets chosen plans.
  void install_gemm_tuning(GemmTuning tuning);

  std::unique_ptr<Buffer> allocate(std::size_t size_bytes) override;
  void upload(Buffer& dst, std::size_t offset_bytes, const void* src, std::size_t size_bytes) override;
  void download(const Buffer& src, std::size_t offset_bytes, void* dst, std::size_t size_bytes) override;
  void synchronize() override;
  void kv_copy_pages(KvCache& cache, std::span<const PageCopy> copies) override;
  // Tests: a KV cache's memory stops growing at this many bytes, as if the device were full (0: no cap).
  void set_kv_commit_limit_bytes(std::size_t limit_bytes) { kv_commit_limit_bytes_ = limit_bytes; }

  using Backend::begin_step;
  void begin_step(const Step& step, std::span<const KvCache* const> caches) override;
  void reserve_step(std::int32_t max_tokens, std::int32_t max_rows, std::int32_t max_blocks,
                    std::int32_t n_groups = 1) override;
  void upload_step_input(Buffer& dst, std::size_t offset_bytes, const void* src, std::size_t size_bytes) override;
  bool supports_graphs() const override { return true; }
  std::uint64_t graph_generation() const override { return graph_generation_; }
  std::unique_ptr<StepGraph> capture(const std::function<void()>& enqueue) override;
  void replay(const StepGraph& graph) override;
  void embedding(const Tensor& table, Tensor out) override;
  void rms_norm(const Tensor& x, Tensor* residual, const Tensor& weight, float eps, Tensor out) override;
  void head_rms_norm(Tensor x, std::int32_t head_dim, const Tensor& weight, float eps) override;
  void linear(const Tensor& x, const Tensor& weight, const Tensor* bias, Tensor out) override;
  // The GEMM may leave F32 split-K partials that the norm sums (GemmRunner::run_split); delta is
  // then unwritten.
  void linear_residual_rms_norm(const Tensor& x, const Tensor& weight, Tensor delta, Tensor residual,
                                const Tensor& norm_weight, float eps, Tensor out) override;
  // FP8 weights (cuda_backend_gemm.cpp): kept as FP8 where cuBLASLt has a block-scaled FP8 GEMM
  // for their scales (128 x 128 blocks, or one scale per row).
  bool supports_fp8_weights(std::int64_t rows, std::int64_t cols, std::int32_t block_rows,
                            std::int32_t block_cols) override;
  void linear_fp8(const Tensor& x, const Tensor& weight, const QuantizedWeight& scales, const Tensor* bias,
                  Tensor out) override;
  void reserve_fp8_linear(std::int64_t max_cols) override;
  // FP8 expert stacks (cuda_moe.cpp): kept as FP8 where a 32-value slice of a row never straddles two
  // scale blocks (block_cols a power of two of at least 32, or spanning the row) and rows are whole
  // 32-value slices.
  bool supports_fp8_experts(std::int64_t rows, std::int64_t cols, std::int32_t block_rows,
                            std::int32_t block_cols) override;
  void rotary(Tensor q, Tensor k, std::int32_t head_dim, const RotaryParams& rope) override;
  void kv_store(KvCache& cache, std::int32_t layer, const Tensor& k, const Tensor& v) override;
  // One kernel (cuda_rotary_kv_store.cpp).
  void rotary_kv_store(KvCache& cache, std::int32_t layer, Tensor q, Tensor k, const Tensor& v, std::int32_t head_dim,
                       const RotaryParams& rope, const QkNormParams* qk_norm) override;
  void attention(const KvCache& cache, const Tensor& q, const AttentionParams& params, Tensor out) override;
  void swiglu(const Tensor& gate_up, Tensor out) override;
  void geglu(const Tensor& gate_up, Tensor out) override;
  // soft_cap on f32 logits; scale on bf16 activations (or f32 tensors), rounded once.
  void soft_cap(Tensor x, float cap) override;
  void scale(Tensor x, float factor) override;
  // The streaming GEMM with SwiGLU in its epilogue where its race wins (gemm_runner.h), else the two.
  void linear_swiglu(const Tensor& x, const Tensor& weight, Tensor gate_up, Tensor out) override;
  void gather_logit_rows(const Tensor& x, Tensor out) override;
  // Mixture of experts (cuda_moe.cpp): routing-independent launch shapes, so captured steps replay
  // for any routing.
  void router_topk(const Tensor& logits, const RouterParams& params, Tensor ids, Tensor weights) override;
  void moe_experts(const Tensor& x, const Tensor& ids, const Tensor& weights, const MoeExperts& experts,
                   const MoeScratch& scratch, Tensor out) override;
  // On the device (cuda_sampler.cpp); rows it cannot handle go to the host default.
  std::vector<SampledToken> sample(const Tensor& logits, std::span<const SampleRequest> requests) override;
  void reserve_sampling(std::int32_t max_rows, std::int32_t vocab_size) override;

 private:
  // Both public constructors: kernels from NVRTC (null) or from a package.
  CudaBackend(int device_index, const std::filesystem::path& kernel_cache_dir, PackageKernels* kernels,
              const std::filesystem::path& cuda_root, const CudaBackendOptions& options);
  // The entry point `entry` of kernel source `source` compiled with `defines` (memoized).
  CUfunction function(const std::string& source, const std::string& entry, const Defines& defines = {});
  CUfunction function(const KernelModule& module, const std::string& entry) {
    return function(module.source, entry, module.defines);
  }
  // "sm_90a" for a module with k_arch_specific_define, else the device's architecture.
  std::string compile_arch(const Defines& defines) const;
  // Whether the stream GEMM races here: on sm_90 unless options_.stream_gemm is off (for measuring
  // what it brings) or the package has no images of its modules. It decides whether the
  // constructor compiles (and an export carries) the stream GEMM's modules.
  bool stream_gemm_wanted() const;
  // Launches with programmatic dependent launch where programmatic_launch() says so, or, for a
  // kernel with work to do before it waits for the previous one, early_work_programmatic_launch()
  // (both under options_.dependent_launch).
  void launch(CUfunction f, const LaunchShape& shape, std::vector<void*> args, std::string_view name,
              bool early_work = false);
  // The attention kernels attention() dispatches to (cuda_attention.cpp).
  void attention_decode(const KvCache& cache, const Tensor& q, const AttentionParams& p, Tensor out,
                        const DecodeAttention& plan);
  void attention_prefill(const KvCache& cache, const Tensor& q, const AttentionParams& p, Tensor out);
  void attention_plain(const KvCache& cache, const Tensor& q, const AttentionParams& p, Tensor out);
  // swiglu and geglu (op): the kernels flare_<op> and flare_<op>_vec of swiglu.cu.
  void gated_activation(const Tensor& gate_up, Tensor out, const std::string& op);
  // scale and soft_cap: the kernel `entry` of scale.cu over each row of x.
  void scale_rows(Tensor x, float value, const char* entry);

  // Device addresses of the step descriptor's int32 arrays (begin_step fills them).
  struct StepArrays {
    CUdeviceptr tokens = 0;           // [n_tokens]
    CUdeviceptr positions = 0;        // [n_tokens]
    CUdeviceptr token_rows = 0;       // [n_tokens] step row of each token
    CUdeviceptr row_first_block = 0;  // [n_rows] offset of each row's block table
    CUdeviceptr row_first_token = 0;  // [n_rows] index of each row's first token
    CUdeviceptr block_tables = 0;     // [sum of n_blocks]: history group 0's
    std::vector<CUdeviceptr> group_tables;  // [n_groups] each group's (group_tables[0] = block_tables)
    CUdeviceptr logit_tokens = 0;     // [n_logit_rows] token index of each logits row
  };

  CudaBackendOptions options_;  // fixed at construction
  Context context_;
  Stream stream_;
  std::unique_ptr<Nvrtc> nvrtc_;                  // null when kernels come from a package
  KernelCache cache_;
  std::map<std::string, std::string> prebuilt_;  // module key -> CUBIN (package kernels)
  ServingCatalog package_catalog_;               // built from a package: what it was checked against
  std::map<std::string, std::string> images_;    // module key -> CUBIN of every loaded module
  std::map<std::string, std::unique_ptr<Module>> modules_;  // by source name + defines
  std::map<std::string, CUfunction> functions_;             // by module key + entry

  // Sizes step_device_ for a packed step of `n_values` int32 (step_pack.h); moving it bumps
  // graph_generation_.
  void reserve_step_values(std::size_t n_values);

  // The current step: host copy (for validation and counts) and its device arrays, packed by
  // step_pack.h so that each array's address depends only on the step's shape.
  Step step_;
  std::int32_t n_logit_rows_ = 0;
  StepStaging staging_{stream_};               // pinned double-buffered source of the step inputs
  std::unique_ptr<DeviceMemory> step_device_;  // fixed once reserved; grows (and moves) only past it
  // Bumped whenever memory a captured graph may name moves: the step arrays, and any kernel
  // scratch that grows on demand (whoever reallocates one must bump it), so graphs recapture.
  std::uint64_t graph_generation_ = 0;
  StepArrays arrays_;
  std::unique_ptr<DeviceMemory> attention_scratch_;  // split-KV decode counters and partials, grows on demand
  std::size_t attention_counters_ = 0;                // merge counters at its front
  std::map<CUfunction, int> attention_decode_resident_;  // decode kernels (ring allowed): CTAs resident an SM
  std::set<CUfunction> attention_prefill_smem_set_;     // prefill kernels allowed their dynamic tiles
  std::set<CUfunction> sampler_smem_set_;             // samplers allowed their shared slices

  // cuBLASLt GEMMs (cuda_backend_gemm.cpp); gemm_ is null when cuBLASLt did not load.
  // After cuBLASLt loaded (cublaslt_) and the GEMM modules were precompiled.
  void init_gemm(const std::filesystem::path& kernel_cache_dir);
  bool linear_cublaslt(const Tensor& x, const Tensor& weight, const Tensor* bias, const Tensor& out);
  // The GEMM runner's operands for out = x @ weight^T (no bias).
  static GemmOperands gemm_operands(const Tensor& x, const Tensor& weight, const Tensor& out);
  // out += bias (f32 [n]) for a GEMM whose kernel left the bias to the caller.
  void add_bias(const Tensor& out, CUdeviceptr bias);
  // Sizes the GEMM runner's FP8 activation scratch for m rows; a move bumps graph_generation_.
  void reserve_fp8_scratch(std::int64_t m);
  std::int64_t fp8_max_cols_ = 0;  // reserve_fp8_linear(): 0 until FP8 weights are loaded
  std::int64_t step_capacity_tokens_ = 0;  // reserve_step()'s largest max_tokens
  std::size_t step_capacity_blocks_ = 0;   // reserve_step()'s largest max_blocks: the stride of group tables
  // The block tables of the cache's history group.
  CUdeviceptr block_tables_of(const KvCache& cache) const;
  // The residual add and norm after a GEMM: of its output (parts 0) or of its split-K partials.
  void residual_rms_norm(int parts, const Tensor& delta, Tensor residual, const Tensor& norm_weight, float eps,
                         Tensor out);
  // Sizes split_partials_ for op split the most ways, outside a capture; a move bumps graph_generation_.
  void reserve_split_partials(const GemmOperands& op);
  std::unique_ptr<DeviceMemory> split_partials_;  // run_split's F32 partials, read by the next norm
  std::unique_ptr<CublasLt> cublaslt_;
  std::unique_ptr<GemmRunner> gemm_;
  GemmTuning gemm_tuning_;

  // moe_experts' device workspace (tiles, sorted pairs, pair rows), grown outside captures for
  // n_tokens x top_k pairs over n_experts; a move bumps graph_generation_.
  void reserve_moe_workspace(std::int64_t n_tokens, std::int64_t top_k, std::int64_t n_experts);
  // moe_experts' fused decode path (cuda_moe.cpp), for steps of at most 32 pairs.
  void moe_experts_fused(const Tensor& x, const Tensor& ids, const Tensor& weights, const MoeExperts& experts,
                         const MoeExpertStack& gate_up, const MoeExpertStack& down, const MoeScratch& scratch,
                         Tensor out);
  std::unique_ptr<DeviceMemory> moe_workspace_;

  std::unique_ptr<SamplerScratch> sampler_;  // device sampling buffers: reserve_sampling() or the first sample()

  // KV caches in a VMM reservation backed on demand (cuda_backend_kv.cpp); a device without VMM
  // gets one allocation, all committed at once.
  std::unique_ptr<Buffer> reserve_address_space(std::size_t size_bytes) override;
  std::size_t commit_granularity_bytes() const override;
  bool commit(Buffer& reserved, std::size_t offset_bytes, std::size_t size_bytes) override;
  void decommit(Buffer& reserved, std::size_t offset_bytes, std::size_t size_bytes) override;
  std::size_t kv_commit_limit_bytes_ = 0;
};

}  // namespace flare::helios::cuda
