#include "package/compression.h"

#include <zstd.h>

#include "common/error.h"

namespace flare::package {

std::vector<std::byte> zstd_compress(std::string_view bytes, int level) {
  std::vector<std::byte> out(ZSTD_compressBound(bytes.size()));
  const std::size_t n = ZSTD_compress(out.data(), out.size(), bytes.data(), bytes.size(), level);
  if (ZSTD_isError(n)) fail(ExitCode::failure, "zstd compression failed: {}", ZSTD_getErrorName(n));
  out.resize(n);
  return out;
}

std::string zstd_decompress(std::span<const std::byte> frame, std::uint64_t max_bytes, std::string_view what) {
  const unsigned long long size = ZSTD_getFrameContentSize(frame.data(), frame.size());
  if (size == ZSTD_CONTENTSIZE_ERROR) fail_input("{}: not a zstd frame", what);
  if (size == ZSTD_CONTENTSIZE_UNKNOWN) fail_input("{}: zstd frame does not declare its size", what);
  if (size > max_bytes) fail_input("{}: zstd frame declares {} bytes, more than the {} expected", what, size, max_bytes);
  const std::size_t frame_size = ZSTD_findFrameCompressedSize(frame.data(), frame.size());
  if (ZSTD_isError(frame_size) || frame_size != frame.size())
    fail_input("{}: zstd data is truncated or has trailing bytes", what);
  std::string out(static_cast<std::size_t>(size), '\0');
  const std::size_t n = ZSTD_decompress(out.data(), out.size(), frame.data(), frame.size());
  if (ZSTD_isError(n)) fail_input("{}: zstd data is corrupt ({})", what, ZSTD_getErrorName(n));
  if (n != size) fail_input("{}: zstd frame decoded to {} bytes, declared {}", what, n, size);
  return out;
}

}  // namespace flare::package
