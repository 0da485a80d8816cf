// CUDA events (driver API) for timing work on a stream, and a harness that times repeated runs of
// enqueued work. Runs are enqueued back to back without host waits, so a run's time is the
// device's time for it, including any wait for the host to launch its kernels (what a step costs
// without CUDA graphs). Owned by the thread that owns the backend's context.
#pragma once

#include <cuda.h>

#include <functional>

#include "bench/bench_report.h"
#include "helios/cuda/driver.h"

namespace flare::bench::cuda {

class Event {
 public:
  Event();
  ~Event();
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  Event(Event&& other) noexcept : event_(other.event_) { other.event_ = nullptr; }

  void record(const helios::cuda::Stream& stream);
  void synchronize() const;
  CUevent handle() const { return event_; }

 private:
  CUevent event_ = nullptr;
};

// Milliseconds between two recorded (and completed) events.
double elapsed_ms(const Event& start, const Event& stop);

// Runs `enqueue` `warmup` times, waits, then times `repetitions` runs (one event pair each) and
// records the host time each enqueue took.
Timing time_runs(const helios::cuda::Stream& stream, int warmup, int repetitions, const std::function<void()>& enqueue);

}  // namespace flare::bench::cuda
