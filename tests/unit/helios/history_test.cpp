// Per-layer history specs (history.h): grouping by storage, bytes per token, and the one-cache
// layout a model's layers get (or a clear error when they need several kinds of storage).
#include <gtest/gtest.h>

#include "common/error.h"
#include "helios/history.h"

namespace flare::helios {
namespace {

TEST(History, SlidingAndGlobalLayersShareOneStorageGroup) {
  // Gemma 3's pattern: five sliding layers, then a global one.
  std::vector<HistorySpec> layers;
  for (int i = 0; i < 6; ++i) layers.emplace_back(PagedKvSpec{4, 256, 256, i == 5 ? 0 : 1024});
  const std::vector<HistoryGroup> groups = history_groups(layers);
  ASSERT_EQ(groups.size(), 1u);
  EXPECT_EQ(groups[0].layers, (std::vector<std::int32_t>{0, 1, 2, 3, 4, 5}));
  EXPECT_EQ(groups[0].storage, (PagedKvSpec{4, 256, 256, 0}));
  EXPECT_EQ(history_bytes_per_token(layers, DType::bf16), 6u * 4 * (256 + 256) * 2);
  EXPECT_EQ(history_bytes_per_token(layers, DType::f8_e4m3), 6u * 4 * (256 + 256));
  const KvCacheLayout layout = history_kv_layout(layers, 10, 16, DType::bf16);
  EXPECT_EQ(layout.n_layers, 6);
  EXPECT_EQ(layout.n_kv_heads, 4);
  EXPECT_EQ(layout.head_dim, 256);
  EXPECT_EQ(layout.n_pages, 10);
  EXPECT_EQ(history_describe(layers[0]), "paged K/V, 4 heads x 256/256, window 1024");
  EXPECT_EQ(history_describe(layers[5]), "paged K/V, 4 heads x 256/256");
  EXPECT_EQ(history_kinds(layers), "attention+sliding-window attention");
  EXPECT_EQ(history_kinds({layers[5]}), "attention");
}

TEST(History, LayersOfOtherShapesFormTheirOwnGroups) {
  const std::vector<HistorySpec> layers{PagedKvSpec{8, 128, 128, 0}, PagedKvSpec{2, 128, 128, 0},
                                        PagedKvSpec{8, 128, 128, 512}};
  const std::vector<HistoryGroup> groups = history_groups(layers);
  ASSERT_EQ(groups.size(), 2u);
  EXPECT_EQ(groups[0].layers, (std::vector<std::int32_t>{0, 2}));
  EXPECT_EQ(groups[1].layers, (std::vector<std::int32_t>{1}));
  // One KV cache holds one kind today: a clear error, never a wrong layout.
  try {
    history_kv_layout(layers, 4, 16, DType::bf16);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("2 kinds of history"), std::string::npos) << e.what();
  }
  EXPECT_THROW(history_kv_layout({PagedKvSpec{1, 192, 128, 0}}, 4, 16, DType::bf16), Error);  // k != v dims
  EXPECT_THROW(history_kv_layout({}, 4, 16, DType::bf16), Error);
}

}  // namespace
}  // namespace flare::helios
