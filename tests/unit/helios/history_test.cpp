// Per-layer history specs (history.h): grouping (full layers first, sliding layers apart), bytes
// per token and per window pool, and the caches a model's layers get.
#include <gtest/gtest.h>

#include "common/error.h"
#include "helios/history.h"

namespace flare::helios {
namespace {

TEST(History, SlidingLayersFormAGroupAfterTheGlobalOnes) {
  // Gemma 3's pattern: five sliding layers, then a global one.
  std::vector<HistorySpec> layers;
  for (int i = 0; i < 6; ++i) layers.emplace_back(PagedKvSpec{4, 256, 256, i == 5 ? 0 : 1024});
  const std::vector<HistoryGroup> groups = history_groups(layers);
  ASSERT_EQ(groups.size(), 2u);
  EXPECT_EQ(groups[0].layers, (std::vector<std::int32_t>{5}));
  EXPECT_EQ(groups[0].window(), 0);
  EXPECT_EQ(groups[1].layers, (std::vector<std::int32_t>{0, 1, 2, 3, 4}));
  EXPECT_EQ(groups[1].storage, (PagedKvSpec{4, 256, 256, 1024}));
  EXPECT_EQ(history_bytes_per_token(layers, DType::bf16), 6u * 4 * (256 + 256) * 2);
  EXPECT_EQ(history_bytes_per_token(layers, DType::f8_e4m3), 6u * 4 * (256 + 256));
  // Only the global layer's bytes grow with the sequence.
  EXPECT_EQ(history_token_bytes(layers, DType::bf16), 1u * 4 * (256 + 256) * 2);
  const std::vector<std::int32_t> n_pages{10, 7};
  const HistoryLayout layout = history_kv_layout(layers, n_pages, 16, DType::bf16);
  ASSERT_EQ(layout.groups.size(), 2u);
  EXPECT_EQ(layout.groups[0].n_layers, 1);
  EXPECT_EQ(layout.groups[0].n_pages, 10);
  EXPECT_EQ(layout.groups[1].n_layers, 5);
  EXPECT_EQ(layout.groups[1].n_pages, 7);
  EXPECT_EQ(layout.groups[1].head_dim, 256);
  EXPECT_EQ(layout.layers[5].group, 0);
  EXPECT_EQ(layout.layers[5].slot, 0);
  EXPECT_EQ(layout.layers[3].group, 1);
  EXPECT_EQ(layout.layers[3].slot, 3);
  EXPECT_EQ(history_describe(layers[0]), "paged K/V, 4 heads x 256/256, window 1024");
  EXPECT_EQ(history_describe(layers[5]), "paged K/V, 4 heads x 256/256");
  EXPECT_EQ(history_kinds(layers), "attention+sliding-window attention");
  EXPECT_EQ(history_kinds({layers[5]}), "attention");
}

TEST(History, AWindowPoolHoldsTwoWindowsASlotAndOneStep) {
  // A window of 1024 tokens and steps of up to 256: a row holds 1280 tokens, 80 pages of 16, one
  // more for the partial overlap.
  EXPECT_EQ(history_window_pages(1024, 256, 16), 81);
  // Four slots: two windows of 64 + 2 pages each, the step's 16 pages and a partial page a row.
  EXPECT_EQ(history_window_pool_pages(1024, 4, 256, 16), 2 * 4 * 66 + 16 + 4);
  std::vector<HistorySpec> layers;
  for (int i = 0; i < 6; ++i) layers.emplace_back(PagedKvSpec{4, 256, 256, i == 5 ? 0 : 1024});
  const std::uint64_t page_bytes = 5u * 16 * 4 * 512 * 2;  // five layers' K and V of a page
  EXPECT_EQ(history_window_pool_bytes(layers, 4, 256, 16, DType::bf16), (2u * 4 * 66 + 16 + 4 + 1) * page_bytes);
  // Every layer sliding: no separate pool, each group is sized by tokens.
  const std::vector<HistorySpec> sliding(3, PagedKvSpec{2, 64, 64, 512});
  EXPECT_EQ(history_window_pool_bytes(sliding, 4, 256, 16, DType::bf16), 0u);
  EXPECT_EQ(history_token_bytes(sliding, DType::bf16), history_bytes_per_token(sliding, DType::bf16));
}

TEST(History, LayersOfOtherShapesFormTheirOwnGroups) {
  const std::vector<HistorySpec> layers{PagedKvSpec{8, 128, 128, 0}, PagedKvSpec{2, 128, 128, 0},
                                        PagedKvSpec{8, 128, 128, 512}};
  const std::vector<HistoryGroup> groups = history_groups(layers);
  ASSERT_EQ(groups.size(), 3u);
  EXPECT_EQ(groups[0].layers, (std::vector<std::int32_t>{0}));
  EXPECT_EQ(groups[1].layers, (std::vector<std::int32_t>{1}));
  EXPECT_EQ(groups[2].layers, (std::vector<std::int32_t>{2}));
  const HistoryLayout layout = history_kv_layout(layers, 4, 16, DType::bf16);  // one count: every group
  ASSERT_EQ(layout.groups.size(), 3u);
  EXPECT_EQ(layout.groups[1].n_kv_heads, 2);
  for (const KvCacheLayout& group : layout.groups) EXPECT_EQ(group.n_pages, 4);
  const std::vector<std::int32_t> two{4, 5};
  EXPECT_THROW(history_kv_layout(layers, two, 16, DType::bf16), Error);  // a count per group, or one
  EXPECT_THROW(history_kv_layout({PagedKvSpec{1, 192, 128, 0}}, 4, 16, DType::bf16), Error);  // k != v dims
  EXPECT_THROW(history_kv_layout({}, 4, 16, DType::bf16), Error);
}

}  // namespace
}  // namespace flare::helios
