// The CUDA driver through dlopen (see driver.h).
#include "helios/cuda/driver.h"

#include <string>
#include <string_view>

#include <dlfcn.h>

#include <mutex>

#include "common/error.h"

// The dlsym name of an entry point is its name after cuda.h's versioning macros
// (cuMemAlloc -> cuMemAlloc_v2), so stringize the expansion.
#define FLARE_CU_NAME_(x) #x
#define FLARE_CU_NAME(x) FLARE_CU_NAME_(x)

namespace flare::helios::cuda {
namespace {

struct LoadResult {
  Driver driver;
  std::string error;  // empty on success
};

template <typename Fn>
bool resolve(void* library, const char* symbol, Fn& out, std::string& error) {
  out = reinterpret_cast<Fn>(dlsym(library, symbol));
  if (!out) error = fmt::format("libcuda.so.1 lacks the entry point {}", symbol);
  return out != nullptr;
}

LoadResult load_driver() {
  LoadResult r;
  void* library = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!library) {
    const char* why = dlerror();
    r.error = fmt::format("no NVIDIA driver: {}", why ? why : "libcuda.so.1 cannot be opened");
    return r;
  }
  Driver& d = r.driver;
  bool ok = true;
#define FLARE_CU_RESOLVE(member, api) ok = ok && resolve(library, FLARE_CU_NAME(api), d.member, r.error)
  FLARE_CU_RESOLVE(init, cuInit);
  FLARE_CU_RESOLVE(driver_get_version, cuDriverGetVersion);
  FLARE_CU_RESOLVE(device_get_count, cuDeviceGetCount);
  FLARE_CU_RESOLVE(device_get, cuDeviceGet);
  FLARE_CU_RESOLVE(device_get_name, cuDeviceGetName);
  FLARE_CU_RESOLVE(device_get_attribute, cuDeviceGetAttribute);
  FLARE_CU_RESOLVE(device_total_mem, cuDeviceTotalMem);
  FLARE_CU_RESOLVE(primary_ctx_retain, cuDevicePrimaryCtxRetain);
  FLARE_CU_RESOLVE(primary_ctx_release, cuDevicePrimaryCtxRelease);
  FLARE_CU_RESOLVE(ctx_set_current, cuCtxSetCurrent);
  FLARE_CU_RESOLVE(mem_get_info, cuMemGetInfo);
  FLARE_CU_RESOLVE(mem_alloc, cuMemAlloc);
  FLARE_CU_RESOLVE(mem_free, cuMemFree);
  FLARE_CU_RESOLVE(memcpy_htod_async, cuMemcpyHtoDAsync);
  FLARE_CU_RESOLVE(memcpy_dtoh_async, cuMemcpyDtoHAsync);
  FLARE_CU_RESOLVE(memcpy_dtod_async, cuMemcpyDtoDAsync);
  FLARE_CU_RESOLVE(memset_d8_async, cuMemsetD8Async);
  FLARE_CU_RESOLVE(stream_create, cuStreamCreate);
  FLARE_CU_RESOLVE(stream_destroy, cuStreamDestroy);
  FLARE_CU_RESOLVE(stream_synchronize, cuStreamSynchronize);
  FLARE_CU_RESOLVE(module_load_data, cuModuleLoadData);
  FLARE_CU_RESOLVE(module_unload, cuModuleUnload);
  FLARE_CU_RESOLVE(module_get_function, cuModuleGetFunction);
  FLARE_CU_RESOLVE(launch_kernel, cuLaunchKernel);
  FLARE_CU_RESOLVE(func_set_attribute, cuFuncSetAttribute);
  FLARE_CU_RESOLVE(launch_kernel_ex, cuLaunchKernelEx);
  FLARE_CU_RESOLVE(occupancy_max_active_blocks, cuOccupancyMaxActiveBlocksPerMultiprocessor);
  FLARE_CU_RESOLVE(event_create, cuEventCreate);
  FLARE_CU_RESOLVE(event_destroy, cuEventDestroy);
  FLARE_CU_RESOLVE(event_record, cuEventRecord);
  FLARE_CU_RESOLVE(event_synchronize, cuEventSynchronize);
  FLARE_CU_RESOLVE(event_elapsed_time, cuEventElapsedTime);
  FLARE_CU_RESOLVE(stream_is_capturing, cuStreamIsCapturing);
  FLARE_CU_RESOLVE(stream_begin_capture, cuStreamBeginCapture);
  FLARE_CU_RESOLVE(stream_end_capture, cuStreamEndCapture);
  FLARE_CU_RESOLVE(graph_instantiate, cuGraphInstantiate);
  FLARE_CU_RESOLVE(graph_launch, cuGraphLaunch);
  FLARE_CU_RESOLVE(graph_get_nodes, cuGraphGetNodes);
  FLARE_CU_RESOLVE(graph_exec_destroy, cuGraphExecDestroy);
  FLARE_CU_RESOLVE(graph_destroy, cuGraphDestroy);
  FLARE_CU_RESOLVE(mem_host_alloc, cuMemHostAlloc);
  FLARE_CU_RESOLVE(mem_free_host, cuMemFreeHost);
  FLARE_CU_RESOLVE(mem_address_reserve, cuMemAddressReserve);
  FLARE_CU_RESOLVE(mem_address_free, cuMemAddressFree);
  FLARE_CU_RESOLVE(mem_create, cuMemCreate);
  FLARE_CU_RESOLVE(mem_release, cuMemRelease);
  FLARE_CU_RESOLVE(mem_map, cuMemMap);
  FLARE_CU_RESOLVE(mem_unmap, cuMemUnmap);
  FLARE_CU_RESOLVE(mem_set_access, cuMemSetAccess);
  FLARE_CU_RESOLVE(mem_get_allocation_granularity, cuMemGetAllocationGranularity);
  FLARE_CU_RESOLVE(ctx_synchronize, cuCtxSynchronize);
  FLARE_CU_RESOLVE(get_error_name, cuGetErrorName);
  FLARE_CU_RESOLVE(get_error_string, cuGetErrorString);
#undef FLARE_CU_RESOLVE
  if (!ok) return r;  // the library stays open: unloading a driver is never worth it
  d.tensor_map_encode_tiled =
      reinterpret_cast<decltype(d.tensor_map_encode_tiled)>(dlsym(library, FLARE_CU_NAME(cuTensorMapEncodeTiled)));
  d.profiler_start = reinterpret_cast<decltype(d.profiler_start)>(dlsym(library, FLARE_CU_NAME(cuProfilerStart)));
  d.profiler_stop = reinterpret_cast<decltype(d.profiler_stop)>(dlsym(library, FLARE_CU_NAME(cuProfilerStop)));
  const CUresult init = d.init(0);
  if (init != CUDA_SUCCESS) {
    const char* name = nullptr;
    d.get_error_name(init, &name);
    r.error = fmt::format("cuInit failed: {}", name ? name : "unknown error");
    return r;
  }
  d.driver_get_version(&d.version);
  return r;
}

const LoadResult& loaded() {
  static const LoadResult result = load_driver();  // thread-safe, immutable once built
  return result;
}

}  // namespace

const Driver& driver() {
  const LoadResult& r = loaded();
  if (!r.error.empty()) fail(ExitCode::failure, "CUDA driver unavailable: {}", r.error);
  return r.driver;
}

bool driver_available(std::string* reason) {
  const LoadResult& r = loaded();
  if (reason) *reason = r.error;
  return r.error.empty();
}

std::string error_text(CUresult result) {
  const LoadResult& r = loaded();
  const char* name = nullptr;
  const char* text = nullptr;
  if (r.driver.get_error_name) r.driver.get_error_name(result, &name);
  if (r.driver.get_error_string) r.driver.get_error_string(result, &text);
  if (!name) return fmt::format("CUresult {}", int(result));
  return text ? fmt::format("{} ({})", name, text) : std::string(name);
}

void check(CUresult result, std::string_view call) {
  if (result == CUDA_SUCCESS) return;
  const ExitCode code = result == CUDA_ERROR_OUT_OF_MEMORY ? ExitCode::capacity : ExitCode::failure;
  fail(code, "CUDA call {} failed: {}", call, error_text(result));
}

std::string DeviceInfo::arch() const { return fmt::format("sm_{}{}", compute_major, compute_minor); }

int device_count() {
  if (!driver_available()) return 0;
  int n = 0;
  if (driver().device_get_count(&n) != CUDA_SUCCESS) return 0;
  return n;
}

DeviceInfo device_info(int index) {
  const Driver& d = driver();
  const int n = device_count();
  if (index < 0 || index >= n) fail(ExitCode::usage, "CUDA device {} does not exist ({} visible)", index, n);
  CUdevice device = 0;
  check(d.device_get(&device, index), "cuDeviceGet");
  DeviceInfo info;
  info.index = index;
  char name[256] = {};
  check(d.device_get_name(name, sizeof name, device), "cuDeviceGetName");
  info.name = name;
  check(d.device_get_attribute(&info.compute_major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, device),
        "cuDeviceGetAttribute(compute capability major)");
  check(d.device_get_attribute(&info.compute_minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, device),
        "cuDeviceGetAttribute(compute capability minor)");
  check(d.device_get_attribute(&info.n_multiprocessors, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, device),
        "cuDeviceGetAttribute(multiprocessor count)");
  check(d.device_get_attribute(&info.max_shared_bytes_per_block, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN,
                               device),
        "cuDeviceGetAttribute(shared memory per block, opt-in)");
  int l2 = 0;
  check(d.device_get_attribute(&l2, CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE, device), "cuDeviceGetAttribute(L2 size)");
  info.l2_bytes = std::size_t(l2);
  check(d.device_total_mem(&info.total_bytes, device), "cuDeviceTotalMem");
  return info;
}

Context::Context(int device_index) : info_(device_info(device_index)) {
  const Driver& d = driver();
  check(d.device_get(&device_, device_index), "cuDeviceGet");
  check(d.primary_ctx_retain(&ctx_, device_), "cuDevicePrimaryCtxRetain");
  make_current();
}

Context::~Context() {
  if (ctx_) driver().primary_ctx_release(device_);
}

void Context::make_current() const { check(driver().ctx_set_current(ctx_), "cuCtxSetCurrent"); }

Stream::Stream() { check(driver().stream_create(&stream_, CU_STREAM_NON_BLOCKING), "cuStreamCreate"); }

Stream::~Stream() {
  if (stream_) driver().stream_destroy(stream_);
}

void Stream::synchronize() const { check(driver().stream_synchronize(stream_), "cuStreamSynchronize"); }

bool Stream::capturing() const {
  CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
  check(driver().stream_is_capturing(stream_, &status), "cuStreamIsCapturing");
  return status != CU_STREAM_CAPTURE_STATUS_NONE;
}

DeviceMemory::DeviceMemory(std::size_t size_bytes) : size_(size_bytes) {
  if (size_bytes == 0) return;
  const CUresult r = driver().mem_alloc(&ptr_, size_bytes);
  if (r == CUDA_ERROR_OUT_OF_MEMORY) {
    fail(ExitCode::capacity, "CUDA call cuMemAlloc failed: out of device memory allocating {} bytes", size_bytes);
  }
  check(r, "cuMemAlloc");
}

DeviceMemory::~DeviceMemory() {
  if (ptr_) driver().mem_free(ptr_);
}

void copy_to_device(CUdeviceptr dst, const void* src, std::size_t size_bytes, const Stream& stream) {
  if (size_bytes == 0) return;
  check(driver().memcpy_htod_async(dst, src, size_bytes, stream.handle()), "cuMemcpyHtoDAsync");
}

void copy_to_host(void* dst, CUdeviceptr src, std::size_t size_bytes, const Stream& stream) {
  if (size_bytes == 0) return;
  check(driver().memcpy_dtoh_async(dst, src, size_bytes, stream.handle()), "cuMemcpyDtoHAsync");
}

Module::Module(std::string name, const std::string& cubin) : name_(std::move(name)) {
  const CUresult r = driver().module_load_data(&module_, cubin.data());
  if (r != CUDA_SUCCESS) fail(ExitCode::failure, "CUDA call cuModuleLoadData failed for kernel {}: {}", name_, error_text(r));
}

Module::~Module() {
  if (module_) driver().module_unload(module_);
}

CUfunction Module::function(const char* entry) const {
  CUfunction f = nullptr;
  const CUresult r = driver().module_get_function(&f, module_, entry);
  if (r != CUDA_SUCCESS) {
    fail(ExitCode::failure, "CUDA call cuModuleGetFunction failed for {} in kernel {}: {}", entry, name_, error_text(r));
  }
  return f;
}

bool programmatic_launch(const DeviceInfo& device, DependentLaunch mode) {
  return mode == DependentLaunch::all && device.compute_major >= 9;
}

bool early_work_programmatic_launch(const DeviceInfo& device, DependentLaunch mode) {
  return mode != DependentLaunch::off && device.compute_major >= 9;
}

CUresult try_launch(CUfunction function, const LaunchShape& s, CUstream stream, void** args) {
  const bool cluster = s.cluster_x > 1 || s.cluster_y > 1;
  if (!s.overlap_previous && !cluster) {
    return driver().launch_kernel(function, s.grid_x, s.grid_y, s.grid_z, s.block_x, s.block_y, s.block_z,
                                  s.shared_bytes, stream, args, nullptr);
  }
  CUlaunchAttribute attributes[2]{};
  unsigned n_attributes = 0;
  if (s.overlap_previous) {
    attributes[n_attributes].id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
    attributes[n_attributes++].value.programmaticStreamSerializationAllowed = 1;
  }
  if (cluster) {
    attributes[n_attributes].id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
    attributes[n_attributes].value.clusterDim.x = s.cluster_x;
    attributes[n_attributes].value.clusterDim.y = s.cluster_y;
    attributes[n_attributes++].value.clusterDim.z = 1;
  }
  CUlaunchConfig config{};
  config.gridDimX = s.grid_x;
  config.gridDimY = s.grid_y;
  config.gridDimZ = s.grid_z;
  config.blockDimX = s.block_x;
  config.blockDimY = s.block_y;
  config.blockDimZ = s.block_z;
  config.sharedMemBytes = s.shared_bytes;
  config.hStream = stream;
  config.attrs = attributes;
  config.numAttrs = n_attributes;
  return driver().launch_kernel_ex(&config, function, args, nullptr);
}

void launch(CUfunction function, const LaunchShape& s, const Stream& stream, std::vector<void*> args,
            std::string_view kernel_name) {
  const CUresult r = try_launch(function, s, stream.handle(), args.data());
  if (r != CUDA_SUCCESS) fail(ExitCode::failure, "CUDA call cuLaunchKernel failed for {}: {}", kernel_name, error_text(r));
}

}  // namespace flare::helios::cuda
