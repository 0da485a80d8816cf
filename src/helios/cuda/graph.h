// CUDA graphs and pinned host memory: RAII owners over the driver entry points (driver.h) that a
// captured step needs. A StreamCapture records what is enqueued on a stream between its
// construction and finish() into an instantiated graph (GraphExec), without running it; launch()
// replays the whole recording as one launch. PinnedHostMemory is page-locked host memory, the only
// source from which a host-to-device copy is truly asynchronous (and may be issued right before a
// graph launch without the driver staging it first).
//
// Ownership: created and used by the engine thread that owns the stream (see driver.h).
#pragma once

#include <cuda.h>

#include <cstddef>
#include <memory>

#include "helios/cuda/driver.h"

namespace flare::helios::cuda {

// An instantiated graph (cuGraphInstantiate of a captured CUgraph), launched on a stream.
class GraphExec {
 public:
  GraphExec(CUgraph graph, std::size_t n_nodes);  // takes ownership of `graph`
  ~GraphExec();
  GraphExec(const GraphExec&) = delete;
  GraphExec& operator=(const GraphExec&) = delete;

  void launch(const Stream& stream) const;
  std::size_t n_nodes() const { return n_nodes_; }  // kernels and copies recorded

 private:
  CUgraph graph_ = nullptr;
  CUgraphExec exec_ = nullptr;
  std::size_t n_nodes_ = 0;
};

// Records the work enqueued on `stream` from construction until finish(). The capture is
// thread-local: other threads' CUDA calls are not disturbed, and calls on this thread that would
// make the host wait on the stream (synchronize, a copy to pageable memory) fail the capture.
// Destroying an unfinished capture (an exception on the way) ends it and discards the recording.
class StreamCapture {
 public:
  explicit StreamCapture(const Stream& stream);
  ~StreamCapture();
  StreamCapture(const StreamCapture&) = delete;
  StreamCapture& operator=(const StreamCapture&) = delete;

  std::unique_ptr<GraphExec> finish();  // ends the capture and instantiates the recording

 private:
  CUstream stream_ = nullptr;
  bool active_ = false;
};

// cuMemHostAlloc'ed (page-locked) host memory; size 0 allocates nothing.
class PinnedHostMemory {
 public:
  explicit PinnedHostMemory(std::size_t size_bytes);
  ~PinnedHostMemory();
  PinnedHostMemory(const PinnedHostMemory&) = delete;
  PinnedHostMemory& operator=(const PinnedHostMemory&) = delete;

  void* data() const { return data_; }
  std::size_t size_bytes() const { return size_; }

 private:
  void* data_ = nullptr;
  std::size_t size_ = 0;
};

}  // namespace flare::helios::cuda
