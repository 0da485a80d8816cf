// Streaming detokenization: turns generated token ids into text deltas as soon as the text is
// final. A delta never ends inside a UTF-8 sequence (bytes of a character split across byte
// tokens are held until the character is complete), and the concatenation of all deltas plus
// flush() equals tokenizer.decode(ids, skip_special_tokens, /*clean_up_spaces=*/false).
//
// Method: keep a short window of ids; decode the window with and without the newest ids and
// emit the difference once the decoded text no longer ends in an incomplete character
// (U+FFFD). The window then slides forward, so each push costs O(window), not O(sequence).
//
// A run of more than 16 ids that still ends in an undecodable byte (garbage output) is released
// with its U+FFFD rather than held forever.
//
// One detokenizer per generated sequence; not thread-safe (the tokenizer it uses is).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "text/tokenizer.h"

namespace flare::text {

class IncrementalDetokenizer {
 public:
  IncrementalDetokenizer(std::shared_ptr<const Tokenizer> tokenizer, bool skip_special_tokens);

  // Adds one generated id; returns the text that became final ("" when none did yet).
  std::string push(int32_t id);
  // Ends the sequence: returns whatever is still held (an incomplete character becomes U+FFFD).
  std::string flush();

 private:
  std::string decode_window(size_t end) const;

  std::shared_ptr<const Tokenizer> tokenizer_;
  bool skip_special_tokens_;
  std::vector<int32_t> window_;  // ids from the start of the decode context
  size_t read_offset_ = 0;       // window_[0, read_offset_) has been emitted
};

}  // namespace flare::text
