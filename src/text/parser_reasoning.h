// Streaming reasoning parser: splits generated text into reasoning (between <think> and
// </think>) and content, fed with text deltas from the detokenizer. Tags split across deltas
// are handled by holding back any suffix that could still become a tag. Handles models whose
// prompt already opened the reasoning block (DeepSeek-R1, Qwen3 thinking), and outputs whose
// end tag never comes (everything after the start tag is reasoning).
// One parser per request; not thread-safe.
#pragma once

#include <string>
#include <string_view>

namespace flare::text {

struct ReasoningDelta {
  std::string reasoning;
  std::string content;
  bool empty() const { return reasoning.empty() && content.empty(); }
};

struct ReasoningParserOptions {
  std::string start_tag = "<think>";
  std::string end_tag = "</think>";
  bool started_in_prompt = false;  // the prompt ends inside an open reasoning block
  bool trim_newlines = true;       // drop newlines right inside the tags and right after </think>
};

class ReasoningParser {
 public:
  explicit ReasoningParser(ReasoningParserOptions options = {});

  ReasoningDelta feed(std::string_view delta);
  // End of generation: releases held-back text (an unfinished tag is literal text).
  ReasoningDelta finish();

  bool in_reasoning() const { return state_ == State::reasoning; }
  bool saw_reasoning() const { return saw_reasoning_; }

 private:
  enum class State { start, reasoning, content };
  void step(ReasoningDelta& out, bool final);

  ReasoningParserOptions options_;
  State state_;
  std::string pending_;        // text not yet classified
  std::string held_newlines_;  // reasoning newlines that may precede the end tag
  bool skip_newlines_ = false;
  bool saw_reasoning_ = false;
};

}  // namespace flare::text
