// Added-token matching (see added_tokens.h).
#include "text/added_tokens.h"

#include <utf8proc.h>

#include "text/unicode.h"

namespace flare::text {
namespace {

bool is_word_char(char32_t cp) {
  if (cp < 0x80) return (cp >= '0' && cp <= '9') || (cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z') || cp == '_';
  auto cat = utf8proc_category(static_cast<utf8proc_int32_t>(cp));
  return (cat >= UTF8PROC_CATEGORY_LU && cat <= UTF8PROC_CATEGORY_LO) ||
         (cat >= UTF8PROC_CATEGORY_MN && cat <= UTF8PROC_CATEGORY_ME) || cat == UTF8PROC_CATEGORY_ND ||
         cat == UTF8PROC_CATEGORY_PC;
}

char32_t code_point_before(std::string_view text, size_t pos) {
  size_t start = pos - 1;
  while (start > 0 && (static_cast<unsigned char>(text[start]) & 0xC0) == 0x80) --start;
  return utf8_next(text, start);
}

size_t trailing_whitespace_start(std::string_view text) {
  size_t end = text.size();
  while (end > 0) {
    size_t start = end - 1;
    while (start > 0 && (static_cast<unsigned char>(text[start]) & 0xC0) == 0x80) --start;
    size_t probe = start;
    if (!unicode_is_whitespace(utf8_next(text, probe))) break;
    end = start;
  }
  return end;
}

size_t leading_whitespace_end(std::string_view text) {
  size_t pos = 0;
  while (pos < text.size()) {
    size_t next = pos;
    if (!unicode_is_whitespace(utf8_next(text, next))) break;
    pos = next;
  }
  return pos;
}

}  // namespace

AddedTokenMatcher::AddedTokenMatcher(std::vector<std::string> patterns, std::vector<AddedToken> tokens)
    : tokens_(std::move(tokens)), patterns_(std::move(patterns)) {
  nodes_.emplace_back();
  for (size_t i = 0; i < patterns_.size(); ++i) {
    const std::string& pattern = patterns_[i];
    if (pattern.empty()) continue;
    first_byte_[static_cast<unsigned char>(pattern[0])] = true;
    int32_t node = 0;
    for (unsigned char c : pattern) {
      int32_t child = -1;
      for (auto [byte, index] : nodes_[static_cast<size_t>(node)].children) {
        if (byte == c) child = index;
      }
      if (child < 0) {
        child = static_cast<int32_t>(nodes_.size());
        nodes_[static_cast<size_t>(node)].children.emplace_back(c, child);
        nodes_.emplace_back();
      }
      node = child;
    }
    // The first token with a given content wins, like a map keyed by content.
    if (nodes_[static_cast<size_t>(node)].token < 0) nodes_[static_cast<size_t>(node)].token = static_cast<int32_t>(i);
  }
}

std::pair<int32_t, size_t> AddedTokenMatcher::match_at(std::string_view text, size_t pos) const {
  int32_t node = 0;
  std::pair<int32_t, size_t> best{-1, 0};
  for (size_t j = pos; j < text.size(); ++j) {
    auto c = static_cast<unsigned char>(text[j]);
    int32_t child = -1;
    for (auto [byte, index] : nodes_[static_cast<size_t>(node)].children) {
      if (byte == c) {
        child = index;
        break;
      }
    }
    if (child < 0) break;
    node = child;
    int32_t token = nodes_[static_cast<size_t>(node)].token;
    if (token < 0) continue;
    if (tokens_[static_cast<size_t>(token)].single_word) {
      bool before_ok = pos == 0 || !is_word_char(code_point_before(text, pos));
      size_t after = j + 1;
      bool after_ok = after >= text.size() || !is_word_char(utf8_next(text, after));
      if (!before_ok || !after_ok) continue;
    }
    best = {token, j + 1 - pos};
  }
  return best;
}

void AddedTokenMatcher::split(std::string_view text, std::vector<TextSection>& out) const {
  size_t first = out.size();
  size_t start = 0;
  for (size_t i = 0; i < text.size();) {
    if (!first_byte_[static_cast<unsigned char>(text[i])]) {
      ++i;
      continue;
    }
    auto [token, length] = match_at(text, i);
    if (token < 0) {
      ++i;
      continue;
    }
    if (i > start) out.push_back({text.substr(start, i - start), -1});
    out.push_back({text.substr(i, length), token});
    i += length;
    start = i;
  }
  if (start < text.size()) out.push_back({text.substr(start), -1});
  // lstrip / rstrip: the token swallows the whitespace beside it.
  for (size_t k = first; k < out.size(); ++k) {
    if (out[k].token < 0) continue;
    const AddedToken& t = tokens_[static_cast<size_t>(out[k].token)];
    if (t.lstrip && k > first && out[k - 1].token < 0) {
      out[k - 1].text = out[k - 1].text.substr(0, trailing_whitespace_start(out[k - 1].text));
    }
    if (t.rstrip && k + 1 < out.size() && out[k + 1].token < 0) {
      out[k + 1].text = out[k + 1].text.substr(leading_whitespace_end(out[k + 1].text));
    }
  }
  size_t kept = first;
  for (size_t k = first; k < out.size(); ++k) {
    if (out[k].token >= 0 || !out[k].text.empty()) out[kept++] = out[k];
  }
  out.resize(kept);
}

}  // namespace flare::text
