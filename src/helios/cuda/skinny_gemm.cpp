// Loading and launching the skinny GEMM's entry points (see skinny_gemm.h).
#include "helios/cuda/skinny_gemm.h"

#include <bit>
#include <climits>

#include <fmt/format.h>

#include "helios/cuda/gemm_runner.h"

namespace flare::helios::cuda {
namespace {

constexpr unsigned k_threads = 128;  // kernels/skinny_gemm.cu: k_skinny_threads
// Weight rows each block of a variant owns: (4 warps / KW) x R, from the variant table in
// kernels/skinny_gemm.cu (v0 KW 4 R 1, v1 KW 4 R 2, v2 KW 1 R 1, v3 KW 1 R 2).
constexpr std::array<std::int64_t, k_skinny_gemm_n_variants> k_rows_per_block = {1, 2, 4, 8};

bool aligned_16(CUdeviceptr address, std::int64_t stride_elements) {
  return address % 16 == 0 && stride_elements % 8 == 0;  // bf16 rows: 8 elements = 16 bytes
}

int tile_index(int tile) { return std::countr_zero(unsigned(tile)); }  // 1, 2, 4, 8, 16 -> 0..4

}  // namespace

SkinnyGemm::SkinnyGemm(const Loader& load, bool overlap_previous) : overlap_previous_(overlap_previous) {
  for (int t = 0; t < k_n_tiles; ++t) {
    for (int v = 0; v < k_skinny_gemm_n_variants; ++v) {
      functions_[t][v][0] = load(entry_name(1 << t, v, DType::bf16), 1 << t);
      functions_[t][v][1] = load(entry_name(1 << t, v, DType::f32), 1 << t);
    }
  }
}

bool SkinnyGemm::supports(const GemmOperands& op) {
  return op.m >= 1 && op.m <= k_skinny_gemm_max_m && op.n >= 1 && op.n <= INT_MAX && op.k >= 1 && op.k <= INT_MAX &&
         op.k % k_skinny_gemm_k_multiple == 0 && aligned_16(op.x, op.x_stride) && aligned_16(op.w, op.w_stride) &&
         (op.out_dtype == DType::bf16 || op.out_dtype == DType::f32);
}

int SkinnyGemm::m_tile(std::int64_t m) { return int(std::bit_ceil(std::uint64_t(m))); }

std::string SkinnyGemm::entry_name(int m_tile, int variant, DType out) {
  return fmt::format("flare_skinny_gemm_m{}_v{}_{}", m_tile, variant, out == DType::f32 ? "f32" : "bf16");
}

bool SkinnyGemm::enqueue(const GemmOperands& op, int variant, const Stream& stream) const {
  if (variant < 0 || variant >= k_skinny_gemm_n_variants || !supports(op)) return false;
  const std::int64_t rows = k_rows_per_block[std::size_t(variant)];
  const CUfunction f = functions_[std::size_t(tile_index(m_tile(op.m)))][std::size_t(variant)]
                                 [op.out_dtype == DType::f32 ? 1 : 0];
  CUdeviceptr x = op.x, w = op.w, bias = op.bias, out = op.out;
  long long x_stride = op.x_stride, w_stride = op.w_stride, out_stride = op.out_stride;
  int m = int(op.m), n = int(op.n), k = int(op.k);
  void* args[] = {&x, &x_stride, &w, &w_stride, &bias, &out, &out_stride, &m, &n, &k};
  const unsigned grid = unsigned((op.n + rows - 1) / rows);
  const LaunchShape shape{.grid_x = grid, .block_x = unsigned(k_threads), .overlap_previous = overlap_previous_};
  return try_launch(f, shape, stream.handle(), args) == CUDA_SUCCESS;
}

}  // namespace flare::helios::cuda
