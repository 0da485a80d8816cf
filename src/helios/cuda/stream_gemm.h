// The host side of Flare's tensor-core streaming GEMM (kernels/stream_gemm.cu, sm_90 only):
// out[m, n] = x[m, k] @ w[n, k]^T (+ bias[n]) for decode batches of 9 to 128 rows, BF16 weights.
// It races cuBLASLt's candidates (gemm_runner.h); its variants split each 128-row weight tile's k
// 1 to 8 ways (k_stream_gemm_splits; the CTAs of a tile form a cluster and add their partial
// tiles in shared memory), so a GEMM whose output has few tiles still gives every SM a share of
// the weight stream.
//
// enqueue_swiglu() runs the same kernel with SwiGLU in its epilogue for a gate_up weight (gate rows,
// then up rows): out [m, n / 2] = silu(gate) x up, what the plain GEMM and the swiglu kernel compute.
//
// enqueue() encodes the two TMA descriptors (the operands' addresses are in them) and launches one
// kernel: no host synchronization, no allocation, no workspace, so it can be captured.
//
// Ownership: owned by the GemmRunner and used by its engine thread; the functions belong to modules
// the loader loaded, which must outlive it.
#pragma once

#include <cuda.h>

#include <array>
#include <functional>
#include <string>

#include "helios/cuda/driver.h"
#include "helios/dtype.h"
#include "helios/gemm_tuning.h"

namespace flare::helios::cuda {

struct GemmOperands;

// The kernel source's name, for CudaBackend::function().
inline constexpr const char* k_stream_gemm_source = "stream_gemm";

class StreamGemm {
 public:
  // Returns the entry point `entry` of kernel source "stream_gemm" compiled with STREAM_N=n_tile
  // for the device's architecture-specific target (sm_90a).
  using Loader = std::function<CUfunction(const std::string& entry, int n_tile)>;
  static constexpr std::array<int, 3> k_tiles = {32, 64, 128};
  // Whether the device and driver can run it: sm_90 (wgmma and TMA as sm_90a compiles them) and a
  // driver with cuTensorMapEncodeTiled.
  static bool available(const DeviceInfo& device);
  // overlap_previous: launch with programmatic dependent launch (early_work_programmatic_launch()).
  StreamGemm(const Loader& load, bool overlap_previous);
  ~StreamGemm();
  StreamGemm(const StreamGemm&) = delete;
  StreamGemm& operator=(const StreamGemm&) = delete;

  // Whether variant `variant` takes the problem: bf16 weights, 9 <= m <= 128, k % 8 == 0, x and w
  // (base and row stride) 16-byte aligned, bf16 or f32 output, and at most as many splits as
  // k-blocks of 64.
  bool takes(const GemmOperands& op, int variant) const;
  // Whether variant `variant` takes op with SwiGLU in the epilogue: as takes() for BF16 output, no
  // bias, and an even n (op.n is the weight's rows; the output op.out has op.n / 2 columns).
  bool takes_swiglu(const GemmOperands& op, int variant) const;
  // The x-row tile for m (32, 64 or 128: the smallest >= m).
  static int n_tile(std::int64_t m);
  // "flare_stream_gemm_n<tile>_<bf16|f32|swiglu>"
  static std::string entry_name(int n_tile, DType out, bool swiglu = false);
  // Dynamic shared memory of the tile's kernel (kernels/stream_gemm.cu keeps the same constants).
  static unsigned shared_bytes(int n_tile);

  // Enqueues variant `variant` of a problem it takes on `stream`; false when it does not take it or
  // the launch fails.
  bool enqueue(const GemmOperands& op, int variant, const Stream& stream) const;
  // The same with SwiGLU in the epilogue, for a problem takes_swiglu() accepts.
  bool enqueue_swiglu(const GemmOperands& op, int variant, const Stream& stream) const;

 private:
  bool launch(const GemmOperands& op, int variant, bool swiglu, const Stream& stream) const;

  std::array<std::array<CUfunction, 3>, k_tiles.size()> functions_{};  // [tile][0 bf16, 1 f32, 2 swiglu]
  bool overlap_previous_ = false;
};

}  // namespace flare::helios::cuda
