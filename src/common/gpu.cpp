#include "common/gpu.h"

#include <dlfcn.h>

#include <cstdlib>
#include <memory>

#include <fmt/format.h>

#include "common/error.h"

namespace flare {
namespace {

// The few NVML entry points used, with their C signatures (nvml.h is not needed to build).
using nvmlReturn_t = int;
using nvmlDevice_t = void*;
struct NvmlMemory {
  unsigned long long total, free, used;
};
// nvmlPciInfo_t (nvml.h): pci_device_id is the 16-bit device id << 16 | the 16-bit vendor id.
struct NvmlPciInfo {
  char bus_id_legacy[16];
  unsigned int domain, bus, device, pci_device_id, pci_subsystem_id;
  char bus_id[32];
};
constexpr nvmlReturn_t kNvmlSuccess = 0;

struct Nvml {
  void* library = nullptr;
  nvmlReturn_t (*init)() = nullptr;
  nvmlReturn_t (*shutdown)() = nullptr;
  nvmlReturn_t (*device_count)(unsigned int*) = nullptr;
  nvmlReturn_t (*device_by_index)(unsigned int, nvmlDevice_t*) = nullptr;
  nvmlReturn_t (*device_name)(nvmlDevice_t, char*, unsigned int) = nullptr;
  nvmlReturn_t (*device_uuid)(nvmlDevice_t, char*, unsigned int) = nullptr;
  nvmlReturn_t (*device_memory)(nvmlDevice_t, NvmlMemory*) = nullptr;
  nvmlReturn_t (*device_capability)(nvmlDevice_t, int*, int*) = nullptr;
  nvmlReturn_t (*device_max_clock)(nvmlDevice_t, int, unsigned int*) = nullptr;  // optional
  nvmlReturn_t (*device_bus_width)(nvmlDevice_t, unsigned int*) = nullptr;       // optional
  nvmlReturn_t (*device_pci_info)(nvmlDevice_t, NvmlPciInfo*) = nullptr;         // optional

  ~Nvml() {
    if (shutdown) shutdown();
    if (library) dlclose(library);
  }

  template <typename F>
  bool bind(F& target, const char* symbol) {
    target = reinterpret_cast<F>(dlsym(library, symbol));
    return target != nullptr;
  }

  std::string open() {
    library = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!library) return "no NVIDIA driver (libnvidia-ml.so.1 not found)";
    if (!bind(init, "nvmlInit_v2") || !bind(device_count, "nvmlDeviceGetCount_v2") ||
        !bind(device_by_index, "nvmlDeviceGetHandleByIndex_v2") || !bind(device_name, "nvmlDeviceGetName") ||
        !bind(device_uuid, "nvmlDeviceGetUUID") || !bind(device_memory, "nvmlDeviceGetMemoryInfo") ||
        !bind(device_capability, "nvmlDeviceGetCudaComputeCapability"))
      return "the NVIDIA management library lacks required functions";
    if (init() != kNvmlSuccess) return "the NVIDIA driver did not initialize";
    bind(shutdown, "nvmlShutdown");
    bind(device_max_clock, "nvmlDeviceGetMaxClockInfo");
    bind(device_bus_width, "nvmlDeviceGetMemoryBusWidth");
    bind(device_pci_info, "nvmlDeviceGetPciInfo_v3");
    return "";
  }
};

}  // namespace

std::string GpuInfo::arch() const { return fmt::format("sm_{}{}", compute_major, compute_minor); }

std::vector<int> resolve_visible_devices(const std::string& value, const std::vector<std::string>& nvml_uuids) {
  std::vector<int> visible;
  std::size_t start = 0;
  while (start <= value.size()) {
    std::size_t comma = value.find(',', start);
    if (comma == std::string::npos) comma = value.size();
    std::string item = value.substr(start, comma - start);
    while (!item.empty() && item.front() == ' ') item.erase(item.begin());
    while (!item.empty() && item.back() == ' ') item.pop_back();
    start = comma + 1;
    int index = -1;
    if (!item.empty() && item.find_first_not_of("0123456789") == std::string::npos && item.size() < 5) {
      index = std::stoi(item);
      if (index >= static_cast<int>(nvml_uuids.size())) index = -1;
    } else if (item.rfind("GPU-", 0) == 0) {
      for (std::size_t i = 0; i < nvml_uuids.size(); ++i) {
        if (nvml_uuids[i].rfind(item, 0) == 0) {
          if (index >= 0) { index = -1; break; }  // ambiguous prefix
          index = static_cast<int>(i);
        }
      }
    }
    if (index < 0) break;  // CUDA ignores everything from the first invalid entry
    bool duplicate = false;
    for (int seen : visible) duplicate |= seen == index;
    if (duplicate) break;
    visible.push_back(index);
  }
  return visible;
}

GpuInventory discover_gpus() {
  GpuInventory inventory;
  if (const char* cvd = std::getenv("CUDA_VISIBLE_DEVICES")) inventory.cuda_visible_devices = cvd;
  Nvml nvml;
  inventory.unavailable_reason = nvml.open();
  if (!inventory.unavailable_reason.empty()) return inventory;
  unsigned int count = 0;
  if (nvml.device_count(&count) != kNvmlSuccess) {
    inventory.unavailable_reason = "NVML could not count GPUs";
    return inventory;
  }
  std::vector<GpuInfo> all;
  for (unsigned int i = 0; i < count; ++i) {
    nvmlDevice_t device = nullptr;
    if (nvml.device_by_index(i, &device) != kNvmlSuccess) continue;
    GpuInfo info;
    info.nvml_index = static_cast<int>(i);
    char buffer[256] = {};
    if (nvml.device_name(device, buffer, sizeof buffer) == kNvmlSuccess) info.name = buffer;
    char uuid[128] = {};
    if (nvml.device_uuid(device, uuid, sizeof uuid) == kNvmlSuccess) info.uuid = uuid;
    NvmlMemory memory{};
    if (nvml.device_memory(device, &memory) == kNvmlSuccess) {
      info.total_bytes = memory.total;
      info.free_bytes = memory.free;
    }
    nvml.device_capability(device, &info.compute_major, &info.compute_minor);
    constexpr int kNvmlClockMem = 2;
    unsigned int memory_mhz = 0, bus_bits = 0;
    if (nvml.device_max_clock && nvml.device_bus_width &&
        nvml.device_max_clock(device, kNvmlClockMem, &memory_mhz) == kNvmlSuccess &&
        nvml.device_bus_width(device, &bus_bits) == kNvmlSuccess)
      info.peak_memory_bytes_per_s = 2.0 * memory_mhz * 1e6 * bus_bits / 8.0;
    NvmlPciInfo pci{};
    if (nvml.device_pci_info && nvml.device_pci_info(device, &pci) == kNvmlSuccess && pci.pci_device_id != 0) {
      info.pci_device_id = static_cast<std::uint16_t>(pci.pci_device_id >> 16);
      info.pci_vendor_id = static_cast<std::uint16_t>(pci.pci_device_id & 0xffff);
    }
    all.push_back(info);
  }
  std::vector<int> order;
  if (inventory.cuda_visible_devices) {
    std::vector<std::string> uuids;
    for (const auto& gpu : all) uuids.push_back(gpu.uuid);
    order = resolve_visible_devices(*inventory.cuda_visible_devices, uuids);
  } else {
    for (std::size_t i = 0; i < all.size(); ++i) order.push_back(static_cast<int>(i));
  }
  for (std::size_t v = 0; v < order.size(); ++v) {
    GpuInfo info = all[static_cast<std::size_t>(order[v])];
    info.visible_index = static_cast<int>(v);
    inventory.gpus.push_back(info);
  }
  if (inventory.gpus.empty())
    inventory.unavailable_reason = inventory.cuda_visible_devices
                                       ? fmt::format("CUDA_VISIBLE_DEVICES={} hides every GPU", *inventory.cuda_visible_devices)
                                       : "no NVIDIA GPU found";
  return inventory;
}

BackendSelection select_backend(const GpuInventory& inventory, const std::optional<std::vector<int>>& gpus_flag,
                                bool force_cpu) {
  BackendSelection selection;
  if (force_cpu) {
    if (gpus_flag) fail_usage("--cpu and --gpus cannot be combined");
    selection.summary = "CPU backend (--cpu)";
    return selection;
  }
  if (inventory.gpus.empty()) {
    if (gpus_flag) fail_usage("--gpus {}: {}", fmt::join(*gpus_flag, ","), inventory.unavailable_reason);
    selection.summary = fmt::format("CPU backend ({})", inventory.unavailable_reason);
    return selection;
  }
  std::vector<int> wanted = gpus_flag ? *gpus_flag : std::vector<int>{0};
  for (int index : wanted) {
    if (index < 0 || index >= static_cast<int>(inventory.gpus.size()))
      fail_usage("--gpus: GPU {} does not exist; {} GPU{} visible (0-{})", index, inventory.gpus.size(),
                 inventory.gpus.size() == 1 ? " is" : "s are", inventory.gpus.size() - 1);
    selection.gpus.push_back(inventory.gpus[static_cast<std::size_t>(index)]);
  }
  selection.cpu = false;
  std::string names;
  for (const auto& gpu : selection.gpus) {
    if (!names.empty()) names += ", ";
    names += fmt::format("{} ({}, {})", gpu.visible_index, gpu.name, gpu.arch());
  }
  selection.summary = "GPU " + names;
  if (inventory.cuda_visible_devices) selection.summary += " of CUDA_VISIBLE_DEVICES=" + *inventory.cuda_visible_devices;
  return selection;
}

}  // namespace flare
