// The CUDA C++ kernel sources of src/helios/kernels/*.cu, embedded into the library at build time
// (cmake/FlareKernels.cmake generates their definitions), so a program needs no source tree to
// compile its kernels. Each source's name is its file name without ".cu"; its entry points are
// extern "C" functions named flare_<name>. Headers (*.cuh, named with the extension) hold what
// several parts of a module share; every compile sees all of them (#include "name.cuh").
#pragma once

#include <span>
#include <string_view>

namespace flare::helios::cuda {

// One kernel source: `name` identifies it in errors and logs ("rms_norm"); `source` is CUDA C++.
struct KernelSource {
  std::string_view name;
  std::string_view source;
};

// Every embedded kernel source, sorted by name.
std::span<const KernelSource> embedded_kernels();

// Every embedded header, sorted by name.
std::span<const KernelSource> embedded_kernel_headers();

// The embedded source called `name`; throws flare::Error (internal) when there is none.
const KernelSource& embedded_kernel(std::string_view name);

}  // namespace flare::helios::cuda
