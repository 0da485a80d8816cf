// Loading and launching the tensor-core streaming GEMM (see stream_gemm.h).
#include "helios/cuda/stream_gemm.h"

#include <algorithm>
#include <bit>
#include <climits>

#include <fmt/format.h>

#include "helios/cuda/gemm_runner.h"

namespace flare::helios::cuda {
namespace {

// kernels/stream_gemm.cu: 2 consumer warpgroups and a producer warp; 128 weight rows per CTA; k in
// blocks of 64; a ring of about 100 KiB; the same stage arithmetic as k_stream_stages.
constexpr unsigned k_threads = 288;
constexpr std::int64_t k_rows_per_cta = 128;
constexpr std::int64_t k_block_k = 64;

bool aligned_16(CUdeviceptr address, std::int64_t stride_elements) {
  return address % 16 == 0 && stride_elements % 8 == 0;  // bf16 rows: 8 elements = 16 bytes
}

int tile_index(int tile) { return std::countr_zero(unsigned(tile)) - 5; }  // 32, 64, 128 -> 0..2

// A 2-D bf16 tensor map over rows [rows, cols] (row stride `stride` elements) with boxes of
// box_rows x 64 elements, 128-byte swizzled, out-of-bounds elements read as zero.
bool encode(CUtensorMap& map, CUdeviceptr base, std::int64_t rows, std::int64_t cols, std::int64_t stride,
            unsigned box_rows) {
  const cuuint64_t dims[2] = {cuuint64_t(cols), cuuint64_t(rows)};
  const cuuint64_t strides[1] = {cuuint64_t(stride) * 2};
  const cuuint32_t box[2] = {cuuint32_t(k_block_k), box_rows};
  const cuuint32_t element_strides[2] = {1, 1};
  return driver().tensor_map_encode_tiled(&map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, reinterpret_cast<void*>(base),
                                          dims, strides, box, element_strides, CU_TENSOR_MAP_INTERLEAVE_NONE,
                                          CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                                          CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}

// The gate_up weight [2 x inter, k] as [2][inter][k] with boxes of 64 k x 64 rows x both halves:
// a CTA's 64 gate rows and the same 64 up rows, in the layout of a 128-row box of encode().
bool encode_pair(CUtensorMap& map, CUdeviceptr base, std::int64_t inter, std::int64_t cols, std::int64_t stride) {
  const cuuint64_t dims[3] = {cuuint64_t(cols), cuuint64_t(inter), 2};
  const cuuint64_t strides[2] = {cuuint64_t(stride) * 2, cuuint64_t(stride) * 2 * cuuint64_t(inter)};
  const cuuint32_t box[3] = {cuuint32_t(k_block_k), cuuint32_t(k_rows_per_cta / 2), 2};
  const cuuint32_t element_strides[3] = {1, 1, 1};
  return driver().tensor_map_encode_tiled(&map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 3, reinterpret_cast<void*>(base),
                                          dims, strides, box, element_strides, CU_TENSOR_MAP_INTERLEAVE_NONE,
                                          CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                                          CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}

}  // namespace

bool StreamGemm::available(const DeviceInfo& device) {
  return device.compute_major == 9 && device.compute_minor == 0 && driver().tensor_map_encode_tiled != nullptr;
}

StreamGemm::StreamGemm(const Loader& load, bool overlap_previous) : overlap_previous_(overlap_previous) {
  for (std::size_t t = 0; t < k_tiles.size(); ++t) {
    for (int e = 0; e < 3; ++e) {
      const CUfunction f = load(entry_name(k_tiles[t], e == 1 ? DType::f32 : DType::bf16, e == 2), k_tiles[t]);
      check(driver().func_set_attribute(f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, int(shared_bytes(k_tiles[t]))),
            "cuFuncSetAttribute (stream GEMM shared memory)");
      functions_[t][std::size_t(e)] = f;
    }
  }
}

StreamGemm::~StreamGemm() = default;

int StreamGemm::n_tile(std::int64_t m) { return std::max(32, int(std::bit_ceil(std::uint64_t(m)))); }

std::string StreamGemm::entry_name(int n_tile, DType out, bool swiglu) {
  return fmt::format("flare_stream_gemm_n{}_{}", n_tile, swiglu ? "swiglu" : out == DType::f32 ? "f32" : "bf16");
}

unsigned StreamGemm::shared_bytes(int n_tile) {
  const unsigned stage = unsigned(k_rows_per_cta * k_block_k * 2 + n_tile * k_block_k * 2);
  const unsigned stages = 100 * 1024 / stage;
  return stages * stage + 1024 /* alignment to the swizzle period */ + 256 /* barriers */;
}

bool StreamGemm::takes(const GemmOperands& op, int variant) const {
  if (variant < 0 || variant >= k_stream_gemm_n_variants) return false;
  if (op.w_dtype != DType::bf16 || op.m < k_stream_gemm_min_m || op.m > k_stream_gemm_max_m || op.n < 1 ||
      op.n > INT_MAX || op.k < 1 || op.k > INT_MAX || op.k % k_stream_gemm_k_multiple != 0 ||
      !aligned_16(op.x, op.x_stride) || !aligned_16(op.w, op.w_stride) ||
      (op.out_dtype != DType::bf16 && op.out_dtype != DType::f32)) {
    return false;
  }
  const std::int64_t k_blocks = (op.k + k_block_k - 1) / k_block_k;
  return k_stream_gemm_splits[std::size_t(variant)] <= k_blocks;
}

bool StreamGemm::takes_swiglu(const GemmOperands& op, int variant) const {
  return takes(op, variant) && op.out_dtype == DType::bf16 && op.bias == 0 && op.n % 2 == 0;
}

bool StreamGemm::enqueue(const GemmOperands& op, int variant, const Stream& stream) const {
  return takes(op, variant) && launch(op, variant, false, stream);
}

bool StreamGemm::enqueue_swiglu(const GemmOperands& op, int variant, const Stream& stream) const {
  return takes_swiglu(op, variant) && launch(op, variant, true, stream);
}

bool StreamGemm::launch(const GemmOperands& op, int variant, bool swiglu, const Stream& stream) const {
  const int tile = n_tile(op.m);
  CUtensorMap w_map, x_map;
  const bool encoded = swiglu ? encode_pair(w_map, op.w, op.n / 2, op.k, op.w_stride)
                              : encode(w_map, op.w, op.n, op.k, op.w_stride, unsigned(k_rows_per_cta));
  if (!encoded || !encode(x_map, op.x, op.m, op.k, op.x_stride, unsigned(tile))) return false;
  const CUfunction f = functions_[std::size_t(tile_index(tile))][swiglu ? 2 : op.out_dtype == DType::f32 ? 1 : 0];
  CUdeviceptr bias = op.bias, out = op.out;
  long long out_stride = op.out_stride;
  // A SwiGLU CTA makes 64 output columns from 64 gate and 64 up rows.
  const std::int64_t out_cols = swiglu ? op.n / 2 : op.n, cols_per_cta = swiglu ? k_rows_per_cta / 2 : k_rows_per_cta;
  int m = int(op.m), n = int(out_cols), k = int(op.k);
  void* args[] = {&w_map, &x_map, &bias, &out, &out_stride, &m, &n, &k};
  const unsigned splits = k_stream_gemm_splits[std::size_t(variant)];
  const LaunchShape shape{.grid_x = unsigned((out_cols + cols_per_cta - 1) / cols_per_cta),
                          .grid_y = splits,
                          .block_x = k_threads,
                          .shared_bytes = shared_bytes(tile),
                          .cluster_y = splits,
                          .overlap_previous = overlap_previous_};
  return try_launch(f, shape, stream.handle(), args) == CUDA_SUCCESS;
}

}  // namespace flare::helios::cuda
