// Pinned, double-buffered staging of per-step inputs (the packed step descriptor, per-row rope
// tables): the host writes a step's inputs into pinned memory and enqueues asynchronous copies to
// their fixed device buffers, so that replaying a captured step costs those copies and one graph
// launch, with no host wait. Two slots alternate between steps; before a slot is rewritten the host
// waits on the event recorded after its last copy (issued two steps earlier, so normally long done),
// which keeps bytes still being read by an in-flight copy from being overwritten.
//
// Ownership: the CUDA backend owns one, on its stream; one engine thread uses it.
#pragma once

#include <cuda.h>

#include <array>
#include <cstddef>
#include <memory>

#include "helios/cuda/driver.h"
#include "helios/cuda/graph.h"

namespace flare::helios::cuda {

class StepStaging {
 public:
  explicit StepStaging(const Stream& stream);
  ~StepStaging();
  StepStaging(const StepStaging&) = delete;
  StepStaging& operator=(const StepStaging&) = delete;

  // Starts a step: switches to the other slot, once no copy from it is in flight.
  void next_step();
  // Pinned room for `size_bytes` of this step's inputs (16-byte aligned). Copy it before the next
  // stage() call, which may move the slot to a larger allocation.
  void* stage(std::size_t size_bytes);
  // Enqueues the copy of `size_bytes` staged at `staged` (a stage() pointer of this step) to `dst`.
  void copy(CUdeviceptr dst, const void* staged, std::size_t size_bytes);

 private:
  struct Slot {
    std::unique_ptr<PinnedHostMemory> memory;
    std::size_t used = 0;
    CUevent copied = nullptr;  // recorded after the slot's last copy
    bool pending = false;      // `copied` was recorded and not yet waited on
  };
  void wait(Slot& slot);

  const Stream& stream_;
  std::array<Slot, 2> slots_;
  std::size_t current_ = 0;
};

}  // namespace flare::helios::cuda
