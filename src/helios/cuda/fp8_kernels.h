// The host side of kernels/fp8_linear.cu: the skinny FP8-weight GEMM (m <= 8, BF16 activations,
// weights widened in registers), the tensor-core decode GEMM (m <= 16, FP8 activations) and the
// activation quantization that it and cuBLASLt's FP8 GEMM need,
// for the two weight scale layouts the CUDA backend keeps as FP8 (Fp8Scaling). Every entry point is
// loaded at construction, so nothing loads on first use inside a graph capture; each enqueue is one
// kernel launch (no host synchronization, no allocation), so it can be captured.
//
// Ownership: owned by the GemmRunner; the functions belong to modules the loader keeps loaded.
#pragma once

#include <cuda.h>

#include <array>
#include <cstdint>
#include <functional>
#include <string>

#include "helios/cuda/driver.h"
#include "helios/gemm_tuning.h"

namespace flare::helios::cuda {

struct GemmOperands;

// The kernel source's name, for CudaBackend::function().
inline constexpr const char* k_fp8_linear_source = "fp8_linear";

// How an FP8 weight [n, k]'s f32 scales are laid out.
enum class Fp8Scaling : std::uint8_t {
  blocks_128,  // one per 128 x 128 block: [ceil(n / 128)][k / 128] row-major (k % 128 == 0)
  rows,        // one per row: [n]
};

class Fp8Kernels {
 public:
  // Returns entry point `entry` of kernel source "fp8_linear" from the module of x-row tile `m_tile`
  // (compiled with FP8_SKINNY_M=m_tile).
  using Loader = std::function<CUfunction(const std::string& entry, int m_tile)>;
  static constexpr std::array<int, 4> k_tiles = {1, 2, 4, 8};
  // tensor_cores: the device has FP8 mma.sync (sm_89+); without, the tensor-core kernel is never
  // offered.
  Fp8Kernels(const Loader& load, bool overlap_previous, bool tensor_cores);

  // Skinny variants: 0..3 the CUDA-core kernel, k_fp8_mma_first_variant.. the tensor-core one.
  static bool is_mma_variant(int variant) { return variant >= k_fp8_mma_first_variant; }
  // Whether the tensor-core kernel takes the problem: FP8 weights, 1 <= m <= 16, k % 128 == 0, w
  // (base and row stride) 16-byte aligned, BF16 output (x as for quantization: 16-byte aligned).
  bool mma_supports(const GemmOperands& op) const;
  // Enqueues tensor-core variant `variant` (k_fp8_mma_first_variant..) on the activations
  // enqueue_quantize left in `scratch`; false when the launch fails.
  bool enqueue_mma(const GemmOperands& op, int variant, CUdeviceptr scratch, const Stream& stream) const;

  // Whether the CUDA-core kernel takes the problem: FP8 weights, 1 <= m <= 8, k % 16 == 0, x and w
  // (base and row stride) 16-byte aligned, n and k within int, BF16 output.
  static bool skinny_supports(const GemmOperands& op);
  // "flare_fp8_linear_skinny_m<tile>_v<variant>_<blocks|rows>"
  static std::string skinny_entry(int m_tile, int variant, Fp8Scaling scaling);
  // Enqueues CUDA-core variant `variant` (0..3) of a supported problem (bias included); false when
  // the launch fails.
  bool enqueue_skinny(const GemmOperands& op, int variant, const Stream& stream) const;

  // The activation scratch an [m, k] problem needs: e4m3 values [m, k], then f32 scales (blocks_128:
  // [k / 128][m], column-major as cuBLASLt's VEC128 wants them; rows: [m]), 256-byte aligned.
  static std::size_t scratch_bytes(std::int64_t m, std::int64_t k);
  static std::size_t scales_offset(std::int64_t m, std::int64_t k);
  // Quantizes op.x into the scratch at `scratch` (values, then scales in cuBLASLt's layout for
  // op.w_scaling); false when the launch fails.
  bool enqueue_quantize(const GemmOperands& op, CUdeviceptr scratch, const Stream& stream) const;

 private:
  static constexpr int k_n_tiles = int(k_tiles.size());
  // [tile index][variant][scaling]
  std::array<std::array<std::array<CUfunction, 2>, k_fp8_mma_first_variant>, k_n_tiles> skinny_{};
  // [n-tiles - 1][variant - k_fp8_mma_first_variant][scaling]
  std::array<std::array<std::array<CUfunction, 2>, k_fp8_skinny_n_variants - k_fp8_mma_first_variant>, 2> mma_{};
  bool tensor_cores_ = false;
  CUfunction quantize_blocks_ = nullptr, quantize_rows_ = nullptr;
  bool overlap_previous_ = false;
};

}  // namespace flare::helios::cuda
