// Device address space with memory mapped into it on demand (the CUDA driver's virtual memory
// management): the KV cache's storage. The range is reserved once (cuMemAddressReserve), so its
// base never moves and kernels and captured graphs keep their addresses while the pool grows; each
// map() creates physical memory (cuMemCreate), maps it (cuMemMap) and opens it to the device
// (cuMemSetAccess). Device memory that runs out is an answer (map() says false), not an error.
//
// Ownership: the reservation owns its address range and every mapping; destruction unmaps them
// (freeing the memory) and frees the range. Used by the thread that owns the backend.
#pragma once

#include <cstddef>
#include <map>

#include "helios/backend.h"
#include "helios/cuda/driver.h"

namespace flare::helios::cuda {

// Whether `device` supports virtual memory management (every GPU Flare targets does on Linux).
bool vmm_supported(CUdevice device);

// The allocation granularity (CU_MEM_ALLOC_GRANULARITY_MINIMUM) of device memory on `device`:
// sizes, offsets and addresses of mappings are multiples of it.
std::size_t vmm_granularity_bytes(CUdevice device);

class VmmReservation final : public Buffer {
 public:
  // `size_bytes`: a multiple of the granularity. A capacity error when the address space is refused.
  VmmReservation(CUdevice device, std::size_t size_bytes);
  ~VmmReservation() override;
  VmmReservation(const VmmReservation&) = delete;
  VmmReservation& operator=(const VmmReservation&) = delete;

  void* data() const override { return reinterpret_cast<void*>(base_); }
  std::size_t size_bytes() const override { return size_; }

  // Puts device memory behind [offset, offset + size) (granularity multiples, nothing mapped there
  // yet). False, with nothing mapped, when the device is out of memory; other failures throw.
  bool map(std::size_t offset_bytes, std::size_t size_bytes);
  // Unmaps a range exactly as one map() call mapped it; its memory is freed.
  void unmap(std::size_t offset_bytes, std::size_t size_bytes);
  std::size_t mapped_bytes() const { return mapped_bytes_; }

 private:
  CUdevice device_;
  CUdeviceptr base_ = 0;
  std::size_t size_ = 0;
  std::size_t granularity_ = 0;
  std::map<std::size_t, std::size_t> mappings_;  // offset -> size of each map() call
  std::size_t mapped_bytes_ = 0;
};

}  // namespace flare::helios::cuda
