// Streaming reasoning parser (see parser_reasoning.h).
#include "text/parser_reasoning.h"

#include <algorithm>

namespace flare::text {

namespace {

// Length of the longest suffix of `text` that is a proper prefix of `tag`.
size_t partial_tag_suffix(std::string_view text, std::string_view tag) {
  size_t longest = std::min(text.size(), tag.size() - 1);
  for (size_t n = longest; n > 0; --n) {
    if (text.substr(text.size() - n) == tag.substr(0, n)) return n;
  }
  return 0;
}

bool is_space(char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; }

}  // namespace

ReasoningParser::ReasoningParser(ReasoningParserOptions options)
    : options_(std::move(options)), state_(options_.started_in_prompt ? State::reasoning : State::start) {
  if (options_.started_in_prompt) {
    saw_reasoning_ = true;
    skip_newlines_ = options_.trim_newlines;
  }
}

ReasoningDelta ReasoningParser::feed(std::string_view delta) {
  ReasoningDelta out;
  pending_.append(delta);
  step(out, false);
  return out;
}

ReasoningDelta ReasoningParser::finish() {
  ReasoningDelta out;
  step(out, true);
  if (state_ == State::reasoning) {
    out.reasoning += held_newlines_;
  }
  held_newlines_.clear();
  return out;
}

void ReasoningParser::step(ReasoningDelta& out, bool final) {
  while (!pending_.empty()) {
    if (skip_newlines_) {
      size_t n = 0;
      while (n < pending_.size() && (pending_[n] == '\n' || pending_[n] == '\r')) ++n;
      pending_.erase(0, n);
      if (pending_.empty()) return;
      skip_newlines_ = false;
    }
    if (state_ == State::start) {
      // Leading whitespace may precede the start tag; anything else means no reasoning.
      size_t first = 0;
      while (first < pending_.size() && is_space(pending_[first])) ++first;
      std::string_view rest = std::string_view(pending_).substr(first);
      const std::string& tag = options_.start_tag;
      if (rest.size() >= tag.size() && rest.substr(0, tag.size()) == tag) {
        pending_.erase(0, first + tag.size());
        state_ = State::reasoning;
        saw_reasoning_ = true;
        skip_newlines_ = options_.trim_newlines;
        continue;
      }
      if (!final && (rest.empty() || tag.compare(0, rest.size(), rest) == 0)) return;  // may still become the tag
      state_ = State::content;
      continue;
    }
    if (state_ == State::content) {
      out.content += pending_;
      pending_.clear();
      return;
    }
    // Reasoning: look for the end tag.
    size_t end = pending_.find(options_.end_tag);
    if (end != std::string::npos) {
      std::string reasoning = pending_.substr(0, end);
      pending_.erase(0, end + options_.end_tag.size());
      if (options_.trim_newlines) {
        while (!reasoning.empty() && (reasoning.back() == '\n' || reasoning.back() == '\r')) reasoning.pop_back();
        if (reasoning.empty()) held_newlines_.clear();
      }
      out.reasoning += held_newlines_ + reasoning;
      held_newlines_.clear();
      state_ = State::content;
      skip_newlines_ = options_.trim_newlines;
      continue;
    }
    size_t keep = final ? 0 : partial_tag_suffix(pending_, options_.end_tag);
    std::string ready = pending_.substr(0, pending_.size() - keep);
    pending_.erase(0, pending_.size() - keep);
    if (options_.trim_newlines && !final) {
      // Newlines may be the ones right before </think>: hold them until we know.
      size_t n = ready.size();
      while (n > 0 && (ready[n - 1] == '\n' || ready[n - 1] == '\r')) --n;
      if (n > 0) {
        out.reasoning += held_newlines_;
        held_newlines_.clear();
      }
      held_newlines_ += ready.substr(n);
      ready.resize(n);
    } else {
      out.reasoning += held_newlines_;
      held_newlines_.clear();
    }
    out.reasoning += ready;
    return;
  }
}

}  // namespace flare::text
