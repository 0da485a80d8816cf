// Parsers and formatters for the sizes and lists users type: runtime memory limits
// (spec "Runtime memory limits"), byte sizes such as embedding cache sizes and the configured
// reserve, and GPU index lists. All reject malformed input with a usage error naming the value.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace flare {

inline constexpr std::uint64_t kKiB = 1024ull;
inline constexpr std::uint64_t kMiB = 1024ull * kKiB;
inline constexpr std::uint64_t kGiB = 1024ull * kMiB;
inline constexpr std::uint64_t kTiB = 1024ull * kGiB;

// --memory-limit: an occupied size (30G), a free-memory reserve (-30G, -0G), or a fraction of
// total memory in (0, 1] (0.8).
struct MemoryLimit {
  enum class Kind { occupied_bytes, reserve_bytes, fraction_of_total };
  Kind kind = Kind::occupied_bytes;
  std::uint64_t bytes = 0;  // occupied_bytes, reserve_bytes
  double fraction = 0.0;    // fraction_of_total
  bool operator==(const MemoryLimit&) const = default;
};

MemoryLimit parse_memory_limit(std::string_view text);

struct ByteSizeRules {
  bool allow_bare_zero = true;  // "0" without a suffix (disables a cache, an empty reserve)
};
// A size with a binary suffix (K, KB, KiB, M, G, T; any case), e.g. "1G", "2GiB", "1.5g".
std::uint64_t parse_byte_size(std::string_view text, ByteSizeRules rules = {});

// --gpus: "0", "0,1", "0-3", "0,2-3". Indices are distinct, ranges ascending.
std::vector<int> parse_gpu_list(std::string_view text);

// "73.6 GiB" (one decimal); "512 MiB" / "64 KiB" / "12 B" below a GiB.
std::string format_bytes(std::uint64_t bytes);
// "8,192"
std::string format_count(std::uint64_t value);
// "30G"-style text that parse_byte_size accepts, rounded up to a whole GiB (for suggested options).
std::string format_size_option(std::uint64_t bytes);

}  // namespace flare
