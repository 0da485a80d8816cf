// GEMM plans and their kernel choice: cuBLASLt algorithms and skinny variants (see gemm_runner.h).
#include "helios/cuda/gemm_runner.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <optional>
#include <vector>

#include "common/error.h"
#include "helios/cuda/gemm_tuner.h"

namespace flare::helios::cuda {
namespace {

// The alignment cuBLASLt may assume for a matrix: that of its base address and of every row
// (stride x element size), capped at the 256 bytes the heuristic assumes by default.
std::uint32_t alignment_bytes(CUdeviceptr address, std::int64_t row_bytes) {
  std::uint64_t bits = std::uint64_t(address) | std::uint64_t(row_bytes) | 256u;
  return std::uint32_t(bits & (~bits + 1));  // lowest set bit
}

// The race's weight copies (cold_weight_copies) sit at the weights' offset from a multiple of this
// (cuMemAlloc's alignment is larger).
constexpr CUdeviceptr k_copy_alignment = 256;

// The weights a race's runs read in turn: op's own where there are no copies, else the next copy at
// op.w's offset from a 256-byte boundary.
struct WeightRotation {
  std::vector<std::unique_ptr<DeviceMemory>> copies;
  std::size_t turn = 0;
  GemmOperands next(const GemmOperands& op) {
    GemmOperands timed = op;
    if (!copies.empty()) timed.w = copies[turn++ % copies.size()]->address() + op.w % k_copy_alignment;
    return timed;
  }
};

// Split-K entrants join the race for problems of at most this many rows (decode batches and
// small prefill chunks), made from the heuristic's first few algorithms.
constexpr std::int64_t k_split_k_max_m = 256;
constexpr std::size_t k_split_k_candidates = 2;

cudaDataType_t cuda_type(DType d) {
  if (d == DType::f8_e4m3) return CUDA_R_8F_E4M3;
  return d == DType::f32 ? CUDA_R_32F : CUDA_R_16BF;
}

bool is_fp8(const GemmOperands& op) { return op.w_dtype == DType::f8_e4m3; }

// The row stride cuBLASLt reads x with: x itself, or FP8 activations packed [m, k] in the scratch.
std::int64_t b_stride(const GemmOperands& op) { return is_fp8(op) ? op.k : op.x_stride; }

std::array<std::uint64_t, 8> algo_words(const cublasLtMatmulAlgo_t& algo) {
  std::array<std::uint64_t, 8> words{};
  static_assert(sizeof(algo.data) == sizeof(words));
  std::memcpy(words.data(), algo.data, sizeof words);
  return words;
}

cublasLtMatmulAlgo_t algo_of(const std::array<std::uint64_t, 8>& words) {
  cublasLtMatmulAlgo_t algo;
  std::memcpy(algo.data, words.data(), sizeof words);
  return algo;
}

// Each race's entrants and times on stderr, to see why a kernel won (set_race_log()).
void log_race(const GemmShapeKey& key, const std::vector<GemmChoice>& entrants, const RaceResult& raced) {
  std::string line =
      fmt::format("gemm race m {} n {} k {}{}:", key.m_bucket, key.n, key.k,
                  key.fusion == GemmFusion::residual_norm ? " into norm"
                  : key.fusion == GemmFusion::swiglu      ? " into swiglu"
                                                          : "");
  for (std::size_t i = 0; i < entrants.size(); ++i) {
    const float t = i < raced.times_us.size() ? raced.times_us[i] : -1.0f;
    line += fmt::format(" {}{}/{}={:.1f}", int(i) == raced.winner ? "*" : "", int(entrants[i].kind),
                        entrants[i].variant, t);
  }
  std::fprintf(stderr, "%s\n", line.c_str());
}

}  // namespace

// The descriptors of one exact problem and the algorithm it runs.
struct GemmRunner::Plan {
  // b_scales: where the FP8 activation scales will be (cuBLASLt checks that a block-scaled operand
  // has a scale pointer when it is asked for algorithms).
  Plan(const CublasLt& lt, const GemmOperands& op, CUdeviceptr b_scales = 0)
      : desc(lt, CUBLAS_COMPUTE_32F, CUDA_R_32F),
        a(lt, cuda_type(op.w_dtype), std::uint64_t(op.k), std::uint64_t(op.n), op.w_stride),  // w^T: column-major [k, n]
        b(lt, cuda_type(op.w_dtype), std::uint64_t(op.k), std::uint64_t(op.m), b_stride(op)),  // x^T: column-major [k, m]
        d(lt, cuda_type(op.out_dtype), std::uint64_t(op.n), std::uint64_t(op.m), op.out_stride) {  // out^T [n, m]
    desc.set(CUBLASLT_MATMUL_DESC_TRANSA, cublasOperation_t(CUBLAS_OP_T));
    desc.set(CUBLASLT_MATMUL_DESC_TRANSB, cublasOperation_t(CUBLAS_OP_N));
    if (is_fp8(op)) {
      fp8 = true;
      // A's scales are the weight's ([n / 128][k / 128] row-major is BLK128x128's column-major
      // [k / 128, n / 128] with leading dimension k / 128), B's the quantized activations'.
      const bool blocks = op.w_scaling == Fp8Scaling::blocks_128;
      desc.set(CUBLASLT_MATMUL_DESC_A_SCALE_MODE, std::int32_t(blocks ? CUBLASLT_MATMUL_MATRIX_SCALE_BLK128x128_32F
                                                                      : CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F));
      desc.set(CUBLASLT_MATMUL_DESC_B_SCALE_MODE, std::int32_t(blocks ? CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F
                                                                      : CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F));
      set_scales(op.w_scales, b_scales);
    }
  }

  // The split_partials problem: k split `parts` ways as a strided batch of `parts` GEMMs, slice i
  // of w and of x beginning at column i * k / parts, each writing F32 partials [m, n] (column-major
  // [n, m]) one after another.
  struct SplitK {
    int parts;
  };
  Plan(const CublasLt& lt, const GemmOperands& op, SplitK split)
      : desc(lt, CUBLAS_COMPUTE_32F, CUDA_R_32F),
        a(lt, CUDA_R_16BF, std::uint64_t(op.k / split.parts), std::uint64_t(op.n), op.w_stride),
        b(lt, CUDA_R_16BF, std::uint64_t(op.k / split.parts), std::uint64_t(op.m), op.x_stride),
        d(lt, CUDA_R_32F, std::uint64_t(op.n), std::uint64_t(op.m), op.n),
        parts(split.parts) {
    desc.set(CUBLASLT_MATMUL_DESC_TRANSA, cublasOperation_t(CUBLAS_OP_T));
    desc.set(CUBLASLT_MATMUL_DESC_TRANSB, cublasOperation_t(CUBLAS_OP_N));
    a.set_batch(parts, op.k / parts);
    b.set_batch(parts, op.k / parts);
    d.set_batch(parts, op.n * op.m);
  }

  // FP8: the scale pointers of this run (the weight's, and the activations' in the scratch).
  void set_scales(CUdeviceptr weight_scales, CUdeviceptr activation_scales) {
    desc.set(CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, reinterpret_cast<const void*>(weight_scales));
    desc.set(CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, reinterpret_cast<const void*>(activation_scales));
  }

  // Adds the F32 bias through the epilogue; the bias pointer is set per run.
  void use_bias_epilogue(CUdeviceptr bias) {
    desc.set(CUBLASLT_MATMUL_DESC_EPILOGUE, cublasLtEpilogue_t(CUBLASLT_EPILOGUE_BIAS));
    desc.set(CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, std::int32_t(CUDA_R_32F));
    set_bias(bias);
    bias_in_epilogue = true;
  }
  void set_bias(CUdeviceptr bias) { desc.set(CUBLASLT_MATMUL_DESC_BIAS_POINTER, reinterpret_cast<const void*>(bias)); }

  MatmulDesc desc;
  MatrixLayout a, b, d;
  GemmChoice choice;            // what runs: cuBLASLt's algorithm (then also in `algo`; a split's too) or a Flare kernel
  cublasLtMatmulAlgo_t algo{};  // choice.algo, ready for cublasLtMatmul
  bool bias_in_epilogue = false;
  bool fp8 = false;  // FP8 weights with scale modes
  int parts = 0;     // split_partials: how many F32 partials it writes; 0 for every other problem

  void set_choice(const GemmChoice& c) {
    choice = c;
    if (c.kind == GemmKind::cublaslt || c.kind == GemmKind::split_partials) algo = algo_of(c.algo);
  }
};

namespace {

// Up to n_wanted heuristic candidates that fit the workspace and the operands' alignments. cuBLASLt
// answers NOT_SUPPORTED for a problem it has no kernel for, and INVALID_VALUE for an epilogue it does
// not take with these types (an F32 bias with a BF16 output, on cuBLASLt 13.1) or scale modes it does
// not take on this GPU: all mean none.
std::vector<cublasLtMatmulHeuristicResult_t> heuristic(const CublasLt& lt, const GemmRunner::Plan& p,
                                                       const GemmOperands& op, int n_wanted) {
  MatmulPreference pref(lt);
  pref.set(CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, std::uint64_t(k_gemm_workspace_bytes));
  const std::int64_t out_bytes = std::int64_t(dtype_size_bytes(op.out_dtype));
  const std::int64_t w_bytes = std::int64_t(dtype_size_bytes(op.w_dtype));
  // A split's slices begin k / parts columns apart; its partials sit in 256-byte aligned scratch.
  const std::int64_t slice_bytes = p.parts > 0 ? op.k / p.parts * w_bytes : 0;
  pref.set(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, alignment_bytes(op.w, op.w_stride * w_bytes | slice_bytes));
  // FP8 activations sit in the scratch (256-byte aligned) with rows of k bytes.
  pref.set(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
           is_fp8(op) ? alignment_bytes(256, op.k) : alignment_bytes(op.x, op.x_stride * 2 | slice_bytes));
  const std::uint32_t d_alignment =
      p.parts > 0 ? alignment_bytes(256, op.n * 4) : alignment_bytes(op.out, op.out_stride * out_bytes);
  pref.set(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, d_alignment);
  pref.set(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, d_alignment);
  std::vector<cublasLtMatmulHeuristicResult_t> results(std::size_t(std::max(n_wanted, 1)));
  int n_returned = 0;
  const cublasStatus_t status = lt.api().algo_get_heuristic(lt.handle(), p.desc.get(), p.a.get(), p.b.get(), p.d.get(),
                                                            p.d.get(), pref.get(), int(results.size()), results.data(),
                                                            &n_returned);
  if (status == CUBLAS_STATUS_NOT_SUPPORTED ||
      (status == CUBLAS_STATUS_INVALID_VALUE && (p.bias_in_epilogue || p.fp8))) {
    n_returned = 0;
  } else {
    lt.check(status, "cublasLtMatmulAlgoGetHeuristic");
  }
  results.resize(std::size_t(std::max(n_returned, 0)));
  std::erase_if(results, [](const cublasLtMatmulHeuristicResult_t& r) {
    return r.state != CUBLAS_STATUS_SUCCESS || r.workspaceSize > k_gemm_workspace_bytes;
  });
  return results;
}

// Whether cuBLASLt accepts `algo` for the plan's problem within the workspace.
bool algo_fits(const CublasLt& lt, const GemmRunner::Plan& p, const cublasLtMatmulAlgo_t& algo) {
  cublasLtMatmulHeuristicResult_t result{};
  const cublasStatus_t status =
      lt.api().algo_check(lt.handle(), p.desc.get(), p.a.get(), p.b.get(), p.d.get(), p.d.get(), &algo, &result);
  return status == CUBLAS_STATUS_SUCCESS && result.workspaceSize <= k_gemm_workspace_bytes;
}

// Split-K versions of `algo` that cuBLASLt accepts for the plan. At decode batch sizes a GEMM's
// output has few tiles (the 6144 x 64 qkv output of Llama-3.1-8B at batch 64 is 48 to 96 CTAs for
// 132 SMs), so the heuristic's unsplit algorithms leave most SMs idle while the weights stream;
// splitting k gives every SM a share. The race keeps a split only where it is faster.
std::vector<cublasLtMatmulAlgo_t> split_k_versions(const CublasLt& lt, const GemmRunner::Plan& p,
                                                   const cublasLtMatmulAlgo_t& algo) {
  std::vector<cublasLtMatmulAlgo_t> versions;
  std::int32_t splits = 0;
  std::uint32_t schemes = 0;
  std::size_t written = 0;
  if (lt.api().algo_config_get_attribute(&algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &splits, sizeof splits, &written) !=
          CUBLAS_STATUS_SUCCESS ||
      splits != 1) {
    return versions;
  }
  std::int32_t supported = 0;
  if (lt.api().algo_cap_get_attribute(&algo, CUBLASLT_ALGO_CAP_SPLITK_SUPPORT, &supported, sizeof supported,
                                      &written) != CUBLAS_STATUS_SUCCESS ||
      supported == 0 ||
      lt.api().algo_cap_get_attribute(&algo, CUBLASLT_ALGO_CAP_REDUCTION_SCHEME_MASK, &schemes, sizeof schemes,
                                      &written) != CUBLAS_STATUS_SUCCESS) {
    return versions;
  }
  // Partial sums in F32 scratch, reduced by a second kernel: the result does not depend on the
  // order CTAs finish in, unlike an in-place (atomic) reduction.
  if ((schemes & CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE) == 0) return versions;
  const std::uint32_t scheme = CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE;
  for (const std::int32_t n : {2, 3, 4, 6}) {
    cublasLtMatmulAlgo_t version = algo;
    if (lt.api().algo_config_set_attribute(&version, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &n, sizeof n) !=
            CUBLAS_STATUS_SUCCESS ||
        lt.api().algo_config_set_attribute(&version, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME, &scheme, sizeof scheme) !=
            CUBLAS_STATUS_SUCCESS) {
      continue;
    }
    if (algo_fits(lt, p, version)) versions.push_back(version);
  }
  return versions;
}

cublasStatus_t enqueue(const CublasLt& lt, const GemmRunner::Plan& p, const cublasLtMatmulAlgo_t& algo,
                       const GemmOperands& op, CUdeviceptr b, const DeviceMemory& workspace, const Stream& stream) {
  const float alpha = 1.0f, beta = 0.0f;
  const auto* w = reinterpret_cast<const void*>(op.w);
  const auto* x = reinterpret_cast<const void*>(b);
  auto* out = reinterpret_cast<void*>(op.out);
  return lt.api().matmul(lt.handle(), p.desc.get(), &alpha, w, p.a.get(), x, p.b.get(), &beta, out, p.d.get(), out,
                         p.d.get(), &algo, workspace.data(), workspace.size_bytes(), stream.handle());
}

// The split_partials GEMM of `p`, its partials written to `partials`.
cublasStatus_t enqueue_partials(const CublasLt& lt, const GemmRunner::Plan& p, const cublasLtMatmulAlgo_t& algo,
                                const GemmOperands& op, CUdeviceptr partials, const DeviceMemory& workspace,
                                const Stream& stream) {
  const float alpha = 1.0f, beta = 0.0f;
  auto* out = reinterpret_cast<void*>(partials);
  return lt.api().matmul(lt.handle(), p.desc.get(), &alpha, reinterpret_cast<const void*>(op.w), p.a.get(),
                         reinterpret_cast<const void*>(op.x), p.b.get(), &beta, out, p.d.get(), out, p.d.get(), &algo,
                         workspace.data(), workspace.size_bytes(), stream.handle());
}

}  // namespace

GemmRunner::GemmRunner(const CublasLt& lt, std::string arch, const Stream& stream, std::unique_ptr<SkinnyGemm> skinny)
    : lt_(lt), arch_(std::move(arch)), stream_(stream), workspace_(k_gemm_workspace_bytes), skinny_(std::move(skinny)) {}

GemmRunner::~GemmRunner() = default;

void GemmRunner::clear_plans() {
  plans_.clear();
  split_plans_.clear();
  swiglu_variants_.clear();
}

GemmRunner::PlanKey GemmRunner::plan_key(const GemmOperands& op) {
  const std::int64_t out_bytes = std::int64_t(dtype_size_bytes(op.out_dtype));
  return {op.m,
          op.n,
          op.k,
          op.x_stride,
          op.w_stride,
          op.out_stride,
          op.out_dtype,
          op.w_dtype,
          is_fp8(op) ? op.w_scaling : Fp8Scaling::blocks_128,
          op.bias != 0,
          alignment_bytes(op.x, op.x_stride * 2),
          alignment_bytes(op.w, op.w_stride * std::int64_t(dtype_size_bytes(op.w_dtype))),
          alignment_bytes(op.out, op.out_stride * out_bytes),
          op.bias ? alignment_bytes(op.bias, 0) : 0u};
}

bool GemmRunner::adopt(Plan& plan, const GemmOperands& op, const GemmChoice& choice) const {
  if (choice.kind == GemmKind::skinny) {
    if (is_fp8(op) || !skinny_ || !SkinnyGemm::supports(op) || choice.variant >= k_skinny_gemm_n_variants) return false;
  } else if (choice.kind == GemmKind::stream) {
    if (!stream_gemm_ || !stream_gemm_->takes(op, choice.variant)) return false;
  } else if (choice.kind == GemmKind::skinny_fp8) {
    if (!fp8_ || choice.variant >= k_fp8_skinny_n_variants) return false;
    if (Fp8Kernels::is_mma_variant(choice.variant) ? !fp8_mma_takes(op) : !Fp8Kernels::skinny_supports(op)) return false;
  } else if ((is_fp8(op) && !fp8_cublaslt_takes(op)) || !algo_fits(lt_, plan, algo_of(choice.algo))) {
    return false;
  }
  plan.set_choice(choice);
  return true;
}

bool GemmRunner::fp8_cublaslt_takes(const GemmOperands& op) const {
  return fp8_ && fp8_scratch_ && op.m <= fp8_scratch_m_ && op.k <= fp8_scratch_k_ && op.k % 16 == 0 &&
         (op.w_scaling != Fp8Scaling::blocks_128 || op.k % 128 == 0) && op.out_dtype == DType::bf16 &&
         op.x % 16 == 0 && (op.x_stride * 2) % 16 == 0;
}

bool GemmRunner::fp8_mma_takes(const GemmOperands& op) const {
  return fp8_ && fp8_->mma_supports(op) && fp8_scratch_ && op.m <= fp8_scratch_m_ && op.k <= fp8_scratch_k_;
}

bool GemmRunner::enqueue_fp8_mma(const GemmOperands& op, int variant) {
  const CUdeviceptr scratch = fp8_scratch_->address();
  return fp8_->enqueue_quantize(op, scratch, stream_) && fp8_->enqueue_mma(op, variant, scratch, stream_);
}

cublasStatus_t GemmRunner::enqueue_cublaslt(Plan& plan, const cublasLtMatmulAlgo_t& algo, const GemmOperands& op) {
  if (!is_fp8(op)) return enqueue(lt_, plan, algo, op, op.x, workspace_, stream_);
  const CUdeviceptr scratch = fp8_scratch_->address();
  if (!fp8_->enqueue_quantize(op, scratch, stream_)) return CUBLAS_STATUS_EXECUTION_FAILED;
  plan.set_scales(op.w_scales, scratch + Fp8Kernels::scales_offset(op.m, op.k));
  return enqueue(lt_, plan, algo, op, scratch, workspace_, stream_);
}

bool GemmRunner::enqueue_choice(Plan& plan, const GemmChoice& choice, const GemmOperands& op) {
  if (choice.kind == GemmKind::skinny) return skinny_->enqueue(op, choice.variant, stream_);
  if (choice.kind == GemmKind::stream) return stream_gemm_->enqueue(op, choice.variant, stream_);
  if (choice.kind == GemmKind::skinny_fp8) {
    if (Fp8Kernels::is_mma_variant(choice.variant)) return enqueue_fp8_mma(op, choice.variant);
    return fp8_->enqueue_skinny(op, choice.variant, stream_);
  }
  return enqueue_cublaslt(plan, algo_of(choice.algo), op) == CUBLAS_STATUS_SUCCESS;
}

bool GemmRunner::reserve_fp8(std::int64_t m, std::int64_t k) {
  if (fp8_scratch_ && m <= fp8_scratch_m_ && k <= fp8_scratch_k_) return false;
  const std::int64_t new_m = std::max(m, fp8_scratch_m_), new_k = std::max(k, fp8_scratch_k_);
  if (fp8_scratch_) stream_.synchronize();  // queued GEMMs may still read the old scratch
  fp8_scratch_ = std::make_unique<DeviceMemory>(Fp8Kernels::scratch_bytes(new_m, new_k));
  fp8_scratch_m_ = new_m;
  fp8_scratch_k_ = new_k;
  // Plans whose FP8 choice was rejected for want of scratch may take cuBLASLt now.
  std::erase_if(plans_, [](const auto& entry) { return std::get<7>(entry.first) == DType::f8_e4m3; });
  return true;
}

bool GemmRunner::fp8_cublaslt_available(std::int64_t n, std::int64_t k, Fp8Scaling scaling) {
  const auto known = fp8_available_.find({n, k, scaling});
  if (known != fp8_available_.end()) return known->second;
  GemmOperands probe{.x = 256, .x_stride = k, .w = 256, .w_stride = k, .w_dtype = DType::f8_e4m3, .w_scales = 256,
                     .w_scaling = scaling, .out = 256, .out_stride = n, .out_dtype = DType::bf16, .m = 64, .n = n, .k = k};
  if (k % 16 != 0 || (scaling == Fp8Scaling::blocks_128 && k % 128 != 0)) return false;
  Plan plan(lt_, probe, 256);
  const bool available = !heuristic(lt_, plan, probe, 1).empty();
  fp8_available_.emplace(std::tuple{n, k, scaling}, available);
  return available;
}

std::unique_ptr<GemmRunner::Plan> GemmRunner::make_plan(const GemmOperands& op, GemmTuning& tuning) {
  const CUdeviceptr b_scales = fp8_scratch_ ? fp8_scratch_->address() + Fp8Kernels::scales_offset(op.m, op.k) : 0;
  auto plan = std::make_unique<Plan>(lt_, op, b_scales);
  const RaceSettings settings = RaceSettings::for_effort(tuning.effort());
  const GemmShapeKey key{GemmTuning::bucket_m(op.m), op.n, op.k, op.out_dtype, op.w_dtype, op.bias != 0,
                         GemmFusion::none, arch_, lt_.version()};
  const bool may_time = !tuning.frozen() && tuning.effort() != TuneEffort::off && !stream_.capturing();
  const int n_wanted = may_time ? settings.n_candidates : 1;

  // The bias goes through the epilogue when cuBLASLt offers any algorithm for it, else it is left to the caller.
  std::vector<cublasLtMatmulHeuristicResult_t> candidates;
  const bool cublaslt_takes = !is_fp8(op) || fp8_cublaslt_takes(op);
  if (op.bias && cublaslt_takes) {
    plan->use_bias_epilogue(op.bias);
    candidates = heuristic(lt_, *plan, op, n_wanted);
    if (candidates.empty()) plan = std::make_unique<Plan>(lt_, op, b_scales);
  }
  if (!plan->bias_in_epilogue && cublaslt_takes) candidates = heuristic(lt_, *plan, op, n_wanted);

  // The race's entrants: cuBLASLt's candidates in the heuristic's order, then the variants of
  // Flare's kernels (stream, skinny) where they take the problem. The first is what runs when nothing is timed.
  std::vector<GemmChoice> choices;
  for (const auto& c : candidates) choices.push_back({.kind = GemmKind::cublaslt, .algo = algo_words(c.algo)});
  if (n_wanted > 1 && op.m <= k_split_k_max_m) {
    for (std::size_t i = 0; i < std::min<std::size_t>(candidates.size(), k_split_k_candidates); ++i) {
      for (const auto& version : split_k_versions(lt_, *plan, candidates[i].algo)) {
        choices.push_back({.kind = GemmKind::cublaslt, .algo = algo_words(version)});
      }
    }
  }
  if (!is_fp8(op) && skinny_ && SkinnyGemm::supports(op)) {
    for (std::uint8_t v = 0; v < k_skinny_gemm_n_variants; ++v) choices.push_back({.kind = GemmKind::skinny, .variant = v});
  }
  if (stream_gemm_) {
    for (std::uint8_t v = 0; v < k_stream_gemm_n_variants; ++v) {
      if (stream_gemm_->takes(op, v)) choices.push_back({.kind = GemmKind::stream, .variant = v});
    }
  }
  if (fp8_ && Fp8Kernels::skinny_supports(op)) {
    for (std::uint8_t v = 0; v < k_fp8_mma_first_variant; ++v) choices.push_back({.kind = GemmKind::skinny_fp8, .variant = v});
  }
  if (fp8_mma_takes(op)) {
    for (std::uint8_t v = k_fp8_mma_first_variant; v < k_fp8_skinny_n_variants; ++v) {
      choices.push_back({.kind = GemmKind::skinny_fp8, .variant = v});
    }
  }
  if (choices.empty()) return nullptr;

  const bool known = tuning.find(key) || (!tuning.frozen() && tuning.refresh() && tuning.find(key));
  if (known) {
    // A choice this problem cannot take (e.g. a bucket mate with less aligned operands) gives way
    // to the first entrant, not recorded.
    if (!adopt(*plan, op, *tuning.find(key))) plan->set_choice(choices[0]);
    return plan;
  }
  plan->set_choice(choices[0]);
  if (tuning.frozen() || tuning.effort() == TuneEffort::off) return plan;
  if (!may_time) {
    // Inside a capture: no race, but record the choice the graph bakes in, so eager runs of the
    // shape (here or in another backend) use the same kernel and compute the same bits.
    GemmChoice first = choices[0];
    first.n_candidates = 1;
    tuning.record(key, first);
    return plan;
  }
  WeightRotation weights{cold_weight_copies(op)};
  const auto enqueue_candidate = [&](int i) {
    return enqueue_choice(*plan, choices[std::size_t(i)], weights.next(op));
  };
  const RaceResult raced = race(int(choices.size()), enqueue_candidate, stream_, settings);
  if (race_log_) log_race(key, choices, raced);
  tuning.count_timed();
  if (raced.winner < 0) return nullptr;  // none of the entrants runs
  GemmChoice won = choices[std::size_t(raced.winner)];
  won.time_us = raced.time_us;
  won.n_candidates = std::uint16_t(choices.size());
  plan->set_choice(won);
  tuning.record(key, won);
  return plan;
}

std::vector<std::unique_ptr<DeviceMemory>> GemmRunner::cold_weight_copies(const GemmOperands& op) const {
  std::vector<std::unique_ptr<DeviceMemory>> copies;
  const std::size_t element = op.w_dtype == DType::f8_e4m3 ? 1 : 2;
  const std::size_t bytes = (std::size_t(op.n - 1) * std::size_t(op.w_stride) + std::size_t(op.k)) * element;
  const std::size_t n_copies = race_weight_copies(bytes, l2_bytes_);
  const CUdeviceptr offset = op.w % k_copy_alignment;
  try {
    for (std::size_t c = 0; c < n_copies; ++c) {
      copies.push_back(std::make_unique<DeviceMemory>(bytes + offset));
      check(driver().memcpy_dtod_async(copies.back()->address() + offset, op.w, bytes, stream_.handle()),
            "cuMemcpyDtoDAsync (weight copies for the GEMM race)");
    }
  } catch (const Error&) {
    copies.clear();  // no room: time the weights in place, from L2 where they fit
  }
  return copies;
}

GemmRunner::Plan* GemmRunner::plan_for(const GemmOperands& op, GemmTuning& tuning) {
  if (op.m < 1 || op.n < 1 || op.k < 1) fail(ExitCode::failure, "internal: GEMM [{}, {}, {}]", op.m, op.n, op.k);
  const PlanKey key = plan_key(op);
  auto it = plans_.find(key);
  if (it == plans_.end()) it = plans_.emplace(key, make_plan(op, tuning)).first;
  return it->second.get();
}

GemmResult GemmRunner::run(const GemmOperands& op, GemmTuning& tuning) {
  Plan* plan = plan_for(op, tuning);
  if (!plan) return GemmResult::unsupported;
  return enqueue_plan(*plan, op);
}

GemmResult GemmRunner::enqueue_plan(Plan& plan, const GemmOperands& op) {
  if (plan.choice.kind != GemmKind::cublaslt) {
    if (!enqueue_choice(plan, plan.choice, op)) {
      fail(ExitCode::failure, "CUDA launch of Flare's GEMM kind {} variant {} failed for [{}, {}, {}]",
           int(plan.choice.kind), plan.choice.variant, op.m, op.n, op.k);
    }
    return GemmResult::done;  // the kernel adds the bias
  }
  if (plan.bias_in_epilogue) plan.set_bias(op.bias);
  lt_.check(enqueue_cublaslt(plan, plan.algo, op), "cublasLtMatmul");
  return op.bias && !plan.bias_in_epilogue ? GemmResult::bias_pending : GemmResult::done;
}

bool GemmRunner::split_takes(const GemmOperands& op) {
  return op.bias == 0 && op.w_dtype == DType::bf16 && op.out_dtype == DType::bf16 && op.m >= 1 &&
         op.m <= k_split_partials_max_m;
}

std::size_t GemmRunner::partials_bytes(const GemmOperands& op, int parts) {
  return std::size_t(parts) * std::size_t(op.m) * std::size_t(op.n) * 4;
}

void GemmRunner::record_plain_choice(GemmTuning& tuning, const GemmShapeKey& key, const Plan* plain, float time_us,
                                     std::size_t n_candidates) {
  if (!plain || tuning.frozen() || tuning.effort() == TuneEffort::off) return;
  GemmChoice c = plain->choice;
  c.time_us = time_us;
  c.n_candidates = std::uint16_t(n_candidates);
  tuning.record(key, c);  // inside a capture too, so eager runs agree with the graph
}

std::unique_ptr<GemmRunner::Plan> GemmRunner::make_split_plan(const GemmOperands& op, GemmTuning& tuning,
                                                              CUdeviceptr partials, std::size_t partials_capacity,
                                                              const std::function<void(int)>& norm) {
  const GemmShapeKey key{GemmTuning::bucket_m(op.m), op.n, op.k, DType::bf16, DType::bf16, false,
                         GemmFusion::residual_norm, arch_, lt_.version()};
  const bool known = tuning.find(key) || (!tuning.frozen() && tuning.refresh() && tuning.find(key));
  if (known) {
    const GemmChoice& c = *tuning.find(key);
    if (c.kind != GemmKind::split_partials || !split_partials_divides(op.k, c.variant)) return nullptr;
    auto plan = std::make_unique<Plan>(lt_, op, Plan::SplitK{c.variant});
    if (!algo_fits(lt_, *plan, algo_of(c.algo))) return nullptr;  // a bucket mate cuBLASLt rejects: plain
    plan->set_choice(c);
    return plan;
  }
  Plan* plain = plan_for(op, tuning);  // raced first where it is raced at all
  const auto record_plain = [&](float time_us, std::size_t n_candidates) {
    record_plain_choice(tuning, key, plain, time_us, n_candidates);
  };
  const RaceSettings settings = RaceSettings::for_effort(tuning.effort());
  if (tuning.frozen() || tuning.effort() == TuneEffort::off || stream_.capturing()) {
    record_plain(0.0f, 1);
    return nullptr;
  }

  // The entrants: the plain GEMM (null), then each split's heuristic candidates.
  std::vector<std::unique_ptr<Plan>> entrants;
  if (plain) entrants.push_back(nullptr);
  for (const std::uint8_t parts : k_split_partials_parts) {
    if (!split_partials_divides(op.k, parts) || partials_bytes(op, parts) > partials_capacity) continue;
    const Plan probe(lt_, op, Plan::SplitK{parts});
    for (const auto& candidate : heuristic(lt_, probe, op, std::max(settings.n_candidates / 2, 1))) {
      auto plan = std::make_unique<Plan>(lt_, op, Plan::SplitK{parts});
      plan->set_choice({.kind = GemmKind::split_partials, .variant = parts, .algo = algo_words(candidate.algo)});
      entrants.push_back(std::move(plan));
    }
  }
  if (entrants.size() <= 1) {
    record_plain(plain ? plain->choice.time_us : 0.0f, entrants.size());
    return nullptr;
  }
  WeightRotation weights{cold_weight_copies(op)};
  const auto enqueue_entrant = [&](int i) {
    const GemmOperands timed = weights.next(op);
    const Plan* entrant = entrants[std::size_t(i)].get();
    if (!entrant) {
      if (enqueue_plan(*plain, timed) == GemmResult::unsupported) return false;
      norm(0);
      return true;
    }
    if (enqueue_partials(lt_, *entrant, entrant->algo, timed, partials, workspace_, stream_) != CUBLAS_STATUS_SUCCESS) {
      return false;
    }
    norm(entrant->parts);
    return true;
  };
  const RaceResult raced = race(int(entrants.size()), enqueue_entrant, stream_, settings);
  std::vector<GemmChoice> named;
  for (const auto& e : entrants) named.push_back(e ? e->choice : plain->choice);
  if (race_log_) log_race(key, named, raced);
  tuning.count_timed();
  if (raced.winner < 0 || !entrants[std::size_t(raced.winner)]) {
    record_plain(raced.winner < 0 ? 0.0f : raced.time_us, entrants.size());
    return nullptr;
  }
  std::unique_ptr<Plan> won = std::move(entrants[std::size_t(raced.winner)]);
  GemmChoice c = won->choice;
  c.time_us = raced.time_us;
  c.n_candidates = std::uint16_t(entrants.size());
  won->set_choice(c);
  tuning.record(key, c);
  return won;
}

int GemmRunner::run_split(const GemmOperands& op, GemmTuning& tuning, CUdeviceptr partials,
                          std::size_t partials_capacity, const std::function<void(int)>& norm) {
  if (split_takes(op)) {
    const PlanKey key = plan_key(op);
    auto it = split_plans_.find(key);
    if (it == split_plans_.end()) {
      it = split_plans_.emplace(key, make_split_plan(op, tuning, partials, partials_capacity, norm)).first;
    }
    const Plan* plan = it->second.get();
    if (plan && partials_bytes(op, plan->parts) <= partials_capacity) {
      lt_.check(enqueue_partials(lt_, *plan, plan->algo, op, partials, workspace_, stream_),
                "cublasLtMatmul (split-K partials)");
      return plan->parts;
    }
  }
  return run(op, tuning) == GemmResult::unsupported ? -1 : 0;
}

bool GemmRunner::swiglu_takes(const GemmOperands& op) {
  return op.bias == 0 && op.w_dtype == DType::bf16 && op.out_dtype == DType::bf16 && op.n % 2 == 0 &&
         op.m >= k_stream_gemm_min_m && op.m <= k_stream_gemm_max_m;
}

int GemmRunner::make_swiglu_choice(const GemmOperands& op, GemmTuning& tuning, CUdeviceptr act,
                                   std::int64_t act_stride, const std::function<void()>& swiglu) {
  const auto fused = [&](const GemmOperands& o) {
    GemmOperands f = o;
    f.out = act;
    f.out_stride = act_stride;
    return f;
  };
  const GemmShapeKey key{GemmTuning::bucket_m(op.m), op.n, op.k, DType::bf16, DType::bf16, false,
                         GemmFusion::swiglu, arch_, lt_.version()};
  const bool known = tuning.find(key) || (!tuning.frozen() && tuning.refresh() && tuning.find(key));
  if (known) {
    const GemmChoice& c = *tuning.find(key);
    // A bucket mate the kernel does not take (alignment) runs plain.
    return c.kind == GemmKind::stream_swiglu && stream_gemm_->takes_swiglu(fused(op), c.variant) ? c.variant : -1;
  }
  Plan* plain = plan_for(op, tuning);  // raced first where it is raced at all
  const auto record_plain = [&](float time_us, std::size_t n_candidates) {
    record_plain_choice(tuning, key, plain, time_us, n_candidates);
  };
  if (tuning.frozen() || tuning.effort() == TuneEffort::off || stream_.capturing()) {
    record_plain(0.0f, 1);
    return -1;
  }

  // The entrants: the plain GEMM and the swiglu kernel (-1), then the fused kernel's variants.
  std::vector<int> entrants;
  if (plain) entrants.push_back(-1);
  for (std::uint8_t v = 0; v < k_stream_gemm_n_variants; ++v) {
    if (stream_gemm_->takes_swiglu(fused(op), v)) entrants.push_back(v);
  }
  if (entrants.size() <= 1 && plain) {
    record_plain(plain->choice.time_us, entrants.size());
    return -1;
  }
  if (entrants.empty()) return -1;
  WeightRotation weights{cold_weight_copies(op)};
  const auto enqueue_entrant = [&](int i) {
    const GemmOperands timed = weights.next(op);
    const int v = entrants[std::size_t(i)];
    if (v >= 0) return stream_gemm_->enqueue_swiglu(fused(timed), v, stream_);
    if (enqueue_plan(*plain, timed) == GemmResult::unsupported) return false;
    swiglu();
    return true;
  };
  const RaceSettings settings = RaceSettings::for_effort(tuning.effort());
  const RaceResult raced = race(int(entrants.size()), enqueue_entrant, stream_, settings);
  std::vector<GemmChoice> named;
  for (const int v : entrants) {
    named.push_back(v < 0 ? plain->choice : GemmChoice{.kind = GemmKind::stream_swiglu, .variant = std::uint8_t(v)});
  }
  if (race_log_) log_race(key, named, raced);
  tuning.count_timed();
  if (raced.winner < 0 || entrants[std::size_t(raced.winner)] < 0) {
    record_plain(raced.winner < 0 ? 0.0f : raced.time_us, entrants.size());
    return -1;
  }
  GemmChoice c = named[std::size_t(raced.winner)];
  c.time_us = raced.time_us;
  c.n_candidates = std::uint16_t(entrants.size());
  tuning.record(key, c);
  return c.variant;
}

int GemmRunner::run_swiglu(const GemmOperands& op, GemmTuning& tuning, CUdeviceptr act, std::int64_t act_stride,
                           const std::function<void()>& swiglu) {
  if (stream_gemm_ && swiglu_takes(op)) {
    const PlanKey key = plan_key(op);
    auto it = swiglu_variants_.find(key);
    if (it == swiglu_variants_.end()) {
      it = swiglu_variants_.emplace(key, make_swiglu_choice(op, tuning, act, act_stride, swiglu)).first;
    }
    if (it->second >= 0) {
      GemmOperands fused = op;
      fused.out = act;
      fused.out_stride = act_stride;
      if (!stream_gemm_->enqueue_swiglu(fused, it->second, stream_)) {
        fail(ExitCode::failure, "CUDA launch of the streaming GEMM with SwiGLU failed for [{}, {}, {}]", op.m, op.n,
             op.k);
      }
      return 1;
    }
  }
  return run(op, tuning) == GemmResult::unsupported ? -1 : 0;
}

std::optional<GemmChoice> GemmRunner::first_split_choice(const GemmOperands& op, int parts) const {
  if (!split_takes(op) || !split_partials_divides(op.k, parts)) return std::nullopt;
  const Plan plan(lt_, op, Plan::SplitK{parts});
  const auto candidates = heuristic(lt_, plan, op, 1);
  if (candidates.empty()) return std::nullopt;
  return GemmChoice{
      .kind = GemmKind::split_partials, .variant = std::uint8_t(parts), .algo = algo_words(candidates[0].algo)};
}

}  // namespace flare::helios::cuda
