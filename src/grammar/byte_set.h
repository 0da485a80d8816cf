// A set of byte values: what one grammar element matches at one position.
#pragma once

#include <array>
#include <cstdint>

namespace flare::grammar {

class ByteSet {
 public:
  constexpr ByteSet() = default;
  static constexpr ByteSet of(std::uint8_t byte) {
    ByteSet set;
    set.add(byte);
    return set;
  }
  static constexpr ByteSet range(std::uint8_t first, std::uint8_t last) {
    ByteSet set;
    set.add_range(first, last);
    return set;
  }

  constexpr void add(std::uint8_t byte) { words_[byte >> 6] |= std::uint64_t{1} << (byte & 63); }
  constexpr void add_range(std::uint8_t first, std::uint8_t last) {
    for (unsigned b = first; b <= last; ++b) add(static_cast<std::uint8_t>(b));
  }
  constexpr void add(const ByteSet& other) {
    for (int i = 0; i < 4; ++i) words_[i] |= other.words_[i];
  }
  constexpr void remove(const ByteSet& other) {
    for (int i = 0; i < 4; ++i) words_[i] &= ~other.words_[i];
  }
  constexpr bool contains(std::uint8_t byte) const { return (words_[byte >> 6] >> (byte & 63)) & 1; }
  constexpr bool empty() const { return (words_[0] | words_[1] | words_[2] | words_[3]) == 0; }
  constexpr bool operator==(const ByteSet&) const = default;
  const std::array<std::uint64_t, 4>& words() const { return words_; }

 private:
  std::array<std::uint64_t, 4> words_{};
};

}  // namespace flare::grammar
