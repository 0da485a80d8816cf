// CUDA graphs and pinned host memory (see graph.h).
#include "helios/cuda/graph.h"

#include "common/error.h"

namespace flare::helios::cuda {

GraphExec::GraphExec(CUgraph graph, std::size_t n_nodes) : graph_(graph), n_nodes_(n_nodes) {
  const CUresult r = driver().graph_instantiate(&exec_, graph_, 0);
  if (r != CUDA_SUCCESS) {
    driver().graph_destroy(graph_);
    check(r, "cuGraphInstantiate");
  }
}

GraphExec::~GraphExec() {
  if (exec_) driver().graph_exec_destroy(exec_);
  if (graph_) driver().graph_destroy(graph_);
}

void GraphExec::launch(const Stream& stream) const { check(driver().graph_launch(exec_, stream.handle()), "cuGraphLaunch"); }

StreamCapture::StreamCapture(const Stream& stream) : stream_(stream.handle()) {
  check(driver().stream_begin_capture(stream_, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL), "cuStreamBeginCapture");
  active_ = true;
}

StreamCapture::~StreamCapture() {
  if (!active_) return;
  CUgraph graph = nullptr;
  driver().stream_end_capture(stream_, &graph);  // a broken capture returns no graph, or a partial one
  if (graph) driver().graph_destroy(graph);
}

std::unique_ptr<GraphExec> StreamCapture::finish() {
  active_ = false;
  CUgraph graph = nullptr;
  const CUresult r = driver().stream_end_capture(stream_, &graph);
  if (r != CUDA_SUCCESS) {
    if (graph) driver().graph_destroy(graph);
    fail(ExitCode::failure, "CUDA graph capture failed: {} (an operation in the captured step waited on the host "
         "or used memory the capture cannot record)", error_text(r));
  }
  std::size_t n_nodes = 0;
  const CUresult counted = driver().graph_get_nodes(graph, nullptr, &n_nodes);
  if (counted != CUDA_SUCCESS) {
    driver().graph_destroy(graph);
    check(counted, "cuGraphGetNodes");
  }
  return std::make_unique<GraphExec>(graph, n_nodes);
}

PinnedHostMemory::PinnedHostMemory(std::size_t size_bytes) : size_(size_bytes) {
  if (size_bytes == 0) return;
  const CUresult r = driver().mem_host_alloc(&data_, size_bytes, 0);
  if (r == CUDA_ERROR_OUT_OF_MEMORY) {
    fail(ExitCode::capacity, "CUDA call cuMemHostAlloc failed: out of pinned host memory allocating {} bytes", size_bytes);
  }
  check(r, "cuMemHostAlloc");
}

PinnedHostMemory::~PinnedHostMemory() {
  if (data_) driver().mem_free_host(data_);
}

}  // namespace flare::helios::cuda
