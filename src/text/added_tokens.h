// Added tokens of tokenizer.json ("added_tokens"): special and non-special tokens matched in
// the text before the model sees it. A byte trie finds the leftmost-longest match at each
// position (the reference's behaviour); lstrip / rstrip absorb neighbouring whitespace and
// single_word only accepts matches that are not inside a word. Built at load, then const.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace flare::text {

struct AddedToken {
  std::string content;
  int32_t id = 0;
  bool special = false;
  bool lstrip = false;
  bool rstrip = false;
  bool single_word = false;
  bool normalized = false;
};

// A piece of text between matches (token < 0) or a matched added token (index into the list
// the matcher was built from).
struct TextSection {
  std::string_view text;
  int32_t token = -1;
};

class AddedTokenMatcher {
 public:
  AddedTokenMatcher() = default;
  // `patterns[i]` is matched and reported as section token `i`; `tokens[i]` gives its flags.
  AddedTokenMatcher(std::vector<std::string> patterns, std::vector<AddedToken> tokens);
  bool empty() const { return tokens_.empty(); }
  // Splits `text` into sections, in order; gaps made empty by stripping are dropped.
  void split(std::string_view text, std::vector<TextSection>& out) const;
  const AddedToken& token(int32_t index) const { return tokens_[static_cast<size_t>(index)]; }

 private:
  struct Node {
    std::vector<std::pair<unsigned char, int32_t>> children;
    int32_t token = -1;
  };
  // Longest acceptable match starting at `pos`: (token index, length) or (-1, 0).
  std::pair<int32_t, size_t> match_at(std::string_view text, size_t pos) const;

  std::vector<AddedToken> tokens_;
  std::vector<std::string> patterns_;
  std::vector<Node> nodes_;
  std::array<bool, 256> first_byte_{};
};

}  // namespace flare::text
