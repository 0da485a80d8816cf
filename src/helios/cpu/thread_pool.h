// A small fork-join thread pool for the CPU backend: parallel_for splits a range of task indices
// into contiguous chunks, one per worker, and returns when all are done. The calling thread takes
// part. Owned by one CpuBackend; calls must not overlap (the engine thread is the only caller).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace flare::helios::cpu {

class ThreadPool {
 public:
  explicit ThreadPool(int n_threads);  // n_threads <= 0: one per hardware thread
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int n_threads() const { return int(workers_.size()) + 1; }
  // Runs fn(begin, end) over [0, n) split into at most n_threads() contiguous chunks.
  void parallel_for(std::int64_t n, const std::function<void(std::int64_t, std::int64_t)>& fn);

 private:
  void worker_main(int index);
  std::vector<std::thread> workers_;
  std::mutex mutex_;
  std::condition_variable start_;
  std::condition_variable done_;
  const std::function<void(std::int64_t, std::int64_t)>* job_ = nullptr;
  std::int64_t job_size_ = 0;
  std::uint64_t generation_ = 0;
  int n_pending_ = 0;
  bool stopping_ = false;
};

}  // namespace flare::helios::cpu
