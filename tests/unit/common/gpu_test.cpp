#include "common/gpu.h"

#include <gtest/gtest.h>

#include "common/error.h"

namespace flare {
namespace {

const std::vector<std::string> kUuids = {"GPU-aaaa-1111", "GPU-bbbb-2222", "GPU-cccc-3333", "GPU-dddd-4444"};

TEST(VisibleDevices, IndicesAndUuids) {
  EXPECT_EQ(resolve_visible_devices("2,0", kUuids), (std::vector<int>{2, 0}));
  EXPECT_EQ(resolve_visible_devices("GPU-bbbb", kUuids), (std::vector<int>{1}));
  EXPECT_EQ(resolve_visible_devices("3, GPU-aaaa-1111", kUuids), (std::vector<int>{3, 0}));
}

TEST(VisibleDevices, InvalidEntryEndsTheList) {
  EXPECT_EQ(resolve_visible_devices("1,7,2", kUuids), (std::vector<int>{1}));
  EXPECT_EQ(resolve_visible_devices("1,x,2", kUuids), (std::vector<int>{1}));
  EXPECT_EQ(resolve_visible_devices("1,1", kUuids), (std::vector<int>{1}));
  EXPECT_TRUE(resolve_visible_devices("", kUuids).empty());
  EXPECT_TRUE(resolve_visible_devices("-1", kUuids).empty());
  EXPECT_TRUE(resolve_visible_devices("GPU-", kUuids).empty());  // ambiguous prefix
  EXPECT_TRUE(resolve_visible_devices("99999999999", kUuids).empty());
}

GpuInventory two_gpus() {
  GpuInventory inventory;
  for (int i = 0; i < 2; ++i) {
    GpuInfo gpu;
    gpu.visible_index = i;
    gpu.nvml_index = i + 2;
    gpu.name = "NVIDIA H200";
    gpu.compute_major = 9;
    inventory.gpus.push_back(gpu);
  }
  inventory.cuda_visible_devices = "2,3";
  return inventory;
}

TEST(SelectBackend, CpuWithoutGpus) {
  GpuInventory none;
  none.unavailable_reason = "no NVIDIA driver";
  const auto selection = select_backend(none, std::nullopt, false);
  EXPECT_TRUE(selection.cpu);
  EXPECT_NE(selection.summary.find("no NVIDIA driver"), std::string::npos);
  EXPECT_THROW(select_backend(none, std::vector<int>{0}, false), Error);
}

TEST(SelectBackend, ForcedCpu) {
  EXPECT_TRUE(select_backend(two_gpus(), std::nullopt, true).cpu);
  EXPECT_THROW(select_backend(two_gpus(), std::vector<int>{0}, true), Error);
}

TEST(SelectBackend, GpusRelativeToVisibleDevices) {
  const auto selection = select_backend(two_gpus(), std::vector<int>{1}, false);
  ASSERT_FALSE(selection.cpu);
  ASSERT_EQ(selection.gpus.size(), 1u);
  EXPECT_EQ(selection.gpus[0].nvml_index, 3);
  EXPECT_NE(selection.summary.find("of CUDA_VISIBLE_DEVICES=2,3"), std::string::npos);
  EXPECT_NE(selection.summary.find("sm_90"), std::string::npos);
  EXPECT_THROW(select_backend(two_gpus(), std::vector<int>{2}, false), Error);
  EXPECT_EQ(select_backend(two_gpus(), std::nullopt, false).gpus.size(), 1u);
}

TEST(Discover, NeverThrows) {
  // Works with or without a driver; on a machine without one it says why.
  const GpuInventory inventory = discover_gpus();
  if (inventory.gpus.empty()) EXPECT_FALSE(inventory.unavailable_reason.empty());
}

}  // namespace
}  // namespace flare
