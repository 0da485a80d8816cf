// Fork-join thread pool (see thread_pool.h).
#include "helios/cpu/thread_pool.h"

#include <algorithm>

namespace flare::helios::cpu {
namespace {

std::pair<std::int64_t, std::int64_t> chunk(std::int64_t n, int n_chunks, int index) {
  const std::int64_t base = n / n_chunks;
  const std::int64_t extra = n % n_chunks;
  const std::int64_t begin = index * base + std::min<std::int64_t>(index, extra);
  return {begin, begin + base + (index < extra ? 1 : 0)};
}

}  // namespace

ThreadPool::ThreadPool(int n_threads) {
  if (n_threads <= 0) n_threads = int(std::max(1u, std::thread::hardware_concurrency()));
  for (int i = 1; i < n_threads; ++i) workers_.emplace_back([this, i] { worker_main(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  start_.notify_all();
  for (auto& worker : workers_) worker.join();
}

void ThreadPool::worker_main(int index) {
  std::uint64_t seen = 0;
  for (;;) {
    const std::function<void(std::int64_t, std::int64_t)>* job;
    std::int64_t size;
    {
      std::unique_lock lock(mutex_);
      start_.wait(lock, [&] { return stopping_ || generation_ != seen; });
      if (stopping_) return;
      seen = generation_;
      job = job_;
      size = job_size_;
    }
    auto [begin, end] = chunk(size, n_threads(), index);
    if (begin < end) (*job)(begin, end);
    {
      std::lock_guard lock(mutex_);
      if (--n_pending_ == 0) done_.notify_one();
    }
  }
}

void ThreadPool::parallel_for(std::int64_t n, const std::function<void(std::int64_t, std::int64_t)>& fn) {
  if (n <= 0) return;
  if (workers_.empty() || n == 1) {
    fn(0, n);
    return;
  }
  {
    std::lock_guard lock(mutex_);
    job_ = &fn;
    job_size_ = n;
    n_pending_ = int(workers_.size());
    ++generation_;
  }
  start_.notify_all();
  auto [begin, end] = chunk(n, n_threads(), 0);
  if (begin < end) fn(begin, end);
  std::unique_lock lock(mutex_);
  done_.wait(lock, [&] { return n_pending_ == 0; });
}

}  // namespace flare::helios::cpu
