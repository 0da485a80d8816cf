// The CUDA backend's GEMMs through cuBLASLt, for m <= 16 Flare's skinny kernel (skinny_gemm.h) and,
// on Hopper for 9 <= m <= 128, Flare's tensor-core streaming kernel (stream_gemm.h):
// out[m, n] = x[m, k] @ w[n, k]^T (+ bias[n]), BF16 x and w (rows may be strided), F32 compute, BF16
// or F32 out, F32 bias through the BIAS epilogue where cuBLASLt offers it for the output type (else
// the caller adds it with a small kernel); the skinny kernel adds the bias itself.
//
// FP8 E4M3 weights with f32 scales (Fp8Scaling, fp8_kernels.h) run on cuBLASLt's FP8 GEMM with
// block scaling (sm_90: weights BLK128x128_32F or OUTER_VEC_32F, activations quantized first by a
// small kernel into the runner's scratch, per 128 elements of a row (VEC128_32F) or per row
// (OUTER_VEC_32F)), on the FP8 skinny kernel for m <= 8, which reads BF16 activations as they
// are, or on the tensor-core decode kernel for m <= 16, which reads the quantized activations
// (fp8_kernels.h). The race times the quantization together with the GEMMs that need it, so all
// compete on what a step pays.
//
// Row-major operands become column-major without copies: a row-major [r, c] matrix with stride s is
// a column-major [c, r] matrix with leading dimension s, so cuBLASLt computes out^T[n, m] =
// op(w)[n, k] x x^T[k, m] with A = w (transposed), B = x, D = out; the bias has D's n rows.
//
// Each exact problem (shape, strides, dtypes, pointer alignments) gets a Plan once: descriptors and
// the kernel, chosen from the GemmTuning table by its bucketed key (refreshed from its file on a
// miss), else by timing the heuristic's candidates and the skinny kernel's variants where it takes
// the problem (gemm_tuner.h) and recording the winner (weights that fit in L2 are timed from
// copies taken in turn: a step reads each weight from HBM, not from L2), else the heuristic's first
// candidate (the skinny kernel's first variant when cuBLASLt has none): table frozen or effort off
// (not recorded), or the stream is being captured into a graph (recorded, so eager runs agree with
// the graph).
// A GEMM whose output goes straight into a residual add and RMSNorm (run_split) may instead split k
// into parts computed by one strided-batched cublasLtMatmul that writes F32 partials, which the norm
// sums: at decode batch sizes the plain GEMM's few output tiles leave SMs idle, and cuBLASLt's own
// split-K adds a reduction kernel the norm makes unnecessary. Its race times each entrant together
// with the norm that follows it, and its choice is recorded under the residual_norm fusion key.
// A GEMM whose output goes straight into SwiGLU (run_swiglu) may instead run the streaming kernel with
// SwiGLU in its epilogue: one kernel instead of two, and the [m, 2 x inter] intermediate never
// leaves the SMs. Its race times the plain GEMM together with the swiglu kernel, and its choice is
// recorded under the swiglu fusion key.
// Running a plan enqueues one cublasLtMatmul with the runner's 32 MiB workspace, or one skinny
// kernel: no host synchronization and no allocation, so it can be captured. Timing does
// synchronize, so it happens only outside a capture.
//
// Ownership: owned by the CudaBackend and used by its engine thread; holds the workspace and the
// skinny kernel's entry points.
#pragma once

#include <cuda.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "helios/cuda/cublaslt.h"
#include "helios/cuda/driver.h"
#include "helios/cuda/fp8_kernels.h"
#include "helios/cuda/skinny_gemm.h"
#include "helios/cuda/stream_gemm.h"
#include "helios/dtype.h"
#include "helios/gemm_tuning.h"

namespace flare::helios::cuda {

inline constexpr std::size_t k_gemm_workspace_bytes = std::size_t(32) << 20;

struct GemmOperands {
  CUdeviceptr x = 0;             // [m, k] bf16, row stride x_stride
  std::int64_t x_stride = 0;
  CUdeviceptr w = 0;             // [n, k] w_dtype, row stride w_stride
  std::int64_t w_stride = 0;
  DType w_dtype = DType::bf16;   // bf16, or f8_e4m3 with w_scales
  CUdeviceptr w_scales = 0;      // f8_e4m3: f32 scales laid out as w_scaling says
  Fp8Scaling w_scaling = Fp8Scaling::blocks_128;
  CUdeviceptr bias = 0;          // [n] f32, or 0
  CUdeviceptr out = 0;           // [m, n] out_dtype, row stride out_stride
  std::int64_t out_stride = 0;
  DType out_dtype = DType::bf16;  // bf16 or f32
  std::int64_t m = 0, n = 0, k = 0;
};

enum class GemmResult {
  done,          // out holds the result (with the bias, if any)
  bias_pending,  // out holds x @ w^T; the caller must still add the bias
  unsupported,   // cuBLASLt offers no algorithm for this problem; nothing was enqueued
};

class GemmRunner {
 public:
  // `skinny` null: cuBLASLt only.
  GemmRunner(const CublasLt& lt, std::string arch, const Stream& stream, std::unique_ptr<SkinnyGemm> skinny = nullptr);
  // The FP8 kernels: until they are set, FP8 problems are unsupported.
  void set_fp8_kernels(std::unique_ptr<Fp8Kernels> kernels) { fp8_ = std::move(kernels); }
  // The tensor-core streaming kernel (sm_90): until it is set, it does not race.
  void set_stream_gemm(std::unique_ptr<StreamGemm> stream) { stream_gemm_ = std::move(stream); }
  bool has_stream_gemm() const { return stream_gemm_ != nullptr; }
  bool has_fp8_kernels() const { return fp8_ != nullptr; }
  // The device's L2 size: the race times weights smaller than twice this from copies taken in turn,
  // so that each run reads them from HBM as a step does. 0 (the default) times them in place.
  void set_l2_bytes(std::size_t bytes) { l2_bytes_ = bytes; }
  // Whether each race prints its entrants and times on stderr (CudaBackendOptions::gemm_race_log);
  // off by default.
  void set_race_log(bool on) { race_log_ = on; }
  // The FP8 skinny kernel's variant `variant` on a problem it takes, untimed and unplanned (the
  // backend's last resort); false when it does not take it or the launch fails.
  bool enqueue_fp8_skinny(const GemmOperands& op, int variant) const {
    return fp8_ && fp8_->enqueue_skinny(op, variant, stream_);
  }
  // Sizes the activation scratch of FP8 problems for up to m rows of k (no-op when it is large
  // enough). True when the scratch moved: graphs that named it must be captured again. Synchronizes
  // the stream before freeing the old scratch; never call it during a capture.
  bool reserve_fp8(std::int64_t m, std::int64_t k);
  // Whether cuBLASLt has an FP8 algorithm for weights [n, k] scaled as `scaling` (asked for m = 64,
  // once per shape: every layer asks again): without one, the backend keeps such weights in BF16.
  bool fp8_cublaslt_available(std::int64_t n, std::int64_t k, Fp8Scaling scaling);
  ~GemmRunner();
  GemmRunner(const GemmRunner&) = delete;
  GemmRunner& operator=(const GemmRunner&) = delete;

  // Enqueues the GEMM on the stream (see the header comment for how the algorithm is chosen; a race
  // counts in tuning.n_timed() and records its winner in `tuning`).
  GemmResult run(const GemmOperands& op, GemmTuning& tuning);

  // A GEMM whose only reader is a residual-add RMSNorm that can sum split-K partials (the header
  // comment): enqueues either op as run() would, returning 0, or k split `parts` ways into F32
  // partials [parts][m][n] at `partials` (op.out untouched), returning parts; -1 when nothing takes
  // the problem (nothing enqueued). A split needs no bias, BF16 weights and output, m <=
  // k_split_partials_max_m and partials_bytes(op, parts) <= partials_capacity. `norm(parts)`
  // enqueues the reader for the race (0: reading op.out), writing only scratch.
  int run_split(const GemmOperands& op, GemmTuning& tuning, CUdeviceptr partials, std::size_t partials_capacity,
                const std::function<void(int)>& norm);
  static bool split_takes(const GemmOperands& op);
  static std::size_t partials_bytes(const GemmOperands& op, int parts);
  // The split of op `parts` ways with the heuristic's first algorithm, as a tuning table would name
  // it (tests force the split with it); nullopt where the split does not take op.
  std::optional<GemmChoice> first_split_choice(const GemmOperands& op, int parts) const;

  // A GEMM whose only reader is SwiGLU (the header comment): op.out is the [m, n] gate_up output
  // (gate columns, then up), act the [m, n / 2] SwiGLU output with row stride act_stride. Enqueues
  // either op as run() would, returning 0 (the caller then runs its swiglu), or the streaming kernel
  // with SwiGLU in its epilogue writing act (op.out untouched), returning 1; -1 when nothing takes
  // the problem (nothing enqueued). `swiglu()` enqueues the caller's swiglu for the race.
  int run_swiglu(const GemmOperands& op, GemmTuning& tuning, CUdeviceptr act, std::int64_t act_stride,
                 const std::function<void()>& swiglu);
  static bool swiglu_takes(const GemmOperands& op);

  // Forgets every plan, so the next run of each problem consults the tuning table again.
  void clear_plans();
  std::size_t n_plans() const { return plans_.size(); }
  std::uint64_t library_version() const { return lt_.version(); }

  struct Plan;  // gemm_runner.cpp

 private:
  // Everything that decides a plan: shape, strides, output and weight types, FP8 scaling, bias,
  // pointer alignments.
  using PlanKey = std::tuple<std::int64_t, std::int64_t, std::int64_t, std::int64_t, std::int64_t, std::int64_t,
                             DType, DType, Fp8Scaling, bool, std::uint32_t, std::uint32_t, std::uint32_t,
                             std::uint32_t>;
  static PlanKey plan_key(const GemmOperands& op);
  std::unique_ptr<Plan> make_plan(const GemmOperands& op, GemmTuning& tuning);
  Plan* plan_for(const GemmOperands& op, GemmTuning& tuning);  // made on first use; null: unsupported
  GemmResult enqueue_plan(Plan& plan, const GemmOperands& op);
  // run_split's decision for op: the split's plan, or null for the plain GEMM.
  std::unique_ptr<Plan> make_split_plan(const GemmOperands& op, GemmTuning& tuning, CUdeviceptr partials,
                                        std::size_t partials_capacity, const std::function<void(int)>& norm);
  // A fused race's key (run_split, run_swiglu) lost to, or was not raced against, the plain GEMM:
  // records the plain plan's choice under it unless the table is frozen or tuning is off.
  static void record_plain_choice(GemmTuning& tuning, const GemmShapeKey& key, const Plan* plain, float time_us,
                                  std::size_t n_candidates);
  // run_swiglu's decision for op: the streaming kernel's variant, or -1 for the plain GEMM.
  int make_swiglu_choice(const GemmOperands& op, GemmTuning& tuning, CUdeviceptr act, std::int64_t act_stride,
                         const std::function<void()>& swiglu);
  // Whether `plan` can run `choice` (an algorithm cuBLASLt accepts, a skinny variant for a problem
  // the kernel takes), and if so makes it the plan's.
  bool adopt(Plan& plan, const GemmOperands& op, const GemmChoice& choice) const;
  bool enqueue_choice(Plan& plan, const GemmChoice& choice, const GemmOperands& op);
  // cuBLASLt's GEMM of the plan with `algo`; for FP8 weights, the activation quantization first.
  cublasStatus_t enqueue_cublaslt(Plan& plan, const cublasLtMatmulAlgo_t& algo, const GemmOperands& op);
  // FP8 problems cuBLASLt can take: k % 16 == 0, BF16 output, 16-byte aligned x, scratch reserved.
  bool fp8_cublaslt_takes(const GemmOperands& op) const;
  // FP8 problems the tensor-core decode kernel can take (its activations need the scratch too).
  bool fp8_mma_takes(const GemmOperands& op) const;
  // The activation quantization, then the tensor-core kernel's variant `variant`.
  bool enqueue_fp8_mma(const GemmOperands& op, int variant);
  // The copies of op's weights that the race takes in turn (empty: time them in place), each at
  // the same offset from a 256-byte boundary as op.w, so every plan's alignment holds.
  std::vector<std::unique_ptr<DeviceMemory>> cold_weight_copies(const GemmOperands& op) const;

  const CublasLt& lt_;
  std::string arch_;
  const Stream& stream_;
  DeviceMemory workspace_;
  std::unique_ptr<SkinnyGemm> skinny_;  // null: cuBLASLt only
  std::unique_ptr<Fp8Kernels> fp8_;     // null: no FP8 problems
  std::unique_ptr<StreamGemm> stream_gemm_;  // null: not on this GPU
  std::unique_ptr<DeviceMemory> fp8_scratch_;  // quantized activations and their scales
  std::size_t l2_bytes_ = 0;
  bool race_log_ = false;
  std::int64_t fp8_scratch_m_ = 0, fp8_scratch_k_ = 0;
  std::map<std::tuple<std::int64_t, std::int64_t, Fp8Scaling>, bool> fp8_available_;  // fp8_cublaslt_available()
  std::map<PlanKey, std::unique_ptr<Plan>> plans_;
  std::map<PlanKey, std::unique_ptr<Plan>> split_plans_;  // run_split's decisions; null: the plain GEMM
  std::map<PlanKey, int> swiglu_variants_;                 // run_swiglu's decisions; -1: the plain GEMM
};

}  // namespace flare::helios::cuda
