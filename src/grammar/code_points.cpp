// CodePointSet and its UTF-8 byte-range encoding (code_points.h).
#include "grammar/code_points.h"

#include <algorithm>
#include <string>

namespace flare::grammar {

CodePointSet CodePointSet::range(std::uint32_t first, std::uint32_t last) {
  CodePointSet set;
  set.add(first, last);
  return set;
}

CodePointSet CodePointSet::all() {
  CodePointSet set;
  set.add(0, kMaxCodePoint);
  return set;
}

void CodePointSet::add(std::uint32_t first, std::uint32_t last) {
  if (first > last) return;
  last = std::min(last, kMaxCodePoint);
  // Surrogates are not scalar values: UTF-8 never encodes them.
  if (first <= 0xDFFF && last >= 0xD800) {
    if (first < 0xD800) ranges_.emplace_back(first, 0xD7FF);
    if (last > 0xDFFF) ranges_.emplace_back(0xE000, last);
  } else {
    ranges_.emplace_back(first, last);
  }
  normalize();
}

void CodePointSet::add(const CodePointSet& other) {
  ranges_.insert(ranges_.end(), other.ranges_.begin(), other.ranges_.end());
  normalize();
}

void CodePointSet::normalize() {
  std::sort(ranges_.begin(), ranges_.end());
  std::vector<Range> merged;
  for (const auto& r : ranges_) {
    if (!merged.empty() && r.first <= merged.back().second + 1) {
      merged.back().second = std::max(merged.back().second, r.second);
    } else {
      merged.push_back(r);
    }
  }
  ranges_ = std::move(merged);
}

CodePointSet CodePointSet::complement() const { return all().minus(*this); }

CodePointSet CodePointSet::minus(const CodePointSet& other) const {
  CodePointSet out;
  for (auto [first, last] : ranges_) {
    std::uint64_t next = first;
    for (const auto& [o_first, o_last] : other.ranges_) {
      if (o_last < next) continue;
      if (o_first > last) break;
      if (o_first > next) out.ranges_.emplace_back(std::uint32_t(next), o_first - 1);
      next = std::uint64_t(o_last) + 1;
    }
    if (next <= last) out.ranges_.emplace_back(std::uint32_t(next), last);
  }
  out.normalize();
  return out;
}

bool CodePointSet::contains(std::uint32_t c) const {
  auto it = std::upper_bound(ranges_.begin(), ranges_.end(), Range{c, 0xFFFFFFFFu});
  return it != ranges_.begin() && std::prev(it)->second >= c;
}

void append_utf8(std::uint32_t c, std::string& out) {
  if (c < 0x80) {
    out += char(c);
  } else if (c < 0x800) {
    out += char(0xC0 | (c >> 6));
    out += char(0x80 | (c & 0x3F));
  } else if (c < 0x10000) {
    out += char(0xE0 | (c >> 12));
    out += char(0x80 | ((c >> 6) & 0x3F));
    out += char(0x80 | (c & 0x3F));
  } else {
    out += char(0xF0 | (c >> 18));
    out += char(0x80 | ((c >> 12) & 0x3F));
    out += char(0x80 | ((c >> 6) & 0x3F));
    out += char(0x80 | (c & 0x3F));
  }
}

namespace {

std::size_t utf8_length(std::uint32_t c) { return c < 0x80 ? 1 : c < 0x800 ? 2 : c < 0x10000 ? 3 : 4; }

// [first, last] share one UTF-8 length; emits products of byte ranges covering exactly them.
void split_same_length(GrammarBuilder& builder, std::uint32_t first, std::uint32_t last, std::size_t n,
                       std::vector<Sequence>& out) {
  for (std::size_t i = 1; i < n; ++i) {
    const std::uint32_t low_mask = (1u << (6 * i)) - 1;  // the i trailing continuation bytes
    if ((first & ~low_mask) != (last & ~low_mask)) {
      if ((first & low_mask) != 0) {
        split_same_length(builder, first, first | low_mask, n, out);
        split_same_length(builder, (first | low_mask) + 1, last, n, out);
        return;
      }
      if ((last & low_mask) != low_mask) {
        split_same_length(builder, first, (last & ~low_mask) - 1, n, out);
        split_same_length(builder, last & ~low_mask, last, n, out);
        return;
      }
    }
  }
  std::string a, b;
  append_utf8(first, a);
  append_utf8(last, b);
  Sequence sequence;
  for (std::size_t k = 0; k < n; ++k) {
    sequence.push_back(builder.bytes(ByteSet::range(std::uint8_t(a[k]), std::uint8_t(b[k]))));
  }
  out.push_back(std::move(sequence));
}

}  // namespace

std::vector<Sequence> utf8_alternatives(GrammarBuilder& builder, const CodePointSet& set) {
  std::vector<Sequence> out;
  ByteSet ascii;
  static constexpr std::uint32_t kLengthEnds[] = {0x7F, 0x7FF, 0xFFFF, kMaxCodePoint};
  for (auto [first, last] : set.ranges()) {
    while (first <= last) {
      const std::size_t n = utf8_length(first);
      const std::uint32_t end = std::min(last, kLengthEnds[n - 1]);
      if (n == 1) {
        ascii.add_range(std::uint8_t(first), std::uint8_t(end));
      } else {
        split_same_length(builder, first, end, n, out);
      }
      if (end == kMaxCodePoint) break;
      first = end + 1;
    }
  }
  if (!ascii.empty()) out.insert(out.begin(), Sequence{builder.bytes(ascii)});
  return out;
}

}  // namespace flare::grammar
