// Sets of Unicode code points (what a regular-expression class or a JSON string character
// matches) and their UTF-8 encoding as grammar alternatives of byte sets.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "grammar/grammar.h"

namespace flare::grammar {

constexpr std::uint32_t kMaxCodePoint = 0x10FFFF;

class CodePointSet {
 public:
  using Range = std::pair<std::uint32_t, std::uint32_t>;  // inclusive

  static CodePointSet of(std::uint32_t c) { return range(c, c); }
  static CodePointSet range(std::uint32_t first, std::uint32_t last);
  static CodePointSet all();  // every scalar value (surrogates excluded)

  void add(std::uint32_t first, std::uint32_t last);
  void add(const CodePointSet& other);
  CodePointSet complement() const;  // within all()
  CodePointSet minus(const CodePointSet& other) const;
  bool contains(std::uint32_t c) const;
  bool empty() const { return ranges_.empty(); }
  const std::vector<Range>& ranges() const { return ranges_; }  // sorted, disjoint, not adjacent

 private:
  void normalize();
  std::vector<Range> ranges_;
};

// The UTF-8 encodings of the set's code points, as alternatives of byte-set sequences (at most one
// byte set per byte position); an empty set yields no alternative.
std::vector<Sequence> utf8_alternatives(GrammarBuilder& builder, const CodePointSet& set);

// Appends the UTF-8 bytes of `c` to `out`.
void append_utf8(std::uint32_t c, std::string& out);

}  // namespace flare::grammar
