// Executable images in a package (GPU targets): compiled kernels and tuning tables, each stored
// zstd-compressed in its own EXECUTABLE payload and listed in the signed manifest by the key the
// runtime asks for. Identical images share one blob in the model cache (payloads are
// content-addressed), so exports for one architecture deduplicate their kernels.
#pragma once

#include <map>
#include <string>

#include "package/package.h"

namespace flare::package {

inline constexpr std::uint64_t kMaxExecutableBytes = 256ull << 20;
// The key of the GEMM algorithm table (helios/gemm_tuning.h) among a package's executables.
inline constexpr const char* kGemmTuningKey = "gemm-tuning";

// Adds one payload per image ("<prefix>/<key stem>-<hash16>") and its manifest entry.
// The name starts with the key's first word (e.g. the kernel's source name), for readability.
void add_executables(PackageBuilder& builder, const std::map<std::string, std::string>& images,
                     const std::string& prefix);

// Every image the manifest lists, decompressed and checked against its declared size
// (requires check_layout()). Throws flare::Error (input) for a missing or malformed image.
std::map<std::string, std::string> read_executables(const Package& pkg);

}  // namespace flare::package
