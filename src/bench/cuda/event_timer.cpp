#include "bench/cuda/event_timer.h"

#include <chrono>
#include <vector>

namespace flare::bench::cuda {

using helios::cuda::check;
using helios::cuda::driver;

Event::Event() { check(driver().event_create(&event_, CU_EVENT_DEFAULT), "cuEventCreate"); }

Event::~Event() {
  if (event_) driver().event_destroy(event_);
}

void Event::record(const helios::cuda::Stream& stream) { check(driver().event_record(event_, stream.handle()), "cuEventRecord"); }

void Event::synchronize() const { check(driver().event_synchronize(event_), "cuEventSynchronize"); }

double elapsed_ms(const Event& start, const Event& stop) {
  float ms = 0;
  check(driver().event_elapsed_time(&ms, start.handle(), stop.handle()), "cuEventElapsedTime");
  return double(ms);
}

Timing time_runs(const helios::cuda::Stream& stream, int warmup, int repetitions, const std::function<void()>& enqueue) {
  using Clock = std::chrono::steady_clock;
  for (int i = 0; i < warmup; ++i) enqueue();
  stream.synchronize();
  const std::size_t n = std::size_t(repetitions);
  std::vector<Event> starts(n), stops(n);
  std::vector<double> host_ms;
  for (std::size_t i = 0; i < starts.size(); ++i) {
    starts[i].record(stream);
    const auto t0 = Clock::now();
    enqueue();
    host_ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
    stops[i].record(stream);
  }
  stream.synchronize();
  std::vector<double> samples;
  for (std::size_t i = 0; i < starts.size(); ++i) samples.push_back(elapsed_ms(starts[i], stops[i]));
  return timing_of(std::move(samples), std::move(host_ms));
}

}  // namespace flare::bench::cuda
