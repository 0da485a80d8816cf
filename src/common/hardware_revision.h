// The Hub revision of a prepared package that fits the selected GPUs (spec "Downloading published
// packages"): each GPU's PCI device id, read through NVML, is looked up in a table of known
// devices, which names the revision after the package target that device runs (`sm90` for
// H100 and H200, `sm120` for GB202 boards such as RTX PRO 6000 Blackwell, `sm121` for GB10, ...).
// All selected GPUs must map to one revision. A device the table does not know, or a driver that
// does not report the id, needs an explicit --revision: a guess from other properties could pick
// a package the hardware cannot run. Pure functions over GPU descriptions, so tests inject them.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "common/gpu.h"

namespace flare {

struct KnownDevice {
  std::uint16_t pci_device_id;  // the device half of NVML's pciDeviceId (vendor 0x10de)
  const char* revision;         // the package target, as the Hub revision is named
  const char* name;             // for messages and documentation
};

// The table, sorted by device id.
std::span<const KnownDevice> known_devices();

// The table's entry for an NVIDIA device id, if any.
const KnownDevice* find_known_device(std::uint16_t pci_device_id);

// The revision for `selected` (indices into `visible`, as --gpus names them; the first visible GPU
// when empty), or "cpu" when no GPU is visible. Throws a usage error (exit 2) naming the device
// and saying to pass --revision for an index out of range, an unreported or unknown device id, or
// GPUs of different revisions.
std::string hardware_revision_for(const std::vector<GpuInfo>& visible, const std::vector<int>& selected);

}  // namespace flare
