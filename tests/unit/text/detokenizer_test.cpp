// IncrementalDetokenizer: deltas are valid UTF-8, appear as soon as text is final, and
// concatenate to the full decode, for every committed tokenizer on the corpus, on the fixture's
// random id sequences (byte tokens, specials) and on split multi-byte characters.
#include <gtest/gtest.h>

#include <random>

#include "text/detokenizer.h"
#include "text/unicode.h"
#include "tokenizer_test_util.h"

namespace flare::text {
namespace {

using testing::committed_tokenizer;

std::string stream(const std::shared_ptr<const Tokenizer>& tok, const std::vector<int32_t>& ids, bool skip,
                   std::vector<std::string>* deltas = nullptr) {
  IncrementalDetokenizer detok(tok, skip);
  std::string all;
  for (int32_t id : ids) {
    std::string delta = detok.push(id);
    EXPECT_TRUE(utf8_is_valid(delta)) << "delta is not valid UTF-8";
    if (deltas) deltas->push_back(delta);
    all += delta;
  }
  std::string rest = detok.flush();
  EXPECT_TRUE(utf8_is_valid(rest));
  if (deltas) deltas->push_back(rest);
  return all + rest;
}

class DetokenizerTest : public ::testing::TestWithParam<std::string> {};

TEST_P(DetokenizerTest, CorpusStreamsToFullDecode) {
  auto tok = committed_tokenizer(GetParam());
  for (const auto& c : testing::corpus()) {
    auto ids = tok->encode(c.bytes, true);
    for (bool skip : {false, true}) {
      EXPECT_EQ(stream(tok, ids, skip), tok->decode(ids, skip, false)) << c.name << " skip=" << skip;
    }
  }
}

TEST_P(DetokenizerTest, FixtureRandomIdsStreamToFullDecode) {
  auto tok = committed_tokenizer(GetParam());
  auto fixture = nlohmann::json::parse(
      testing::read_text_file(testing::tokenizer_data_dir() / GetParam() / "expected.json"));
  for (const auto& c : fixture["decodes"]) {
    auto ids = c["ids"].get<std::vector<int32_t>>();
    for (bool skip : {false, true}) {
      EXPECT_EQ(stream(tok, ids, skip), tok->decode(ids, skip, false)) << c["ids"].dump();
    }
  }
}

TEST_P(DetokenizerTest, RandomIdsStreamToFullDecode) {
  auto tok = committed_tokenizer(GetParam());
  std::mt19937 rng(1234);
  std::uniform_int_distribution<int32_t> any(0, static_cast<int32_t>(tok->vocab_size()) - 1);
  for (int n = 0; n < 200; ++n) {
    std::vector<int32_t> ids;
    for (int i = 0; i < 10; ++i) ids.push_back(any(rng));
    EXPECT_EQ(stream(tok, ids, false), tok->decode(ids, false, false));
  }
}

INSTANTIATE_TEST_SUITE_P(Committed, DetokenizerTest, ::testing::ValuesIn(testing::committed_tokenizer_names()),
                         [](const auto& info) { return info.param; });

TEST(Detokenizer, HoldsSplitCharacterUntilComplete) {
  // Gemma: byte fallback tokens <0xE6> <0x97> <0xA5> spell U+65E5.
  auto tok = committed_tokenizer("gemma3");
  auto id = [&](const char* t) { return *tok->token_to_id(t); };
  IncrementalDetokenizer detok(tok, false);
  EXPECT_EQ(detok.push(*tok->token_to_id("Hello")), "Hello");
  EXPECT_EQ(detok.push(id("<0xE6>")), "");
  EXPECT_EQ(detok.push(id("<0x97>")), "");
  EXPECT_EQ(detok.push(id("<0xA5>")), "\xE6\x97\xA5");
  EXPECT_EQ(detok.flush(), "");
}

TEST(Detokenizer, ByteLevelSplitCharacter) {
  // Qwen3 encodes this character as several byte-level tokens; only the whole character comes out.
  auto tok = committed_tokenizer("qwen3");
  auto ids = tok->encode("\xF0\xAA\x9B\x96!", false);  // U+2A6D6, a rare ideograph
  ASSERT_GT(ids.size(), 2u);
  std::vector<std::string> deltas;
  EXPECT_EQ(stream(tok, ids, false, &deltas), "\xF0\xAA\x9B\x96!");
  EXPECT_EQ(deltas.front(), "");
}

TEST(Detokenizer, FlushReleasesIncompleteCharacter) {
  auto tok = committed_tokenizer("gemma3");
  IncrementalDetokenizer detok(tok, false);
  EXPECT_EQ(detok.push(*tok->token_to_id("<0xE6>")), "");
  EXPECT_EQ(detok.flush(), "\xEF\xBF\xBD");
  EXPECT_EQ(detok.flush(), "");
}

TEST(Detokenizer, SpecialTokensKeptOrSkipped) {
  auto tok = committed_tokenizer("qwen3");
  int32_t im_end = *tok->token_to_id("<|im_end|>");
  auto hello = tok->encode("Hello", false);
  for (bool skip : {false, true}) {
    IncrementalDetokenizer detok(tok, skip);
    std::string out;
    for (int32_t id : hello) out += detok.push(id);
    out += detok.push(im_end);
    out += detok.flush();
    EXPECT_EQ(out, skip ? "Hello" : "Hello<|im_end|>");
  }
}

TEST(Detokenizer, OutOfRangeIdsAreIgnored) {
  auto tok = committed_tokenizer("demo");
  IncrementalDetokenizer detok(tok, false);
  EXPECT_EQ(detok.push(-5), "");
  EXPECT_EQ(detok.push(static_cast<int32_t>(tok->vocab_size()) + 100), "");
  EXPECT_EQ(detok.flush(), "");
}

}  // namespace
}  // namespace flare::text
