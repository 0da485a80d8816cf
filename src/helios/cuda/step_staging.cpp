// Pinned double-buffered staging of step inputs (see step_staging.h).
#include "helios/cuda/step_staging.h"

#include <algorithm>

#include "common/error.h"

namespace flare::helios::cuda {
namespace {

constexpr std::size_t k_alignment = 16;
constexpr std::size_t k_initial_slot_bytes = 64 * 1024;

}  // namespace

StepStaging::StepStaging(const Stream& stream) : stream_(stream) {
  for (Slot& slot : slots_) check(driver().event_create(&slot.copied, CU_EVENT_DISABLE_TIMING), "cuEventCreate");
}

StepStaging::~StepStaging() {
  for (Slot& slot : slots_) {
    if (slot.pending) driver().event_synchronize(slot.copied);  // the copy still reads the pinned bytes
    if (slot.copied) driver().event_destroy(slot.copied);
  }
}

void StepStaging::wait(Slot& slot) {
  if (!slot.pending) return;
  check(driver().event_synchronize(slot.copied), "cuEventSynchronize");
  slot.pending = false;
}

void StepStaging::next_step() {
  current_ = 1 - current_;
  Slot& slot = slots_[current_];
  wait(slot);
  slot.used = 0;
}

void* StepStaging::stage(std::size_t size_bytes) {
  Slot& slot = slots_[current_];
  const std::size_t begin = (slot.used + k_alignment - 1) / k_alignment * k_alignment;
  if (!slot.memory || begin + size_bytes > slot.memory->size_bytes()) {
    // Copies already issued from this slot may still read it; the bytes they read are not needed
    // afterwards, so a larger slot starts where the old one ended (earlier stage() pointers die).
    wait(slot);
    const std::size_t old_size = slot.memory ? slot.memory->size_bytes() : 0;
    slot.memory = std::make_unique<PinnedHostMemory>(std::max({k_initial_slot_bytes, 2 * old_size, 2 * (begin + size_bytes)}));
  }
  slot.used = begin + size_bytes;
  return static_cast<char*>(slot.memory->data()) + begin;
}

void StepStaging::copy(CUdeviceptr dst, const void* staged, std::size_t size_bytes) {
  if (size_bytes == 0) return;
  Slot& slot = slots_[current_];
  check(driver().memcpy_htod_async(dst, staged, size_bytes, stream_.handle()), "cuMemcpyHtoDAsync");
  check(driver().event_record(slot.copied, stream_.handle()), "cuEventRecord");
  slot.pending = true;
}

}  // namespace flare::helios::cuda
