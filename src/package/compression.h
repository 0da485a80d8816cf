// zstd compression of package payloads (executable images). Decompression is bounded: a frame
// must declare its content size, that size must not exceed the caller's limit, and the frame must
// decode to exactly that many bytes, so hostile bytes cannot make us allocate or write without
// bound.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace flare::package {

std::vector<std::byte> zstd_compress(std::string_view bytes, int level = 19);

// Throws flare::Error (input) naming `what` for a malformed, truncated, unsized or oversized frame.
std::string zstd_decompress(std::span<const std::byte> frame, std::uint64_t max_bytes, std::string_view what);

}  // namespace flare::package
