// The CUDA backend's mixture of experts (see backend.h, router_topk and moe_experts):
//   - router_topk: kernels/moe_router.cu, a warp per token;
//   - moe_experts: kernels/moe_experts.cu: an align kernel groups the (token, slot) pairs by expert
//     into tiles in a device workspace, then gate_up (with the activation in its epilogue) and down
//     run as grouped products over those tiles, and a combine kernel sums each token's slots.
//     Up to options_.moe_gemv_max_pairs pairs (by default max(64, 2 n_experts): decode and small
//     batches, a tile or two per expert) the products are warp-per-column GEMVs over tiles of 8 rows, bound by streaming each chosen expert's weights once; above, tensor-core GEMMs
//     over tiles of 64 rows.
// Every grid depends only on n_tokens, top_k, n_experts and the weight shapes: the product grids
// have the worst-case tile count and the CTAs past the step's tiles return, so a captured step
// replays for any routing. The workspace is the backend's (moe_workspace_), sized outside
// captures; growing it bumps graph_generation_.
#include <algorithm>

#include "common/error.h"
#include "helios/cuda/cuda_backend.h"
#include "helios/cuda/tensor_checks.h"

namespace flare::helios::cuda {
namespace {

constexpr std::int64_t k_moe_gemv_rows = 8;    // k_gemv_rows of moe_experts.cu
constexpr std::int64_t k_moe_mma_rows = 64;    // k_mma_m
constexpr std::int64_t k_moe_mma_gate_cols = 64, k_moe_mma_down_cols = 128;
constexpr std::int64_t k_moe_gemv_gate_cols = 8, k_moe_gemv_down_cols = 16;
constexpr unsigned k_moe_align_threads = 1024, k_moe_mma_threads = 128, k_moe_gemv_threads = 256;
constexpr unsigned k_moe_combine_threads = 128;
constexpr unsigned k_router_tokens_per_block = 4;
// The align kernel keeps two ints per expert in shared memory.
constexpr std::int64_t k_moe_max_experts = 4096;
// The workspace is first sized for this many tokens (or the step capacity, if larger), so that
// graphs captured after the first call do not see it move.
constexpr std::int64_t k_moe_workspace_tokens = 1024;

unsigned ceil_div(std::int64_t n, std::int64_t d) { return unsigned((n + d - 1) / d); }

// Worst-case tile count for `pairs` pairs over `n_experts` experts in tiles of `tile_rows`: every
// expert with a pair adds at most one partial tile.
std::int64_t max_tiles(std::int64_t pairs, std::int64_t n_experts, std::int64_t tile_rows) {
  return (pairs + tile_rows - 1) / tile_rows + std::min(n_experts, pairs);
}

// Workspace layout, in int32: [4: n_tiles, padding] [3 * max tiles: tiles] [pairs: sorted_pairs]
// [pairs: pair_pos]. The GEMV tiles (8 rows) are the most numerous.
struct MoeWorkspaceLayout {
  std::int64_t tiles = 0, sorted_pairs = 0, pair_pos = 0, n_ints = 0;
  static MoeWorkspaceLayout of(std::int64_t pairs, std::int64_t n_experts) {
    MoeWorkspaceLayout l;
    l.tiles = 0;
    l.sorted_pairs = (4 + 3 * max_tiles(pairs, n_experts, k_moe_gemv_rows) + 3) / 4 * 4;
    l.pair_pos = l.sorted_pairs + (pairs + 3) / 4 * 4;
    l.n_ints = l.pair_pos + (pairs + 3) / 4 * 4;
    return l;
  }
};

bool aligned_16(const void* p) { return reinterpret_cast<std::uintptr_t>(p) % 16 == 0; }

// Rows of bf16 read or written in 16-byte chunks.
void expect_chunked(const Tensor& t, const char* what) {
  if (t.stride % 8 != 0 || !aligned_16(t.data) || (t.n_batch > 1 && t.batch_stride % 8 != 0)) {
    fail(ExitCode::failure, "internal: cuda {} needs 16-byte aligned rows (stride {})", what, t.stride);
  }
}

}  // namespace

void CudaBackend::router_topk(const Tensor& logits, const RouterParams& params, Tensor ids, Tensor weights) {
  const std::int64_t n = logits.rows, n_experts = logits.cols, k = params.top_k;
  expect_dtype(logits, DType::f32, "router logits");
  expect_dtype(ids, DType::i32, "router ids");
  expect_dtype(weights, DType::f32, "router weights");
  if (k < 1 || k > n_experts || k > 32) {
    fail(ExitCode::failure, "internal: cuda router top {} of {} experts (at most 32)", k, n_experts);
  }
  expect_shape(ids, n, k, "router ids");
  expect_shape(weights, n, k, "router weights");
  if (n == 0) return;
  CUdeviceptr l_ptr = address(logits), ids_ptr = address(ids), w_ptr = address(weights);
  long long l_stride = logits.stride, ids_stride = ids.stride, w_stride = weights.stride;
  int n_tokens = int(n), experts = int(n_experts), top_k = int(k), renormalize = params.renormalize ? 1 : 0;
  launch(function("moe_router", "flare_moe_router"),
         {.grid_x = ceil_div(n, k_router_tokens_per_block), .block_x = 32 * k_router_tokens_per_block},
         {&l_ptr, &l_stride, &n_tokens, &experts, &top_k, &renormalize, &ids_ptr, &ids_stride, &w_ptr, &w_stride},
         "moe_router");
}

void CudaBackend::reserve_moe_workspace(std::int64_t n_tokens, std::int64_t top_k, std::int64_t n_experts) {
  const std::size_t needed = std::size_t(MoeWorkspaceLayout::of(n_tokens * top_k, n_experts).n_ints) * 4;
  if (moe_workspace_ && moe_workspace_->size_bytes() >= needed) return;
  if (stream_.capturing()) {
    fail(ExitCode::failure, "internal: cuda moe_experts workspace for {} tokens x {} slots first sized in a graph "
         "capture (run the step once before capturing it)", n_tokens, top_k);
  }
  const std::int64_t tokens = std::max({n_tokens, step_capacity_tokens_, k_moe_workspace_tokens});
  const std::size_t size =
      std::max(needed, std::size_t(MoeWorkspaceLayout::of(tokens * top_k, std::max<std::int64_t>(n_experts, 256)).n_ints) * 4);
  stream_.synchronize();  // queued kernels may still use the old buffer
  moe_workspace_.reset();
  moe_workspace_ = std::make_unique<DeviceMemory>(size);
  ++graph_generation_;
}

void CudaBackend::moe_experts(const Tensor& x, const Tensor& ids, const Tensor& weights, const MoeExperts& experts,
                              const MoeScratch& scratch, Tensor out) {
  const std::int64_t n = x.rows, k = ids.cols, hidden = x.cols, n_experts = experts.gate_up.n_batch;
  const std::int64_t inter = experts.down.cols, pairs = n * k;
  // gpt-oss's experts (MXFP4, biases, the clamped SwiGLU) run on the CPU backend only so far.
  if (experts.gate_up_quant.format != QuantizedWeight::Format::none || !experts.gate_up_bias.empty() ||
      !experts.down_bias.empty() || experts.activation == GatedActivation::clamped_silu) {
    fail_usage("the CUDA backend does not run MXFP4 experts, expert biases or the clamped SwiGLU yet (gpt-oss); "
               "serve this model on the CPU backend");
  }
  expect_bf16(x, "moe input");
  expect_dtype(ids, DType::i32, "moe ids");
  expect_dtype(weights, DType::f32, "moe weights");
  expect_bf16(out, "moe output");
  expect_bf16(experts.gate_up, "moe gate_up experts");
  expect_bf16(experts.down, "moe down experts");
  expect_bf16(scratch.act, "moe act scratch");
  expect_bf16(scratch.expert_out, "moe expert_out scratch");
  expect_shape(ids, n, k, "moe ids");
  expect_shape(weights, n, k, "moe weights");
  expect_shape(out, n, hidden, "moe output");
  if (experts.down.n_batch != n_experts || experts.gate_up.rows != 2 * inter || experts.gate_up.cols != hidden ||
      experts.down.rows != hidden || n_experts < 1 || n_experts > k_moe_max_experts) {
    fail(ExitCode::failure, "internal: cuda moe experts [{}][{}, {}] and [{}][{}, {}] for hidden {}",
         experts.gate_up.n_batch, experts.gate_up.rows, experts.gate_up.cols, experts.down.n_batch, experts.down.rows,
         experts.down.cols, hidden);
  }
  expect_shape(scratch.act, pairs, inter, "moe act scratch");
  expect_shape(scratch.expert_out, pairs, hidden, "moe expert_out scratch");
  if (hidden % 8 != 0 || inter % 8 != 0) {
    fail_usage("the CUDA backend's experts need hidden and intermediate sizes that are multiples of 8, not {} and {}",
               hidden, inter);
  }
  expect_chunked(x, "moe input");
  expect_chunked(out, "moe output");
  expect_chunked(experts.gate_up, "moe gate_up experts");
  expect_chunked(experts.down, "moe down experts");
  expect_chunked(scratch.act, "moe act scratch");
  expect_chunked(scratch.expert_out, "moe expert_out scratch");
  if (n == 0 || k == 0) return;

  const std::int64_t gemv_max_pairs = options_.moe_gemv_max_pairs >= 0 ? options_.moe_gemv_max_pairs
                                                                       : std::max<std::int64_t>(64, 2 * n_experts);
  const bool gemv = pairs <= gemv_max_pairs;
  const std::int64_t tile_rows = gemv ? k_moe_gemv_rows : k_moe_mma_rows;
  const std::int64_t n_tiles = max_tiles(pairs, n_experts, tile_rows);
  if (n_tiles > 65535) fail(ExitCode::failure, "internal: cuda moe_experts of {} pairs: {} tiles", pairs, n_tiles);
  reserve_moe_workspace(n, k, n_experts);
  const MoeWorkspaceLayout layout = MoeWorkspaceLayout::of(pairs, n_experts);
  const CUdeviceptr ws = moe_workspace_->address();
  CUdeviceptr tiles_ptr = ws + std::size_t(layout.tiles) * 4, sorted_ptr = ws + std::size_t(layout.sorted_pairs) * 4,
              pos_ptr = ws + std::size_t(layout.pair_pos) * 4;

  {
    CUdeviceptr ids_ptr = address(ids);
    long long ids_stride = ids.stride;
    int n_tokens = int(n), top_k = int(k), experts_i = int(n_experts), rows = int(tile_rows);
    launch(function("moe_experts", "flare_moe_experts_align"),
           {.grid_x = 1, .block_x = k_moe_align_threads, .shared_bytes = unsigned(2 * n_experts * 4)},
           {&ids_ptr, &ids_stride, &n_tokens, &top_k, &experts_i, &rows, &tiles_ptr, &sorted_ptr, &pos_ptr},
           "moe_align");
  }
  {
    CUdeviceptr x_ptr = address(x), w_ptr = address(experts.gate_up), act_ptr = address(scratch.act);
    long long x_stride = x.stride, w_stride = experts.gate_up.stride, act_stride = scratch.act.stride;
    long long w_expert_stride = experts.gate_up.batch_stride;
    int top_k = int(k), inter_i = int(inter), hidden_i = int(hidden);
    int activation = experts.activation == GatedActivation::gelu_tanh ? 1 : 0;
    const LaunchShape shape =
        gemv ? LaunchShape{.grid_x = ceil_div(inter, k_moe_gemv_gate_cols), .grid_y = unsigned(n_tiles),
                           .block_x = k_moe_gemv_threads}
             : LaunchShape{.grid_x = ceil_div(inter, k_moe_mma_gate_cols), .grid_y = unsigned(n_tiles),
                           .block_x = k_moe_mma_threads};
    launch(function("moe_experts", gemv ? "flare_moe_experts_gemv_gate_up" : "flare_moe_experts_mma_gate_up"), shape,
           {&x_ptr, &x_stride, &sorted_ptr, &top_k, &tiles_ptr, &w_ptr, &w_stride, &w_expert_stride, &inter_i,
            &hidden_i, &act_ptr, &act_stride, &activation},
           "moe_gate_up");
  }
  {
    CUdeviceptr act_ptr = address(scratch.act), w_ptr = address(experts.down), eo_ptr = address(scratch.expert_out);
    long long act_stride = scratch.act.stride, w_stride = experts.down.stride, eo_stride = scratch.expert_out.stride;
    long long w_expert_stride = experts.down.batch_stride;
    int hidden_i = int(hidden), inter_i = int(inter);
    const LaunchShape shape =
        gemv ? LaunchShape{.grid_x = ceil_div(hidden, k_moe_gemv_down_cols), .grid_y = unsigned(n_tiles),
                           .block_x = k_moe_gemv_threads}
             : LaunchShape{.grid_x = ceil_div(hidden, k_moe_mma_down_cols), .grid_y = unsigned(n_tiles),
                           .block_x = k_moe_mma_threads};
    launch(function("moe_experts", gemv ? "flare_moe_experts_gemv_down" : "flare_moe_experts_mma_down"), shape,
           {&act_ptr, &act_stride, &tiles_ptr, &w_ptr, &w_stride, &w_expert_stride, &hidden_i, &inter_i, &eo_ptr,
            &eo_stride},
           "moe_down");
  }
  {
    CUdeviceptr eo_ptr = address(scratch.expert_out), w_ptr = address(weights), out_ptr = address(out);
    long long eo_stride = scratch.expert_out.stride, w_stride = weights.stride, out_stride = out.stride;
    int top_k = int(k), hidden_i = int(hidden);
    launch(function("moe_experts", "flare_moe_experts_combine"),
           {.grid_x = unsigned(n), .grid_y = ceil_div(hidden / 8, k_moe_combine_threads),
            .block_x = k_moe_combine_threads},
           {&eo_ptr, &eo_stride, &pos_ptr, &w_ptr, &w_stride, &top_k, &hidden_i, &out_ptr, &out_stride}, "moe_combine");
  }
}

}  // namespace flare::helios::cuda
