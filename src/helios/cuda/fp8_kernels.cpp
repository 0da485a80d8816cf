// Loading and launching kernels/fp8_linear.cu (see fp8_kernels.h).
#include "helios/cuda/fp8_kernels.h"

#include <bit>
#include <climits>

#include <fmt/format.h>

#include "helios/cuda/gemm_runner.h"

namespace flare::helios::cuda {
namespace {

constexpr unsigned k_skinny_threads = 128;  // kernels/fp8_linear.cu: k_fp8_skinny_threads
// Weight rows each block of a variant owns, from the variant table in kernels/fp8_linear.cu.
constexpr std::array<std::int64_t, k_fp8_mma_first_variant> k_rows_per_block = {1, 2, 4, 8};
// The tensor-core kernel's rows per block by variant - k_fp8_mma_first_variant: (4 / KW) x 16.
constexpr std::array<std::int64_t, k_fp8_skinny_n_variants - k_fp8_mma_first_variant> k_mma_rows_per_block = {16, 32,
                                                                                                             64, 16};

bool aligned_16(CUdeviceptr address, std::int64_t stride_bytes) { return address % 16 == 0 && stride_bytes % 16 == 0; }

int tile_index(std::int64_t m) { return std::countr_zero(unsigned(std::bit_ceil(std::uint64_t(m)))); }  // 1..8 -> 0..3

std::size_t round_up_256(std::size_t bytes) { return (bytes + 255) / 256 * 256; }

}  // namespace

Fp8Kernels::Fp8Kernels(const Loader& load, bool overlap_previous, bool tensor_cores)
    : tensor_cores_(tensor_cores), overlap_previous_(overlap_previous) {
  for (int nt = 1; nt <= 2; ++nt) {
    for (int v = 0; v < k_fp8_skinny_n_variants - k_fp8_mma_first_variant; ++v) {
      for (const Fp8Scaling s : {Fp8Scaling::blocks_128, Fp8Scaling::rows}) {
        mma_[std::size_t(nt - 1)][std::size_t(v)][std::size_t(s)] =
            load(fmt::format("flare_fp8_linear_mma_m{}_v{}_{}", nt, v, s == Fp8Scaling::rows ? "rows" : "blocks"), nt);
      }
    }
  }
  for (int t = 0; t < k_n_tiles; ++t) {
    for (int v = 0; v < k_fp8_mma_first_variant; ++v) {
      for (const Fp8Scaling s : {Fp8Scaling::blocks_128, Fp8Scaling::rows}) {
        skinny_[std::size_t(t)][std::size_t(v)][std::size_t(s)] = load(skinny_entry(k_tiles[std::size_t(t)], v, s), k_tiles[std::size_t(t)]);
      }
    }
  }
  quantize_blocks_ = load("flare_fp8_linear_quantize_blocks", k_tiles[0]);
  quantize_rows_ = load("flare_fp8_linear_quantize_rows", k_tiles[0]);
}

bool Fp8Kernels::skinny_supports(const GemmOperands& op) {
  return op.w_dtype == DType::f8_e4m3 && op.m >= 1 && op.m <= k_fp8_skinny_max_m && op.n >= 1 && op.n <= INT_MAX &&
         op.k >= 1 && op.k <= INT_MAX && op.k % k_fp8_skinny_k_multiple == 0 && aligned_16(op.x, op.x_stride * 2) &&
         aligned_16(op.w, op.w_stride) && op.out_dtype == DType::bf16;
}

std::string Fp8Kernels::skinny_entry(int m_tile, int variant, Fp8Scaling scaling) {
  return fmt::format("flare_fp8_linear_skinny_m{}_v{}_{}", m_tile, variant, scaling == Fp8Scaling::rows ? "rows" : "blocks");
}

bool Fp8Kernels::mma_supports(const GemmOperands& op) const {
  return tensor_cores_ && op.w_dtype == DType::f8_e4m3 && op.m >= 1 && op.m <= k_fp8_mma_max_m && op.n >= 1 &&
         op.n <= INT_MAX && op.k >= 1 && op.k <= INT_MAX && op.k % k_fp8_mma_k_multiple == 0 &&
         aligned_16(op.x, op.x_stride * 2) && aligned_16(op.w, op.w_stride) && op.out_dtype == DType::bf16;
}

bool Fp8Kernels::enqueue_mma(const GemmOperands& op, int variant, CUdeviceptr scratch, const Stream& stream) const {
  const int v = variant - k_fp8_mma_first_variant;
  if (v < 0 || v >= k_fp8_skinny_n_variants - k_fp8_mma_first_variant || !mma_supports(op)) return false;
  const bool blocks = op.w_scaling == Fp8Scaling::blocks_128;
  const CUfunction f = mma_[op.m <= 8 ? 0 : 1][std::size_t(v)][std::size_t(op.w_scaling)];
  CUdeviceptr xq = scratch, xs = scratch + scales_offset(op.m, op.k), w = op.w, scales = op.w_scales, bias = op.bias,
              out = op.out;
  int scale_cols = blocks ? int(op.k / 128) : 1;
  long long w_stride = op.w_stride, out_stride = op.out_stride;
  int m = int(op.m), n = int(op.n), k = int(op.k);
  void* args[] = {&xq, &xs, &w, &w_stride, &scales, &scale_cols, &bias, &out, &out_stride, &m, &n, &k};
  const std::int64_t rows = k_mma_rows_per_block[std::size_t(v)];
  const LaunchShape shape{.grid_x = unsigned((op.n + rows - 1) / rows), .block_x = k_skinny_threads,
                          .overlap_previous = overlap_previous_};
  return try_launch(f, shape, stream.handle(), args) == CUDA_SUCCESS;
}

bool Fp8Kernels::enqueue_skinny(const GemmOperands& op, int variant, const Stream& stream) const {
  if (variant < 0 || variant >= k_fp8_mma_first_variant || !skinny_supports(op)) return false;
  const CUfunction f = skinny_[std::size_t(tile_index(op.m))][std::size_t(variant)][std::size_t(op.w_scaling)];
  const bool blocks = op.w_scaling == Fp8Scaling::blocks_128;
  CUdeviceptr x = op.x, w = op.w, scales = op.w_scales, bias = op.bias, out = op.out;
  long long x_stride = op.x_stride, w_stride = op.w_stride, out_stride = op.out_stride;
  int scale_cols = blocks ? int(op.k / 128) : 1, row_shift = blocks ? 7 : 0, col_shift = blocks ? 7 : 31;
  int m = int(op.m), n = int(op.n), k = int(op.k);
  void* args[] = {&x, &x_stride, &w, &w_stride, &scales, &scale_cols, &row_shift, &col_shift, &bias, &out, &out_stride,
                  &m, &n, &k};
  const std::int64_t rows = k_rows_per_block[std::size_t(variant)];
  const LaunchShape shape{.grid_x = unsigned((op.n + rows - 1) / rows), .block_x = k_skinny_threads,
                          .overlap_previous = overlap_previous_};
  return try_launch(f, shape, stream.handle(), args) == CUDA_SUCCESS;
}

std::size_t Fp8Kernels::scales_offset(std::int64_t m, std::int64_t k) { return round_up_256(std::size_t(m * k)); }

std::size_t Fp8Kernels::scratch_bytes(std::int64_t m, std::int64_t k) {
  // blocks_128 needs k / 128 scales per row, rows one: the larger for any k.
  const std::int64_t scales_per_row = std::max<std::int64_t>(k / 128, 1);
  return scales_offset(m, k) + round_up_256(std::size_t(m * scales_per_row) * sizeof(float));
}

bool Fp8Kernels::enqueue_quantize(const GemmOperands& op, CUdeviceptr scratch, const Stream& stream) const {
  CUdeviceptr x = op.x, q = scratch, scales = scratch + scales_offset(op.m, op.k);
  long long x_stride = op.x_stride;
  int m = int(op.m), k = int(op.k);
  void* args[] = {&x, &x_stride, &q, &scales, &m, &k};
  if (op.w_scaling == Fp8Scaling::blocks_128) {
    const LaunchShape shape{.grid_x = unsigned(op.m), .grid_y = unsigned((op.k / 128 + 7) / 8), .block_x = 256,
                            .overlap_previous = overlap_previous_};
    return try_launch(quantize_blocks_, shape, stream.handle(), args) == CUDA_SUCCESS;
  }
  const LaunchShape shape{.grid_x = unsigned(op.m), .block_x = 256, .overlap_previous = overlap_previous_};
  return try_launch(quantize_rows_, shape, stream.handle(), args) == CUDA_SUCCESS;
}

}  // namespace flare::helios::cuda
