#include "common/hardware_revision.h"

#include <algorithm>
#include <array>

#include <fmt/format.h>

#include "common/error.h"

namespace flare {
namespace {

constexpr std::uint32_t kNvidiaVendorId = 0x10de;

// Device ids from the PCI ID Repository (pci-ids.ucw.cz, vendor 10de). Only devices whose
// compute capability the runtime supports (8.0 and newer) are listed; add a line per new board.
constexpr std::array kKnownDevices = {
    KnownDevice{0x20b0, "sm80", "A100-SXM4-40GB"},
    KnownDevice{0x20b2, "sm80", "A100-SXM4-80GB"},
    KnownDevice{0x20b5, "sm80", "A100 80GB PCIe"},
    KnownDevice{0x20f1, "sm80", "A100-PCIE-40GB"},
    KnownDevice{0x2204, "sm86", "GeForce RTX 3090"},
    KnownDevice{0x2230, "sm86", "RTX A6000"},
    KnownDevice{0x2235, "sm86", "A40"},
    KnownDevice{0x2236, "sm86", "A10"},
    KnownDevice{0x2321, "sm90", "H100 NVL"},
    KnownDevice{0x2330, "sm90", "H100 SXM5 80GB"},
    KnownDevice{0x2331, "sm90", "H100 PCIe"},
    KnownDevice{0x2335, "sm90", "H200 SXM 141GB"},
    KnownDevice{0x233b, "sm90", "H200 NVL"},
    KnownDevice{0x2342, "sm90", "GH200"},
    KnownDevice{0x2684, "sm89", "GeForce RTX 4090"},
    KnownDevice{0x26b1, "sm89", "RTX 6000 Ada Generation"},
    KnownDevice{0x26b5, "sm89", "L40"},
    KnownDevice{0x26b9, "sm89", "L40S"},
    KnownDevice{0x27b8, "sm89", "L4"},
    KnownDevice{0x2901, "sm100", "B200"},
    KnownDevice{0x2b85, "sm120", "GeForce RTX 5090 (GB202)"},
    KnownDevice{0x2bb1, "sm120", "RTX PRO 6000 Blackwell Workstation Edition (GB202)"},
    KnownDevice{0x2bb4, "sm120", "RTX PRO 6000 Blackwell Max-Q Workstation Edition (GB202)"},
    KnownDevice{0x2bb5, "sm120", "RTX PRO 6000 Blackwell Server Edition (GB202)"},
    KnownDevice{0x2e12, "sm121", "GB10 (DGX Spark)"},
};

static_assert(std::is_sorted(kKnownDevices.begin(), kKnownDevices.end(),
                             [](const KnownDevice& a, const KnownDevice& b) { return a.pci_device_id < b.pci_device_id; }));

std::string describe(const GpuInfo& gpu) {
  return fmt::format("GPU {} ({}{})", gpu.visible_index, gpu.name.empty() ? "unnamed" : gpu.name,
                     gpu.pci_device_id ? fmt::format(", PCI device {:04x}", *gpu.pci_device_id) : "");
}

// The usual spelling of a revision built for this device's compute capability, as a hint only.
std::string target_hint(const GpuInfo& gpu) {
  if (gpu.compute_major <= 0) return "";
  return fmt::format(" (a package for its compute capability {}.{} would be revision sm{}{})", gpu.compute_major,
                     gpu.compute_minor, gpu.compute_major, gpu.compute_minor);
}

}  // namespace

std::span<const KnownDevice> known_devices() { return kKnownDevices; }

const KnownDevice* find_known_device(std::uint16_t pci_device_id) {
  const auto it = std::lower_bound(kKnownDevices.begin(), kKnownDevices.end(), pci_device_id,
                                   [](const KnownDevice& d, std::uint16_t id) { return d.pci_device_id < id; });
  return it != kKnownDevices.end() && it->pci_device_id == pci_device_id ? &*it : nullptr;
}

std::string hardware_revision_for(const std::vector<GpuInfo>& visible, const std::vector<int>& selected_in) {
  if (visible.empty()) return "cpu";
  const std::vector<int> selected = selected_in.empty() ? std::vector<int>{0} : selected_in;
  std::string revision;
  int first = -1;
  for (int index : selected) {
    if (index < 0 || index >= static_cast<int>(visible.size()))
      fail_usage("--gpus names GPU {}, but {} are visible", index, visible.size());
    const GpuInfo& gpu = visible[static_cast<std::size_t>(index)];
    if (!gpu.pci_device_id || gpu.pci_vendor_id != kNvidiaVendorId)
      fail_usage("{}: the driver did not report its PCI device id, so the package revision cannot be chosen; pass "
                 "--revision{}", describe(gpu), target_hint(gpu));
    const KnownDevice* known = find_known_device(*gpu.pci_device_id);
    if (!known)
      fail_usage("{} is not a device Flare knows, so the package revision cannot be chosen; pass --revision{}",
                 describe(gpu), target_hint(gpu));
    if (!revision.empty() && revision != known->revision)
      fail_usage("{} and {} need different package revisions ({} and {}); select GPUs of one family with --gpus, or "
                 "pass --revision", describe(visible[static_cast<std::size_t>(first)]), describe(gpu), revision,
                 known->revision);
    if (revision.empty()) first = index;
    revision = known->revision;
  }
  return revision;
}

}  // namespace flare
