// The decode attention's launch plan without a GPU: heads per work item, splits, the copy ring's
// depth against each architecture's shared memory per CTA, and the persistent grid.
#ifdef FLARE_HAVE_CUDA

#include <gtest/gtest.h>

#include "common/error.h"
#include "helios/cuda/attention_decode_plan.h"

namespace flare::helios::cuda {
namespace {

// Shared memory a CTA may opt into (CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN).
constexpr int k_sm80_bytes = 166912, k_sm89_bytes = 101376, k_sm90_bytes = 232448;

TEST(AttentionDecodePlan, HeadsPerItemDivideTheGroupUpToSixteen) {
  for (const int bytes : {k_sm80_bytes, k_sm89_bytes, k_sm90_bytes}) {  // no limit at head dims 64 and 128
    for (const int head_dim : {64, 128}) {
      for (const bool fp8 : {false, true}) {
        EXPECT_EQ(decode_heads_per_cta(1, head_dim, fp8, bytes), 1);
        EXPECT_EQ(decode_heads_per_cta(4, head_dim, fp8, bytes), 4);
        EXPECT_EQ(decode_heads_per_cta(7, head_dim, fp8, bytes), 7);
        EXPECT_EQ(decode_heads_per_cta(16, head_dim, fp8, bytes), 16);
        EXPECT_EQ(decode_heads_per_cta(32, head_dim, fp8, bytes), 16);
        EXPECT_EQ(decode_heads_per_cta(24, head_dim, fp8, bytes), 12);
        EXPECT_EQ(decode_heads_per_cta(17, head_dim, fp8, bytes), 1) << "a prime group above 16 takes one head an item";
      }
    }
  }
}

TEST(AttentionDecodePlan, HeadDim256TakesUpToEightHeadsThatFitSharedMemory) {
  // Gemma 3's groups: 2 (4B, 12B, 27B) and 4 (1B); 8 and 16 for wider GQA.
  for (const bool fp8 : {false, true}) {
    EXPECT_EQ(decode_heads_per_cta(2, 256, fp8, k_sm90_bytes), 2);
    EXPECT_EQ(decode_heads_per_cta(4, 256, fp8, k_sm90_bytes), 4);
    EXPECT_EQ(decode_heads_per_cta(8, 256, fp8, k_sm90_bytes), 8);
    EXPECT_EQ(decode_heads_per_cta(16, 256, fp8, k_sm90_bytes), 8) << "one mma n-tile of heads at head dim 256";
    EXPECT_EQ(decode_heads_per_cta(12, 256, fp8, k_sm90_bytes), 6);
    EXPECT_EQ(decode_heads_per_cta(8, 256, fp8, k_sm80_bytes), 8);
  }
  // 99 KiB: a BF16 stage (64 KiB) and the accumulators of 8 heads (33 KiB) do not fit together.
  EXPECT_EQ(decode_heads_per_cta(8, 256, false, k_sm89_bytes), 4);
  EXPECT_EQ(decode_heads_per_cta(2, 256, false, k_sm89_bytes), 2);
  EXPECT_EQ(decode_heads_per_cta(8, 256, true, k_sm89_bytes), 8);
  for (const int bytes : {k_sm80_bytes, k_sm89_bytes, k_sm90_bytes}) {
    for (const bool fp8 : {false, true}) {
      for (const int group_size : {1, 2, 4, 8, 16, 32}) {
        const int group = decode_heads_per_cta(group_size, 256, fp8, bytes);
        EXPECT_LE(group, k_max_decode_heads_per_cta_256);
        EXPECT_EQ(group_size % group, 0);
        EXPECT_GE(decode_ring_stages(256, fp8, group, bytes), 1) << group_size << " fp8 " << fp8 << " on " << bytes;
      }
    }
  }
}

// Verify rows: heads x query tokens fill at most 16 columns (8 at head dim 256), dividing the group.
TEST(AttentionDecodePlan, VerifyItemsFoldQueryTokensIntoTheColumns) {
  EXPECT_EQ(verify_query_tokens(2), 2);
  EXPECT_EQ(verify_query_tokens(3), 4);
  EXPECT_EQ(verify_query_tokens(4), 4);
  EXPECT_EQ(verify_query_tokens(5), 8);
  EXPECT_EQ(verify_query_tokens(8), 8);
  EXPECT_EQ(verify_query_tokens(9), 0) << "longer rows take the prefill kernel";
  EXPECT_EQ(decode_heads_per_cta(4, 128, false, k_sm90_bytes, 2), 4);
  EXPECT_EQ(decode_heads_per_cta(4, 128, false, k_sm90_bytes, 4), 4);
  EXPECT_EQ(decode_heads_per_cta(4, 128, false, k_sm90_bytes, 8), 2);
  EXPECT_EQ(decode_heads_per_cta(8, 128, true, k_sm90_bytes, 8), 2);
  EXPECT_EQ(decode_heads_per_cta(1, 128, false, k_sm90_bytes, 8), 1);
  EXPECT_EQ(decode_heads_per_cta(6, 64, false, k_sm90_bytes, 4), 3);
  EXPECT_EQ(decode_heads_per_cta(2, 256, false, k_sm90_bytes, 4), 2);
  EXPECT_EQ(decode_heads_per_cta(2, 256, false, k_sm90_bytes, 8), 1);
  for (const int q : k_verify_query_tokens) {
    for (const int group : {1, 2, 4, 7, 8, 16}) {
      for (const int head_dim : {64, 128, 256}) {
        const int heads = decode_heads_per_cta(group, head_dim, false, k_sm90_bytes, q);
        EXPECT_EQ(group % heads, 0);
        EXPECT_LE(heads * q, head_dim == 256 ? 8 : 16) << group << " x " << q << " at " << head_dim;
        EXPECT_TRUE(decode_columns_fit(head_dim, false, heads * q, k_sm90_bytes));
      }
    }
  }
  EXPECT_FALSE(decode_columns_fit(256, false, 8, k_sm89_bytes));
  EXPECT_TRUE(decode_columns_fit(256, false, 4, k_sm89_bytes));
}

TEST(AttentionDecodePlan, SplitsFillTheGpuOnlyWhereKeysCanFeedThem) {
  // Llama-3.1-8B shape on 132 SMs: batch 1 has 8 (row, kv head) pairs, batch 64 has 512.
  EXPECT_EQ(decode_splits(8, 132, 131072), 33);
  EXPECT_EQ(decode_splits(512, 132, 131072), 1);
  EXPECT_EQ(decode_splits(8, 132, 1000), 4) << "a cache of 1000 tokens feeds 4 splits of 256";
  EXPECT_EQ(decode_splits(1, 132, 1 << 30), k_max_decode_splits);
  EXPECT_EQ(decode_splits(1, 132, 1), 1);
}

TEST(AttentionDecodePlan, RingFitsEachArchitecturesSharedMemory) {
  for (const int bytes : {k_sm80_bytes, k_sm89_bytes, k_sm90_bytes}) {
    for (const bool fp8 : {false, true}) {
      for (const int head_dim : {64, 128, 256}) {
        for (const int group : {1, 4, 8, 16}) {
          if (decode_heads_per_cta(group, head_dim, fp8, bytes) != group) continue;  // never asked for
          const int stages = decode_ring_stages(head_dim, fp8, group, bytes);
          EXPECT_GE(stages, 1);
          EXPECT_LE(stages, 3);
          // The kernel's static shared memory as ptxas reports it: 8,848 bytes at 4 columns, 18,448 at 16.
          const int static_bytes = 5632 + group * 800 + 128;
          EXPECT_LE(int(decode_dynamic_smem_bytes(head_dim, fp8, group, stages)) + static_bytes, bytes)
              << "head dim " << head_dim << " group " << group << " fp8 " << fp8 << " on " << bytes << " bytes";
        }
      }
    }
  }
  // The measured choices on sm_90, and the fallbacks of the 99 KiB devices.
  EXPECT_EQ(decode_ring_stages(128, false, 4, k_sm90_bytes), 2);
  EXPECT_EQ(decode_ring_stages(128, true, 4, k_sm90_bytes), 2);
  EXPECT_EQ(decode_ring_stages(64, false, 4, k_sm90_bytes), 3);
  EXPECT_EQ(decode_ring_stages(128, false, 4, k_sm89_bytes), 2);
  EXPECT_EQ(decode_ring_stages(128, false, 16, k_sm89_bytes), 1);
  // Head dim 256: two stages on sm_90 (BF16 128 KiB of ring, one CTA an SM; FP8 64 KiB, two), one
  // where two do not fit.
  EXPECT_EQ(decode_ring_stages(256, false, 8, k_sm90_bytes), 2);
  EXPECT_EQ(decode_ring_stages(256, false, 2, k_sm90_bytes), 2);
  EXPECT_EQ(decode_ring_stages(256, true, 8, k_sm90_bytes), 2);
  EXPECT_EQ(decode_ring_stages(256, false, 8, k_sm80_bytes), 1);
  EXPECT_EQ(decode_ring_stages(256, false, 4, k_sm89_bytes), 1);
  EXPECT_EQ(decode_ring_stages(256, true, 8, k_sm89_bytes), 1);
}

TEST(AttentionDecodePlan, RingThatCannotFitIsAClearError) {
  try {
    decode_ring_stages(128, false, 16, 48 * 1024);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ExitCode::usage);
    EXPECT_NE(std::string(e.what()).find("shared memory"), std::string::npos) << e.what();
  }
}

TEST(AttentionDecodePlan, DynamicSharedMemoryHoldsTheRingThenTheAccumulators) {
  // BF16 head dim 128: 32 KiB a stage; four warps x 4 heads x (128 + 4) floats.
  EXPECT_EQ(decode_dynamic_smem_bytes(128, false, 4, 2), 2u * 32768 + 4 * 4 * 132 * 4);
  EXPECT_EQ(decode_dynamic_smem_bytes(128, true, 4, 2), 2u * 16384 + 4 * 4 * 132 * 4);
  EXPECT_EQ(decode_dynamic_smem_bytes(64, false, 1, 3), 3u * 16384 + 4 * 1 * 68 * 4);
  // Head dim 256: 64 KiB a BF16 stage, 32 KiB an FP8 one; (256 + 4) floats a head.
  EXPECT_EQ(decode_dynamic_smem_bytes(256, false, 8, 2), 2u * 65536 + 4 * 8 * 260 * 4);
  EXPECT_EQ(decode_dynamic_smem_bytes(256, true, 2, 2), 2u * 32768 + 4 * 2 * 260 * 4);
}

TEST(AttentionDecodePlan, GridIsTheResidentCtasUnlessTablesOverflowOrItemsAreFewer) {
  EXPECT_EQ(decode_grid(512, 2, 132), 264) << "batch 64: two items a CTA";
  EXPECT_EQ(decode_grid(100, 2, 132), 100) << "fewer items than resident CTAs: one each";
  EXPECT_EQ(decode_grid(264 * k_decode_cta_items, 2, 132), 264);
  EXPECT_EQ(decode_grid(264 * k_decode_cta_items + 1, 2, 132), 265) << "no CTA takes more than its table holds";
  EXPECT_EQ(decode_grid(1000, 0, 132), 132) << "an occupancy of zero still launches";
  for (const std::int64_t items : {1LL, 77LL, 5000LL, 40000LL, 1000000LL}) {
    const std::int64_t grid = decode_grid(items, 3, 132);
    EXPECT_LE((items + grid - 1) / grid, k_decode_cta_items) << items;
    EXPECT_LE(grid, items);
  }
}

}  // namespace
}  // namespace flare::helios::cuda

#endif  // FLARE_HAVE_CUDA
