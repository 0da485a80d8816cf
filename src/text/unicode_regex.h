// A compiled PCRE2 regular expression (UTF + Unicode properties, JIT) for tokenizer patterns:
// Split pre-tokenizers, Replace normalizers and decoders. Compiled once at load; matching is
// const and thread-safe (match data and JIT stack are per thread).
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace flare::text {

struct Span {
  size_t begin = 0;
  size_t end = 0;
};

// Which engine's \s a pattern was written for: Oniguruma (tokenizer.json patterns; \s is the
// White_Space property, with U+0085) or JavaScript (the built-in ByteLevel pattern as the
// reference runs it; \s has U+FEFF but not U+0085).
enum class RegexFlavour { oniguruma, javascript };

class Regex {
 public:
  // Compiles `pattern` (Oniguruma/Rust syntax as it appears in tokenizer.json; the common
  // subset PCRE2 shares), with \s as in `flavour`. Throws flare::Error naming the pattern when it
  // does not compile.
  explicit Regex(std::string_view pattern, RegexFlavour flavour = RegexFlavour::oniguruma);
  // A regex that matches `literal` exactly.
  static Regex literal(std::string_view literal);
  ~Regex();
  Regex(Regex&&) noexcept;
  Regex& operator=(Regex&&) noexcept;

  // Appends every non-overlapping match in `subject` (valid UTF-8) to `out`, left to right,
  // like JavaScript's matchAll: after an empty match the search moves on by one code point.
  void find_all(std::string_view subject, std::vector<Span>& out) const;
  // Replaces every match with `replacement` (taken literally).
  std::string replace_all(std::string_view subject, std::string_view replacement) const;
  const std::string& pattern() const { return pattern_; }

 private:
  struct Code;
  std::string pattern_;
  std::unique_ptr<Code> code_;
};

// How a Split pre-tokenizer turns matches into pieces (the tokenizers SplitDelimiterBehavior).
enum class SplitBehavior { removed, isolated, merged_with_previous, merged_with_next, contiguous };

// Turns the matches found in a piece of `length` bytes into the resulting pieces (byte spans),
// dropping empty ones. With `invert`, the matches are the pieces and the gaps the delimiters.
void split_by_matches(size_t length, const std::vector<Span>& matches, SplitBehavior behavior, bool invert,
                      std::vector<Span>& out);

}  // namespace flare::text
