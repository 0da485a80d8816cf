// The CUDA backend's KV cache memory, kept apart from cuda_backend.cpp: the cache's address space
// is one VMM reservation (vmm_reservation.h) whose granules Backend::kv_grow commits as the page
// pool grows; device memory running out is a refused commit, which the pool treats as full.
#include "common/error.h"
#include "helios/cuda/cuda_backend.h"
#include "helios/cuda/vmm_reservation.h"

namespace flare::helios::cuda {

std::unique_ptr<Buffer> CudaBackend::reserve_address_space(std::size_t size_bytes) {
  return std::make_unique<VmmReservation>(context_.device_handle(), size_bytes);
}

std::size_t CudaBackend::commit_granularity_bytes() const {
  const CUdevice device = context_.device_handle();
  return vmm_supported(device) ? vmm_granularity_bytes(device) : 0;  // 0: KV caches are one allocation
}

bool CudaBackend::commit(Buffer& reserved, std::size_t offset_bytes, std::size_t size_bytes) {
  auto* reservation = dynamic_cast<VmmReservation*>(&reserved);
  if (reservation == nullptr) fail(ExitCode::failure, "internal: a commit outside a VMM reservation");
  if (kv_commit_limit_bytes_ > 0 && reservation->mapped_bytes() + size_bytes > kv_commit_limit_bytes_) return false;
  return reservation->map(offset_bytes, size_bytes);
}

void CudaBackend::decommit(Buffer& reserved, std::size_t offset_bytes, std::size_t size_bytes) {
  auto* reservation = dynamic_cast<VmmReservation*>(&reserved);
  if (reservation == nullptr) fail(ExitCode::failure, "internal: a decommit outside a VMM reservation");
  reservation->unmap(offset_bytes, size_bytes);
}

}  // namespace flare::helios::cuda
