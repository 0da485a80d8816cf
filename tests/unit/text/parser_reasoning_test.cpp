// Reasoning parser: tags split across deltas at every position, start tag in the prompt,
// missing end tag, no reasoning at all, and hostile inputs.
#include <random>

#include <gtest/gtest.h>

#include "text/parser_reasoning.h"

namespace flare::text {
namespace {

ReasoningDelta run_pieces(const std::vector<std::string>& pieces, ReasoningParserOptions options = {}) {
  ReasoningParser parser(options);
  ReasoningDelta total;
  for (const std::string& piece : pieces) {
    ReasoningDelta d = parser.feed(piece);
    total.reasoning += d.reasoning;
    total.content += d.content;
  }
  ReasoningDelta d = parser.finish();
  total.reasoning += d.reasoning;
  total.content += d.content;
  return total;
}

// Every split into two deltas, and one byte at a time, must agree with the whole text.
void expect_split_invariant(const std::string& text, const std::string& reasoning, const std::string& content,
                            ReasoningParserOptions options = {}) {
  ReasoningDelta whole = run_pieces({text}, options);
  EXPECT_EQ(whole.reasoning, reasoning) << text;
  EXPECT_EQ(whole.content, content) << text;
  for (size_t cut = 0; cut <= text.size(); ++cut) {
    ReasoningDelta split = run_pieces({text.substr(0, cut), text.substr(cut)}, options);
    EXPECT_EQ(split.reasoning, reasoning) << "cut at " << cut;
    EXPECT_EQ(split.content, content) << "cut at " << cut;
  }
  std::vector<std::string> bytes;
  for (char c : text) bytes.emplace_back(1, c);
  ReasoningDelta by_byte = run_pieces(bytes, options);
  EXPECT_EQ(by_byte.reasoning, reasoning);
  EXPECT_EQ(by_byte.content, content);
}

TEST(ReasoningParser, SplitsThinkBlockFromContent) {
  expect_split_invariant("<think>\nLet me think.\n</think>\n\nThe answer is 4.", "Let me think.", "The answer is 4.");
}

TEST(ReasoningParser, NoReasoningIsAllContent) {
  expect_split_invariant("Just an answer.", "", "Just an answer.");
  expect_split_invariant("<thin", "", "<thin");
  expect_split_invariant("", "", "");
}

TEST(ReasoningParser, StartTagInPrompt) {
  ReasoningParserOptions options;
  options.started_in_prompt = true;
  expect_split_invariant("\nreasoning here\n</think>\n\nanswer", "reasoning here", "answer", options);
}

TEST(ReasoningParser, EndNeverComes) {
  expect_split_invariant("<think>\nstill thinking\n", "still thinking\n", "");
  ReasoningParserOptions options;
  options.started_in_prompt = true;
  expect_split_invariant("thinking </thi", "thinking </thi", "", options);
}

TEST(ReasoningParser, KeepsInnerNewlinesAndLiteralTagsInContent) {
  expect_split_invariant("<think>a\n\nb</think>x <think> y </think>", "a\n\nb", "x <think> y </think>");
}

TEST(ReasoningParser, LeadingWhitespaceBeforeStartTag) {
  expect_split_invariant("  \n<think>r</think>c", "r", "c");
}

TEST(ReasoningParser, UntrimmedModeKeepsEverything) {
  ReasoningParserOptions options;
  options.trim_newlines = false;
  expect_split_invariant("<think>\nr\n</think>\n\nc", "\nr\n", "\n\nc", options);
}

TEST(ReasoningParser, StreamsReasoningBeforeTheEnd) {
  ReasoningParser parser;
  EXPECT_EQ(parser.feed("<think>").reasoning, "");
  EXPECT_TRUE(parser.in_reasoning());
  EXPECT_EQ(parser.feed("step one, ").reasoning, "step one, ");
  EXPECT_EQ(parser.feed("step two</").reasoning, "step two");  // "</" may start the end tag
  ReasoningDelta d = parser.feed("think>done");
  EXPECT_EQ(d.reasoning, "");
  EXPECT_EQ(d.content, "done");
}

TEST(ReasoningParser, RandomDeltasNeverLoseBytes) {
  std::mt19937 rng(7);
  const std::string alphabet = "<>/thinkTHINK \n{}\"";
  for (int trial = 0; trial < 300; ++trial) {
    std::string text;
    size_t n = rng() % 60;
    for (size_t i = 0; i < n; ++i) text += alphabet[rng() % alphabet.size()];
    ReasoningParserOptions options;
    options.trim_newlines = false;
    ReasoningDelta whole = run_pieces({text}, options);
    // Without trimming, reasoning + content + removed tags reassemble the input.
    std::vector<std::string> pieces;
    for (size_t i = 0; i < text.size();) {
      size_t len = 1 + rng() % 5;
      pieces.push_back(text.substr(i, len));
      i += len;
    }
    ReasoningDelta split = run_pieces(pieces, options);
    EXPECT_EQ(split.reasoning, whole.reasoning) << text;
    EXPECT_EQ(split.content, whole.content) << text;
    EXPECT_LE(whole.reasoning.size() + whole.content.size(), text.size());
  }
}

}  // namespace
}  // namespace flare::text
