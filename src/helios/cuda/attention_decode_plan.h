// How a decode or verify step's attention launches (attention_decode.cu): query heads per work item,
// query tokens a row (QTOK: verify rows), splits of each row's keys, the copy ring's depth and the
// kernel's shared memory, and the grid. Pure
// functions of shapes and device limits, never of positions, so a captured decode step replays for
// any lengths; kept apart from the launch so they are testable without a GPU.
#pragma once

#include <cstdint>

namespace flare::helios::cuda {

inline constexpr int k_max_decode_splits = 64;        // k_max_splits of attention_decode.cu
// The most mma columns (heads x query tokens, k_cols of attention_decode.cu) an item takes.
inline constexpr int k_max_decode_heads_per_cta = 16;  // two mma n-tiles
inline constexpr int k_max_decode_heads_per_cta_256 = 8;  // at head dim 256 (one n-tile: registers)
inline constexpr int k_decode_cta_items = 128;        // k_max_cta_items of attention_decode.cu
// Query tokens a verify row may compute in the decode kernel (QTOK); longer rows take the prefill one.
inline constexpr int k_max_verify_query_tokens = 8;
// The QTOK values modules are built for: a step's longest row rounds up to one of them.
inline constexpr int k_verify_query_tokens[] = {2, 4, 8};
// The splits aim at this many work items per SM. More only add partials to merge and pipeline
// ramps (H200, Llama-3.1-8B shape: 2 against 8 took the batch-64 step at context 1024 from 7.58
// to 7.00 ms and batch 1 from 4.28 to 4.22 ms, with 32 x 8k attention unchanged).
inline constexpr int k_decode_items_per_sm = 2;

// Query heads per work item: the largest divisor of the GQA group whose columns (heads x
// `query_tokens`) fit the kernel's registers (16 columns, 8 at head dim 256) and whose accumulators
// and one ring stage fit a CTA's `max_shared_bytes` (binding only at head dim 256 on the 99 KiB
// devices: 4 heads there); 1 when none does (decode_ring_stages then says why).
int decode_heads_per_cta(int group_size, int head_dim, bool fp8, int max_shared_bytes, int query_tokens = 1);

// The QTOK module for a step whose longest row computes `max_row_tokens` (>= 2) tokens: the
// smallest of k_verify_query_tokens that holds it; 0 past k_max_verify_query_tokens (prefill kernel).
int verify_query_tokens(int max_row_tokens);

// Splits per (row, head group): enough items to fill the GPU, no more than the longest possible
// context (the cache's capacity or the window) can feed.
int decode_splits(std::int64_t n_groups, int n_sms, std::int64_t max_keys);

// The kernel's dynamic shared memory (k_smem_bytes of attention_decode.cu; the kernel traps on
// less): the copy ring of `stages` iterations, then the four warps' accumulators of `group`
// columns (heads x query tokens; here and in decode_ring_stages).
unsigned decode_dynamic_smem_bytes(int head_dim, bool fp8, int group, int stages);

// Whether an item of `columns` (heads x query tokens) fits a CTA's shared memory with one ring stage.
bool decode_columns_fit(int head_dim, bool fp8, int columns, int max_shared_bytes);

// Iterations in the copy ring (KV_STAGES) for a device that gives a CTA `max_shared_bytes` of shared
// memory. Throws flare::Error (usage) where even one does not fit.
int decode_ring_stages(int head_dim, bool fp8, int group, int max_shared_bytes);

// CTAs to launch for `n_items` work items: as many as are resident at once (`resident_per_sm` an SM),
// each working through its share, and more where the CTAs' item tables would overflow.
std::int64_t decode_grid(std::int64_t n_items, int resident_per_sm, int n_sms);

}  // namespace flare::helios::cuda
