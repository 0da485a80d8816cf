// Incremental detokenizer (see detokenizer.h).
#include "text/detokenizer.h"

#include <span>

#include "common/error.h"

namespace flare::text {
namespace {

// More ids than any character needs (4 bytes) plus room for skipped special tokens between them.
constexpr size_t kMaxHeldIds = 16;

bool ends_with_replacement(const std::string& text) {
  return text.size() >= 3 && text.compare(text.size() - 3, 3, "\xEF\xBF\xBD") == 0;
}

// The part of `text` after `prefix`; when `text` does not extend `prefix` (not expected for the
// supported decoders), the part after their common prefix, cut on a character boundary.
std::string text_after(const std::string& text, const std::string& prefix) {
  if (text.compare(0, prefix.size(), prefix) == 0) return text.substr(prefix.size());
  size_t common = 0;
  while (common < text.size() && common < prefix.size() && text[common] == prefix[common]) ++common;
  while (common > 0 && (static_cast<unsigned char>(text[common]) & 0xC0) == 0x80) --common;
  return text.substr(common);
}

}  // namespace

IncrementalDetokenizer::IncrementalDetokenizer(std::shared_ptr<const Tokenizer> tokenizer, bool skip_special_tokens)
    : tokenizer_(std::move(tokenizer)), skip_special_tokens_(skip_special_tokens) {
  if (!tokenizer_) fail(ExitCode::failure, "IncrementalDetokenizer needs a tokenizer");
}

std::string IncrementalDetokenizer::decode_window(size_t end) const {
  return tokenizer_->decode(std::span<const int32_t>(window_.data(), end), skip_special_tokens_, false);
}

std::string IncrementalDetokenizer::push(int32_t id) {
  window_.push_back(id);
  std::string text = decode_window(window_.size());
  // Hold an incomplete character; but a long run of undecodable bytes (garbage output) is
  // released rather than re-decoded forever.
  if (ends_with_replacement(text) && window_.size() - read_offset_ <= kMaxHeldIds) return {};
  std::string prefix = decode_window(read_offset_);
  if (text.size() <= prefix.size()) return {};
  std::string delta = text_after(text, prefix);
  // Slide: the ids just emitted become the context that the next decode starts from.
  window_.erase(window_.begin(), window_.begin() + static_cast<std::ptrdiff_t>(read_offset_));
  read_offset_ = window_.size();
  return delta;
}

std::string IncrementalDetokenizer::flush() {
  if (read_offset_ == window_.size()) return {};
  std::string text = decode_window(window_.size());
  std::string prefix = decode_window(read_offset_);
  std::string delta = text.size() > prefix.size() ? text_after(text, prefix) : std::string();
  window_.erase(window_.begin(), window_.begin() + static_cast<std::ptrdiff_t>(read_offset_));
  read_offset_ = window_.size();
  return delta;
}

}  // namespace flare::text
