#include "helios/cuda/attention_decode_plan.h"

#include <algorithm>

#include "common/error.h"

namespace flare::helios::cuda {
namespace {

constexpr int k_min_keys_per_split = 256;  // fewer keys than this per split is all launch overhead

// The copy ring for one iteration: the K and V of 64 keys (16 a warp), whatever the unit size.
int stage_bytes(int head_dim, bool fp8) { return 64 * 2 * head_dim * (fp8 ? 1 : 2); }

// The kernel's static shared memory, over-estimated (s_items of 11 ints, s_ml, s_weight, s_m, s_l
// and s_last; group: columns), so that the ring's choice leaves room for it.
int static_smem_bytes(int group) {
  return k_decode_cta_items * 48 + group * k_max_decode_splits * 12 + 2 * 4 * group * 4 + 64;
}

}  // namespace

int decode_heads_per_cta(int group_size, int head_dim, bool fp8, int max_shared_bytes, int query_tokens) {
  const int most = (head_dim > 128 ? k_max_decode_heads_per_cta_256 : k_max_decode_heads_per_cta) / query_tokens;
  for (int g = std::min(group_size, most); g > 1; --g) {
    const int columns = g * query_tokens;
    const int one_stage = int(decode_dynamic_smem_bytes(head_dim, fp8, columns, 1)) + static_smem_bytes(columns);
    if (group_size % g == 0 && one_stage <= max_shared_bytes) return g;
  }
  return 1;
}

int verify_query_tokens(int max_row_tokens) {
  for (const int q : k_verify_query_tokens) {
    if (max_row_tokens <= q) return q;
  }
  return 0;
}

int decode_splits(std::int64_t n_groups, int n_sms, std::int64_t max_keys) {
  const std::int64_t wanted = (std::int64_t(k_decode_items_per_sm) * n_sms + n_groups - 1) / n_groups;
  const std::int64_t useful = (max_keys + k_min_keys_per_split - 1) / k_min_keys_per_split;
  return int(std::clamp<std::int64_t>(std::min(wanted, useful), 1, k_max_decode_splits));
}

bool decode_columns_fit(int head_dim, bool fp8, int columns, int max_shared_bytes) {
  return int(decode_dynamic_smem_bytes(head_dim, fp8, columns, 1)) + static_smem_bytes(columns) <= max_shared_bytes;
}

unsigned decode_dynamic_smem_bytes(int head_dim, bool fp8, int group, int stages) {
  return unsigned(stages * stage_bytes(head_dim, fp8) + 4 * group * (head_dim + 4) * 4);
}

// Measured on an H200 with the kernel's CTAs each working through several items:
//   - 2 at head dim 128, BF16 (Llama-3.1-8B shape) and FP8: two CTAs an SM for BF16 (64 KiB of
//     ring each), four for FP8 (by registers). At 64 rows x 1k (the batch-64 step's attention),
//     BF16 took 0.069 ms against 0.075 with 3 stages (two CTAs an SM) and 0.077 with 4 (one), and
//     32 x 8k 0.251 ms against 0.271 and 0.263; eight warps a CTA instead of four (one CTA an SM)
//     took 0.072 and 0.251 ms with 2 stages, 0.081 and 0.279 with 3.
//   - 3 at head dim 64 (Llama-3.2-1B shape; measured before CTAs took several items): four (64 KiB,
//     three CTAs an SM) took 32 x 8k from 0.166 to 0.213 ms and the batch-64 step from 1.71 to 1.93 ms.
//   - 2 at head dim 256 (Gemma 3; not measured yet): a BF16 stage is 64 KiB, so one CTA an SM (three
//     stages would fit up to 6 heads a CTA, untried), FP8 (32 KiB a stage) two.
// Fewer where the device's shared memory per CTA (99 KiB on sm_86, sm_89 and sm_120) cannot hold
// them, down to one (copies then wait for the previous iteration's compute): 16 heads a CTA at head
// dim 128 there.
int decode_ring_stages(int head_dim, bool fp8, int group, int max_shared_bytes) {
  const auto bytes = [&](int stages) {
    return int(decode_dynamic_smem_bytes(head_dim, fp8, group, stages)) + static_smem_bytes(group);
  };
  for (int stages = head_dim == 64 && !fp8 ? 3 : 2; stages >= 1; --stages) {
    if (bytes(stages) <= max_shared_bytes) return stages;
  }
  fail_usage("decode attention of {} query heads a CTA at head size {} needs {} bytes of shared memory; this GPU "
             "gives a CTA {}", group, head_dim, bytes(1), max_shared_bytes);
}

std::int64_t decode_grid(std::int64_t n_items, int resident_per_sm, int n_sms) {
  const std::int64_t resident = std::int64_t(std::max(resident_per_sm, 1)) * std::max(n_sms, 1);
  const std::int64_t for_tables = (n_items + k_decode_cta_items - 1) / k_decode_cta_items;
  return std::min(n_items, std::max(resident, for_tables));
}

}  // namespace flare::helios::cuda
