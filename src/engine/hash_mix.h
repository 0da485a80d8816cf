// A 64-bit finalizer (MurmurHash3's fmix64) for the engine's token hashes: prefix-cache block
// chains and history-draft n-grams.
#pragma once

#include <cstdint>

namespace flare::engine {

inline std::uint64_t hash_mix64(std::uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ull;
  return x ^ (x >> 33);
}

}  // namespace flare::engine
