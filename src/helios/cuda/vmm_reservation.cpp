// Device address space backed on demand (see vmm_reservation.h).
#include "helios/cuda/vmm_reservation.h"

#include <iterator>

#include "common/error.h"

namespace flare::helios::cuda {
namespace {

CUmemAllocationProp device_memory(CUdevice device) {
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = int(device);
  return prop;
}

}  // namespace

bool vmm_supported(CUdevice device) {
  int supported = 0;
  check(driver().device_get_attribute(&supported, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, device),
        "cuDeviceGetAttribute(virtual memory management supported)");
  return supported != 0;
}

std::size_t vmm_granularity_bytes(CUdevice device) {
  const CUmemAllocationProp prop = device_memory(device);
  std::size_t granularity = 0;
  check(driver().mem_get_allocation_granularity(&granularity, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM),
        "cuMemGetAllocationGranularity");
  if (granularity == 0) fail(ExitCode::failure, "CUDA reports an allocation granularity of 0 bytes");
  return granularity;
}

VmmReservation::VmmReservation(CUdevice device, std::size_t size_bytes)
    : device_(device), size_(size_bytes), granularity_(vmm_granularity_bytes(device)) {
  if (size_bytes == 0 || size_bytes % granularity_ != 0) {
    fail(ExitCode::failure, "internal: a reservation of {} bytes in granules of {}", size_bytes, granularity_);
  }
  // Aligned to a granule (the alignment must be a power of two; 0 is the driver's default).
  const std::size_t alignment = (granularity_ & (granularity_ - 1)) == 0 ? granularity_ : 0;
  check(driver().mem_address_reserve(&base_, size_bytes, alignment, 0, 0), "cuMemAddressReserve");
}

VmmReservation::~VmmReservation() {
  const Driver& d = driver();
  if (!mappings_.empty()) d.ctx_synchronize();  // no queued kernel may still touch the pages
  for (const auto& [offset, size] : mappings_) d.mem_unmap(base_ + offset, size);
  if (base_) d.mem_address_free(base_, size_);
}

bool VmmReservation::map(std::size_t offset, std::size_t size) {
  if (size == 0 || offset % granularity_ != 0 || size % granularity_ != 0 || offset > size_ || size > size_ - offset) {
    fail(ExitCode::failure, "internal: mapping [{}, +{}) of a reservation of {} bytes in granules of {}", offset, size,
         size_, granularity_);
  }
  auto next = mappings_.lower_bound(offset);
  const bool overlaps_next = next != mappings_.end() && next->first < offset + size;
  const bool overlaps_previous = next != mappings_.begin() && std::prev(next)->first + std::prev(next)->second > offset;
  if (overlaps_next || overlaps_previous) fail(ExitCode::failure, "internal: mapping [{}, +{}) twice", offset, size);

  const Driver& d = driver();
  const CUmemAllocationProp prop = device_memory(device_);
  CUmemGenericAllocationHandle handle = 0;
  CUresult r = d.mem_create(&handle, size, &prop, 0);
  if (r == CUDA_ERROR_OUT_OF_MEMORY) return false;
  check(r, "cuMemCreate");
  const CUdeviceptr at = base_ + offset;
  r = d.mem_map(at, size, 0, handle, 0);
  d.mem_release(handle);  // a mapping keeps the memory alive; unmapping it then frees the memory
  if (r == CUDA_ERROR_OUT_OF_MEMORY) return false;
  check(r, "cuMemMap");
  CUmemAccessDesc access{};
  access.location = prop.location;
  access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  r = d.mem_set_access(at, size, &access, 1);
  if (r != CUDA_SUCCESS) {
    d.mem_unmap(at, size);
    if (r == CUDA_ERROR_OUT_OF_MEMORY) return false;
    check(r, "cuMemSetAccess");
  }
  mappings_.emplace(offset, size);
  mapped_bytes_ += size;
  return true;
}

void VmmReservation::unmap(std::size_t offset, std::size_t size) {
  const auto it = mappings_.find(offset);
  if (it == mappings_.end() || it->second != size) {
    fail(ExitCode::failure, "internal: unmapping [{}, +{}), which no single mapping covers", offset, size);
  }
  check(driver().mem_unmap(base_ + offset, size), "cuMemUnmap");
  mappings_.erase(it);
  mapped_bytes_ -= size;
}

}  // namespace flare::helios::cuda
