// Package revision selection from injected GPU descriptions (no GPU needed): the PCI device id
// table decides, unknown or unreported devices and mixed families ask for --revision.
#include "common/hardware_revision.h"

#include <gtest/gtest.h>

#include <set>

#include "common/error.h"

namespace flare {
namespace {

GpuInfo gpu(int index, std::optional<std::uint16_t> device_id, int major = 9, int minor = 0,
            std::uint16_t vendor = 0x10de, std::string name = "test GPU") {
  GpuInfo info;
  info.visible_index = index;
  info.nvml_index = index;
  info.name = std::move(name);
  info.compute_major = major;
  info.compute_minor = minor;
  info.pci_device_id = device_id;
  info.pci_vendor_id = device_id ? vendor : 0;
  return info;
}

// Runs `body`, expecting a usage error whose message contains every fragment.
template <typename F>
void expect_usage_error(F body, std::initializer_list<const char*> fragments) {
  try {
    body();
    FAIL() << "no error";
  } catch (const Error& error) {
    EXPECT_EQ(error.code(), ExitCode::usage);
    for (const char* fragment : fragments) EXPECT_NE(std::string(error.what()).find(fragment), std::string::npos)
        << error.what() << " lacks " << fragment;
  }
}

TEST(HardwareRevision, NoVisibleGpuIsTheCpuRevision) {
  EXPECT_EQ(hardware_revision_for({}, {}), "cpu");
}

TEST(HardwareRevision, KnownDevicesNameTheirPackageTarget) {
  EXPECT_EQ(hardware_revision_for({gpu(0, 0x2335)}, {}), "sm90");            // H200 SXM
  EXPECT_EQ(hardware_revision_for({gpu(0, 0x2330)}, {}), "sm90");            // H100 SXM5
  EXPECT_EQ(hardware_revision_for({gpu(0, 0x2bb1, 12, 0)}, {}), "sm120");    // RTX PRO 6000 Blackwell (GB202)
  EXPECT_EQ(hardware_revision_for({gpu(0, 0x2e12, 12, 1)}, {}), "sm121");    // GB10
  EXPECT_EQ(hardware_revision_for({gpu(0, 0x26b9, 8, 9)}, {}), "sm89");      // L40S
}

TEST(HardwareRevision, TheTableDecidesNotTheReportedCapability) {
  // A GB10 whose driver reported another capability still selects the GB10 revision.
  EXPECT_EQ(hardware_revision_for({gpu(0, 0x2e12, 12, 0)}, {}), "sm121");
}

TEST(HardwareRevision, TheFirstVisibleGpuWithoutGpus) {
  const std::vector<GpuInfo> visible = {gpu(0, 0x2335), gpu(1, 0x2bb1, 12, 0)};
  EXPECT_EQ(hardware_revision_for(visible, {}), "sm90");
  EXPECT_EQ(hardware_revision_for(visible, {1}), "sm120");
}

TEST(HardwareRevision, SelectedGpusOfOneFamilyAgree) {
  const std::vector<GpuInfo> visible = {gpu(0, 0x2330), gpu(1, 0x2335), gpu(2, 0x2342)};
  EXPECT_EQ(hardware_revision_for(visible, {0, 1, 2}), "sm90");
}

TEST(HardwareRevision, MixedFamiliesNeedARevision) {
  const std::vector<GpuInfo> visible = {gpu(0, 0x2335), gpu(1, 0x2bb1, 12, 0)};
  expect_usage_error([&] { hardware_revision_for(visible, {0, 1}); }, {"different package revisions", "sm90", "sm120",
                                                                     "--revision"});
}

TEST(HardwareRevision, UnknownDeviceNeedsARevisionWithAHint) {
  expect_usage_error([] { hardware_revision_for({gpu(0, 0x1db6, 7, 0, 0x10de, "Tesla V100")}, {}); },
                     {"GPU 0 (Tesla V100, PCI device 1db6) is not a device Flare knows", "--revision",
                      "would be revision sm70"});
}

TEST(HardwareRevision, UnreportedOrForeignIdNeedsARevision) {
  expect_usage_error([] { hardware_revision_for({gpu(0, std::nullopt)}, {}); },
                     {"did not report its PCI device id", "--revision"});
  expect_usage_error([] { hardware_revision_for({gpu(0, 0x2335, 9, 0, 0x1234)}, {}); },
                     {"did not report its PCI device id"});
}

TEST(HardwareRevision, GpuIndexOutOfRange) {
  expect_usage_error([] { hardware_revision_for({gpu(0, 0x2335)}, {3}); }, {"--gpus names GPU 3, but 1 are visible"});
}

TEST(HardwareRevision, TableIsSortedUniqueAndNamesTargets) {
  std::set<std::uint16_t> ids;
  for (const KnownDevice& device : known_devices()) {
    EXPECT_TRUE(ids.insert(device.pci_device_id).second) << std::hex << device.pci_device_id;
    EXPECT_EQ(std::string(device.revision).rfind("sm", 0), 0u) << device.name;
    EXPECT_EQ(find_known_device(device.pci_device_id), &device);
  }
  EXPECT_EQ(find_known_device(0x0001), nullptr);
}

}  // namespace
}  // namespace flare
