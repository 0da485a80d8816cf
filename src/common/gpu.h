// GPU discovery through NVML, opened with dlopen so the programs start on machines with no
// NVIDIA driver. Indices given by users are relative to CUDA_VISIBLE_DEVICES when it is set
// (the only environment variable Flare reads), otherwise NVML indices.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace flare {

struct GpuInfo {
  int visible_index = 0;  // index as the user names it (relative to CUDA_VISIBLE_DEVICES)
  int nvml_index = 0;
  std::string name;
  std::string uuid;
  std::uint64_t total_bytes = 0;
  std::uint64_t free_bytes = 0;
  int compute_major = 0;
  int compute_minor = 0;
  // The memory's peak rate from its maximum clock and bus width (double data rate); 0 where NVML
  // does not say. What a step reading its weights could reach at best.
  double peak_memory_bytes_per_s = 0;
  // From NVML's pciDeviceId (device id in the high 16 bits, vendor in the low 16): which board this
  // is, for choosing a package revision (hardware_revision.h). Absent where the driver does not say.
  std::optional<std::uint16_t> pci_device_id;
  std::uint16_t pci_vendor_id = 0;
  std::string arch() const;  // "sm_90"
};

struct GpuInventory {
  std::vector<GpuInfo> gpus;           // visible GPUs in visible order
  std::string unavailable_reason;      // why there are none ("no NVIDIA driver", ...)
  std::optional<std::string> cuda_visible_devices;  // the variable's value when set
};

GpuInventory discover_gpus();

// CUDA_VISIBLE_DEVICES semantics: a comma list of indices or UUID prefixes ("GPU-..."); an
// invalid entry ends the list; "" or "-1" hides every GPU. Returns NVML indices in visible order.
std::vector<int> resolve_visible_devices(const std::string& value, const std::vector<std::string>& nvml_uuids);

struct BackendSelection {
  bool cpu = true;
  std::vector<GpuInfo> gpus;  // rank order
  std::string summary;        // the detail printed on the "Select GPUs." line
};

// Chooses the backend: --cpu forces the CPU; otherwise the listed GPUs (--gpus), or the first
// visible GPU; with no visible GPU, the CPU, saying why.
BackendSelection select_backend(const GpuInventory& inventory, const std::optional<std::vector<int>>& gpus_flag,
                                bool force_cpu);

}  // namespace flare
