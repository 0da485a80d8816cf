// Pre-tokenizers of tokenizer.json ("pre_tokenizer"): Split (PCRE2 regex or literal, every
// SplitDelimiterBehavior, invert), ByteLevel (optional GPT-2 regex and prefix space), Metaspace,
// Digits, Whitespace, WhitespaceSplit and Sequence. They cut a normalized section into the
// pieces the model encodes independently. Built once at load, then const and thread-safe.
//
// ByteLevel's byte-to-character mapping is not applied here: the BPE model of a byte-level
// tokenizer works on raw bytes directly (its vocabulary is converted at load), which is
// equivalent and avoids re-encoding every piece. For that to be exact ByteLevel must be the
// last pre-tokenizer; any other placement is rejected at load.
#pragma once

#include <deque>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace flare::text {

// The pieces of one section; views point into the section text or into `storage`.
struct PreTokens {
  std::vector<std::string_view> pieces;
  std::deque<std::string> storage;
  void clear() {
    pieces.clear();
    storage.clear();
  }
};

class PreTokenizer {
 public:
  virtual ~PreTokenizer() = default;
  // Rewrites `tokens.pieces` in place. `first_section` is true for the section that starts the
  // input text (Metaspace's prepend_scheme "first").
  virtual void pre_tokenize(PreTokens& tokens, bool first_section) const = 0;
};

struct PreTokenizerSpec {
  std::unique_ptr<PreTokenizer> pre_tokenizer;  // null: the whole section is one piece
  bool byte_level = false;                      // pieces are raw bytes for a byte-level vocabulary
};

// Builds the pre-tokenizer described by `config` (JSON null gives none). Throws flare::Error for
// unknown or unsupported types and for unsupported compositions.
PreTokenizerSpec make_pre_tokenizer(const nlohmann::json& config);

}  // namespace flare::text
