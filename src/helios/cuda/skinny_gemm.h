// The host side of Flare's skinny GEMM (kernels/skinny_gemm.cu): out[m, n] = x[m, k] @ w[n, k]^T
// (+ bias[n]) for m <= 16, a weight-streaming kernel that races cuBLASLt's candidates for small m
// (gemm_runner.h). Every entry point is loaded at construction, so no module loads on first use
// inside a graph capture; enqueue() is one kernel launch (no host synchronization, no allocation),
// so it can be captured.
//
// Ownership: owned by the GemmRunner; the functions belong to the module its loader loaded, which
// must outlive it.
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
inline constexpr const char* k_skinny_gemm_source = "skinny_gemm";

class SkinnyGemm {
 public:
  // Returns the entry point `entry` of kernel source "skinny_gemm" from a module holding x-row tile
  // `m_tile` (compiled with SKINNY_M=m_tile, or with every tile).
  using Loader = std::function<CUfunction(const std::string& entry, int m_tile)>;
  static constexpr std::array<int, 5> k_tiles = {1, 2, 4, 8, 16};
  // overlap_previous: launch with programmatic dependent launch (early_work_programmatic_launch(),
  // driver.h).
  SkinnyGemm(const Loader& load, bool overlap_previous);

  // Whether the kernel takes the problem: 1 <= m <= 16, k % 8 == 0, x and w (base and row stride)
  // 16-byte aligned, n and k within int, bf16 or f32 output.
  static bool supports(const GemmOperands& op);
  // The x-row tile for m (1, 2, 4, 8 or 16: the smallest >= m).
  static int m_tile(std::int64_t m);
  // "flare_skinny_gemm_m<tile>_v<variant>_<bf16|f32>"
  static std::string entry_name(int m_tile, int variant, DType out);

  // Enqueues variant `variant` of a supported problem on `stream` (bias included when op.bias is
  // set); false when the launch fails.
  bool enqueue(const GemmOperands& op, int variant, const Stream& stream) const;

 private:
  static constexpr int k_n_tiles = int(k_tiles.size());
  // [tile index][variant][output: 0 bf16, 1 f32]
  std::array<std::array<std::array<CUfunction, 2>, k_skinny_gemm_n_variants>, k_n_tiles> functions_{};
  bool overlap_previous_ = false;
};

}  // namespace flare::helios::cuda
