// Integer ranges as digit grammars (integer_range.h): the classic split of [a, b] into ranges
// that share a digit count, then into products of digit classes.
#include "grammar/integer_range.h"

#include <string>

namespace flare::grammar {
namespace {

class RangeEmitter {
 public:
  explicit RangeEmitter(GrammarBuilder& builder) : b_(builder) {}

  Element digit(char first, char last) { return b_.bytes(ByteSet::range(std::uint8_t(first), std::uint8_t(last))); }

  // Decimal texts of equal length n, from a to b (a <= b, as strings of n digits).
  void same_length(const std::string& a, const std::string& b, Sequence prefix, std::vector<Sequence>& out) {
    const std::size_t n = a.size();
    if (n == 0) {
      out.push_back(std::move(prefix));
      return;
    }
    if (a[0] == b[0]) {
      prefix.push_back(digit(a[0], a[0]));
      same_length(a.substr(1), b.substr(1), std::move(prefix), out);
      return;
    }
    const std::string rest_a = a.substr(1), rest_b = b.substr(1);
    const bool low_full = rest_a.find_first_not_of('0') == std::string::npos;
    const bool high_full = rest_b.find_first_not_of('9') == std::string::npos;
    char first = a[0], last = b[0];
    if (!low_full) {
      Sequence p = prefix;
      p.push_back(digit(a[0], a[0]));
      same_length(rest_a, std::string(n - 1, '9'), std::move(p), out);
      ++first;
    }
    if (!high_full) --last;
    if (first <= last) {
      Sequence p = prefix;
      p.push_back(digit(first, last));
      for (std::size_t i = 1; i < n; ++i) p.push_back(digit('0', '9'));
      out.push_back(std::move(p));
    }
    if (!high_full) {
      Sequence p = prefix;
      p.push_back(digit(b[0], b[0]));
      same_length(std::string(n - 1, '0'), rest_b, std::move(p), out);
    }
  }

  // Non-negative integers in [lo, hi] (hi absent: up to kMaxOpenDigits digits).
  void non_negative(std::uint64_t lo, std::optional<std::uint64_t> hi, std::vector<Sequence>& out) {
    const std::string low = std::to_string(lo);
    const std::size_t max_digits = hi ? std::to_string(*hi).size() : kMaxOpenDigits;
    for (std::size_t d = low.size(); d <= max_digits; ++d) {
      const std::string first = d == low.size() ? low : (d == 1 ? std::string("0") : "1" + std::string(d - 1, '0'));
      std::string last(d, '9');
      if (hi && d == max_digits) last = std::to_string(*hi);
      if (first.size() != d || (hi && last.size() == d && first > last)) continue;
      same_length(first, last, {}, out);
    }
  }

 private:
  GrammarBuilder& b_;
};

}  // namespace

Sequence integer_range(GrammarBuilder& builder, std::optional<std::int64_t> min, std::optional<std::int64_t> max) {
  RangeEmitter emit(builder);
  std::vector<Sequence> alternatives;
  // Negative part: "-" then the magnitudes in [max(1, -max), -min].
  if (!min || *min < 0) {
    if (!max || *max < 0) {
      const std::uint64_t low = max ? std::uint64_t(-(*max + 1)) + 1 : 1;  // -max without overflow
      std::optional<std::uint64_t> high;
      if (min) high = std::uint64_t(-(*min + 1)) + 1;
      std::vector<Sequence> magnitudes;
      emit.non_negative(low, high, magnitudes);
      if (!magnitudes.empty()) {
        Sequence s = builder.literal("-");
        s.push_back(builder.choice(std::move(magnitudes)));
        alternatives.push_back(std::move(s));
      }
    } else {
      std::optional<std::uint64_t> high;
      if (min) high = std::uint64_t(-(*min + 1)) + 1;
      std::vector<Sequence> magnitudes;
      emit.non_negative(1, high, magnitudes);
      Sequence s = builder.literal("-");
      s.push_back(builder.choice(std::move(magnitudes)));
      alternatives.push_back(std::move(s));
    }
  }
  // Non-negative part: [max(0, min), max].
  if (!max || *max >= 0) {
    const std::uint64_t low = min && *min > 0 ? std::uint64_t(*min) : 0;
    std::optional<std::uint64_t> high;
    if (max) high = std::uint64_t(*max);
    emit.non_negative(low, high, alternatives);
  }
  return {builder.choice(std::move(alternatives))};
}

}  // namespace flare::grammar
