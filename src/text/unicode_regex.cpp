// PCRE2 wrapper (see unicode_regex.h). Patterns compile with PCRE2_UTF | PCRE2_UCP so that \s,
// \w, \d and \p{..} follow Unicode like the Rust and JavaScript tokenizers; JIT where available.
#include "text/unicode_regex.h"

#include <pcre2.h>

#include "common/error.h"
#include "text/unicode.h"

namespace flare::text {

struct Regex::Code {
  pcre2_code* code = nullptr;
  bool jit = false;
  ~Code() { pcre2_code_free(code); }
};

namespace {

// Per-thread match state shared by all patterns: match data with room for the whole match and a
// JIT stack large enough for long whitespace runs under look-ahead.
struct ThreadMatchState {
  pcre2_match_data* data = nullptr;
  pcre2_jit_stack* stack = nullptr;
  pcre2_match_context* context = nullptr;
  ThreadMatchState() {
    data = pcre2_match_data_create(16, nullptr);
    stack = pcre2_jit_stack_create(32 * 1024, 16 * 1024 * 1024, nullptr);
    context = pcre2_match_context_create(nullptr);
    if (data == nullptr || stack == nullptr || context == nullptr) throw std::bad_alloc();
    pcre2_jit_stack_assign(context, nullptr, stack);
  }
  ~ThreadMatchState() {
    pcre2_match_context_free(context);
    pcre2_jit_stack_free(stack);
    pcre2_match_data_free(data);
  }
};

ThreadMatchState& thread_match_state() {
  thread_local ThreadMatchState state;
  return state;
}

// \s differs between engines: Oniguruma's (and the reference's, which rewrites tokenizer.json
// patterns into \p{White_Space}) is the White_Space property, including U+0085; a JavaScript regex
// literal's \s excludes U+0085 and includes U+FEFF. Spell the set out so that PCRE2's own
// definition does not matter: \s -> [set] (or the bare set inside a class), \S -> [^set]; the
// same for \w and \W. (\S and \W inside a class are left to PCRE2.)
constexpr std::string_view kOnigurumaSpace =
    "\\t\\n\\x{0B}\\f\\r\\x{20}\\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}\\x{202F}\\x{205F}\\x{3000}";
constexpr std::string_view kJavascriptSpace =
    "\\t\\n\\x{0B}\\f\\r\\x{20}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}\\x{202F}\\x{205F}\\x{3000}\\x{FEFF}";

// \w as the reference rewrites Oniguruma's: Alphabetic, marks, decimal digits, connector
// punctuation and the Latin-1 superscripts and fractions.
constexpr std::string_view kOnigurumaWord = "\\p{Alphabetic}\\p{M}\\p{Nd}\\p{Pc}\\x{B2}\\x{B3}\\x{B9}\\x{BC}-\\x{BE}";

std::string with_reference_classes(std::string_view pattern, std::string_view space_set, std::string_view word_set) {
  std::string out;
  out.reserve(pattern.size() + 16);
  int class_depth = 0;
  for (size_t i = 0; i < pattern.size(); ++i) {
    char c = pattern[i];
    if (c == '\\' && i + 1 < pattern.size()) {
      char next = pattern[++i];
      if (next == 's') {
        if (class_depth == 0) out.push_back('[');
        out.append(space_set);
        if (class_depth == 0) out.push_back(']');
      } else if (next == 'S' && class_depth == 0) {
        out.append("[^").append(space_set).append("]");
      } else if (next == 'w' && !word_set.empty()) {
        if (class_depth == 0) out.push_back('[');
        out.append(word_set);
        if (class_depth == 0) out.push_back(']');
      } else if (next == 'W' && class_depth == 0 && !word_set.empty()) {
        out.append("[^").append(word_set).append("]");
      } else {
        out.push_back(c);
        out.push_back(next);
      }
      continue;
    }
    if (c == '[') {
      // "[:alpha:]" inside a class is a POSIX class, not a nested one.
      if (class_depth > 0 && i + 1 < pattern.size() && pattern[i + 1] == ':') {
        size_t end = pattern.find(":]", i + 2);
        if (end != std::string_view::npos) {
          out.append(pattern.substr(i, end + 2 - i));
          i = end + 1;
          continue;
        }
      }
      out.push_back(c);
      if (class_depth == 0) {
        ++class_depth;
        // A ']' right after '[' or '[^' is a literal member.
        if (i + 1 < pattern.size() && pattern[i + 1] == '^') out.push_back(pattern[++i]);
        if (i + 1 < pattern.size() && pattern[i + 1] == ']') out.push_back(pattern[++i]);
      }
      continue;
    }
    if (c == ']' && class_depth > 0) --class_depth;
    out.push_back(c);
  }
  return out;
}

std::string escape_literal(std::string_view literal) {
  std::string out;
  for (char c : literal) {
    if (std::string_view("\\^$.|?*+()[]{}/-").find(c) != std::string_view::npos) out.push_back('\\');
    out.push_back(c);
  }
  return out;
}

}  // namespace

Regex::Regex(std::string_view pattern, RegexFlavour flavour) : pattern_(pattern), code_(std::make_unique<Code>()) {
  int error_code = 0;
  PCRE2_SIZE error_offset = 0;
  bool onig = flavour == RegexFlavour::oniguruma;
  std::string compiled =
      with_reference_classes(pattern, onig ? kOnigurumaSpace : kJavascriptSpace, onig ? kOnigurumaWord : "");
  code_->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(compiled.data()), compiled.size(),
                              PCRE2_UTF | PCRE2_UCP, &error_code, &error_offset, nullptr);
  if (code_->code == nullptr) {
    PCRE2_UCHAR message[256];
    pcre2_get_error_message(error_code, message, sizeof(message));
    fail_input("tokenizer regex {:?} does not compile at offset {}: {}", pattern_, error_offset,
               reinterpret_cast<const char*>(message));
  }
  code_->jit = pcre2_jit_compile(code_->code, PCRE2_JIT_COMPLETE) == 0;
}

Regex Regex::literal(std::string_view literal) { return Regex(escape_literal(literal)); }

Regex::~Regex() = default;
Regex::Regex(Regex&&) noexcept = default;
Regex& Regex::operator=(Regex&&) noexcept = default;

void Regex::find_all(std::string_view subject, std::vector<Span>& out) const {
  ThreadMatchState& state = thread_match_state();
  auto data = reinterpret_cast<PCRE2_SPTR>(subject.data());
  size_t start = 0;
  while (start <= subject.size()) {
    int rc = code_->jit ? pcre2_jit_match(code_->code, data, subject.size(), start, 0, state.data, state.context)
                        : pcre2_match(code_->code, data, subject.size(), start, PCRE2_NO_UTF_CHECK, state.data,
                                      state.context);
    if (rc == PCRE2_ERROR_NOMATCH) return;
    if (rc < 0) {
      PCRE2_UCHAR message[256];
      pcre2_get_error_message(rc, message, sizeof(message));
      fail_input("tokenizer regex {:?} failed on a {}-byte input: {}", pattern_, subject.size(),
                 reinterpret_cast<const char*>(message));
    }
    const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(state.data);
    Span match{ovector[0], ovector[1]};
    if (match.end < match.begin) match.end = match.begin;  // \K tricks: treat as empty
    out.push_back(match);
    if (match.end > match.begin) {
      start = match.end;
    } else {
      if (match.end >= subject.size()) return;
      start = match.end + utf8_sequence_bytes(static_cast<unsigned char>(subject[match.end]));
    }
  }
}

std::string Regex::replace_all(std::string_view subject, std::string_view replacement) const {
  std::vector<Span> matches;
  find_all(subject, matches);
  if (matches.empty()) return std::string(subject);
  std::string out;
  out.reserve(subject.size());
  size_t previous = 0;
  for (const Span& m : matches) {
    out.append(subject.substr(previous, m.begin - previous));
    out.append(replacement);
    previous = m.end;
  }
  out.append(subject.substr(previous));
  return out;
}

void split_by_matches(size_t length, const std::vector<Span>& matches, SplitBehavior behavior, bool invert,
                      std::vector<Span>& out) {
  // The whole piece as alternating (span, is_delimiter) parts, gaps included, empties skipped.
  struct Part {
    Span span;
    bool delimiter;
  };
  std::vector<Part> parts;
  parts.reserve(matches.size() * 2 + 1);
  size_t previous = 0;
  for (const Span& m : matches) {
    if (m.begin > previous) parts.push_back({{previous, m.begin}, invert});
    if (m.end > m.begin) parts.push_back({m, !invert});
    previous = m.end;
  }
  if (previous < length) parts.push_back({{previous, length}, invert});

  switch (behavior) {
    case SplitBehavior::isolated:
      for (const Part& p : parts) out.push_back(p.span);
      return;
    case SplitBehavior::removed:
      for (const Part& p : parts)
        if (!p.delimiter) out.push_back(p.span);
      return;
    case SplitBehavior::merged_with_previous: {
      size_t first = out.size();
      bool previous_delimiter = false;
      for (const Part& p : parts) {
        if (p.delimiter && !previous_delimiter && out.size() > first) {
          out.back().end = p.span.end;
        } else {
          out.push_back(p.span);
        }
        previous_delimiter = p.delimiter;
      }
      return;
    }
    case SplitBehavior::merged_with_next: {
      std::vector<Span> reversed;
      bool previous_delimiter = false;
      for (auto it = parts.rbegin(); it != parts.rend(); ++it) {
        if (it->delimiter && !previous_delimiter && !reversed.empty()) {
          reversed.back().begin = it->span.begin;
        } else {
          reversed.push_back(it->span);
        }
        previous_delimiter = it->delimiter;
      }
      out.insert(out.end(), reversed.rbegin(), reversed.rend());
      return;
    }
    case SplitBehavior::contiguous: {
      size_t first = out.size();
      bool previous_delimiter = false;
      for (const Part& p : parts) {
        if (p.delimiter && previous_delimiter && out.size() > first) {
          out.back().end = p.span.end;
        } else {
          out.push_back(p.span);
        }
        previous_delimiter = p.delimiter;
      }
      return;
    }
  }
}

}  // namespace flare::text
