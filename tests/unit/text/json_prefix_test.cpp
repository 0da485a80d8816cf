// The incremental JSON recognizer for constrained decoding: accepts the prefixes of JSON objects
// that nlohmann's parser (which the tool-call parsers use) reads, checked on whole documents and
// on random byte strings, and its completion always closes a prefix into a document that parses.
#include "text/json_prefix.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <map>
#include <random>

namespace flare::text {
namespace {

bool accepts(std::string_view text) {
  JsonPrefix prefix;
  return prefix.push(text);
}

bool parses_as_object(const std::string& text) {
  auto value = nlohmann::json::parse(text, nullptr, false);
  return !value.is_discarded() && value.is_object();
}

TEST(JsonPrefix, AcceptsEveryPrefixOfValidObjects) {
  const std::vector<std::string> documents = {
      "{}",
      R"({"a": 1})",
      R"( { "city" : "Paris", "n": -0.5e+3, "ok": true, "no": false, "x": null } )",
      R"({"list": [1, [2, []], {"k": "v"}, "s\"\\\/\b\f\n\r\t\u00e9"], "e": {}})",
      "{\"utf8\": \"caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80\"}",
      R"({"n": 0, "m": 10, "f": 1.25, "g": 2E-7, "h": -3})",
  };
  for (const auto& document : documents) {
    ASSERT_TRUE(parses_as_object(document)) << document;
    // Trailing whitespace after the root is not taken: the value ends at its '}'.
    const std::string trimmed = document.substr(0, document.find_last_not_of(' ') + 1);
    JsonPrefix prefix;
    for (size_t i = 0; i < trimmed.size(); ++i) {
      ASSERT_TRUE(prefix.push(trimmed[i])) << trimmed << " at byte " << i;
      // Closing any prefix gives a document that parses.
      const std::string closed = trimmed.substr(0, i + 1) + prefix.completion();
      EXPECT_TRUE(parses_as_object(closed)) << closed;
    }
    EXPECT_TRUE(prefix.complete()) << document;
    EXPECT_EQ(prefix.completion(), "");
    EXPECT_FALSE(prefix.push(' '));
  }
}

TEST(JsonPrefix, RejectsWhatNoObjectStartsWith) {
  for (std::string_view bad : {"[", "1", "\"a\"", "{a", "{\"a\" 1", "{\"a\":}", "{\"a\":1,}", "{\"a\":01", "{\"a\":-}",
                               "{\"a\":1.}", "{\"a\":1e}", "{\"a\":tru }", "{\"a\":\"\x01\"}", "{\"a\":\"\\x\"}",
                               "{\"a\":\"\\u12G\"}", "{\"a\":[1,]}", "{\"a\":[}", "{}}", "{} ", "{\"a\":\"\xC0\xAF\"}",
                               "{\"a\":\"\xED\xA0\x80\"}", "{\"a\":\"\xE2\x82\"}", "{\"a\":\"\x80\"}"}) {
    EXPECT_FALSE(accepts(bad)) << bad;
  }
}

// Numbers stay within what a double holds: the parsers reject 1e999 as an overflow.
TEST(JsonPrefix, NumbersStayFinite) {
  EXPECT_TRUE(accepts("{\"a\": 1e99"));
  EXPECT_FALSE(accepts("{\"a\": 1e999"));
  EXPECT_FALSE(accepts("{\"a\": -2E+999"));
  EXPECT_TRUE(accepts("{\"a\": " + std::string(100, '7') + "e99}"));
  EXPECT_FALSE(accepts("{\"a\": " + std::string(101, '7')));
  EXPECT_TRUE(parses_as_object("{\"a\": " + std::string(100, '7') + "e99}"));
  EXPECT_TRUE(accepts("{\"a\": 0." + std::string(500, '1') + "e-99}"));
}

// Equal keys mean equal futures; the keys tell apart states that accept different bytes.
TEST(JsonPrefix, StateKeysSeparateStates) {
  auto key = [](std::string_view text) {
    JsonPrefix prefix;
    EXPECT_TRUE(prefix.push(text)) << text;
    return prefix.state_key();
  };
  EXPECT_EQ(key("{\"a\": \"xy"), key("{\"bbb\": [1, {}], \"c\": \"z"));
  EXPECT_NE(key("{\"a\": \"xy"), key("{\"a\": [\"xy"));
  EXPECT_NE(key("{\"a\": tr"), key("{\"a\": nu"));
  EXPECT_NE(key("{\"a\": \"\xE2"), key("{\"a\": \"\xE2\x82"));
  EXPECT_NE(key("{\"a\": \"\xE0"), key("{\"a\": \"\xE1"));
  EXPECT_NE(key("{\"a\": 1"), key("{\"a\": 12"));  // digit counts bound numbers
  // Random prefixes with equal keys accept the same bytes.
  std::mt19937 rng(3);
  const std::string alphabet = "{}[]\":,0123456789-.eEtrufalsn \\u\xC3\xA9\xE2\x82x";
  std::map<std::string, std::string> seen;  // key -> the bytes accepted next
  int n_repeats = 0;
  for (int trial = 0; trial < 3000; ++trial) {
    JsonPrefix prefix;
    for (int i = 0; i < 12 && !prefix.complete(); ++i) {
      JsonPrefix attempt = prefix;
      if (attempt.push(alphabet[rng() % alphabet.size()])) prefix = attempt;
    }
    std::string accepted;
    for (int b = 0; b < 256; ++b) {
      JsonPrefix attempt = prefix;
      if (attempt.push(static_cast<char>(b))) accepted.push_back(static_cast<char>(b));
    }
    auto [it, inserted] = seen.emplace(prefix.state_key(), accepted);
    if (!inserted) {
      ++n_repeats;
      EXPECT_EQ(it->second, accepted);
    }
  }
  EXPECT_GT(n_repeats, 100);
}

TEST(JsonPrefix, CompletionIsShortest) {
  auto completion = [](std::string_view text) {
    JsonPrefix prefix;
    EXPECT_TRUE(prefix.push(text)) << text;
    return prefix.completion();
  };
  EXPECT_EQ(completion(""), "{}");
  EXPECT_EQ(completion("{"), "}");
  EXPECT_EQ(completion("{\"ke"), "\":0}");
  EXPECT_EQ(completion("{\"k\": [1, {\"a\": \"x"), "\"}]}");
  EXPECT_EQ(completion("{\"k\":tr"), "ue}");
  EXPECT_EQ(completion("{\"k\":-"), "0}");
  EXPECT_EQ(completion("{\"k\":1,"), "\"\":0}");
  EXPECT_EQ(completion("{\"k\":\"\\u0"), "000\"}");
  EXPECT_EQ(completion("{\"k\":\"\xE2"), "\x80\x80\"}");
  EXPECT_EQ(completion("{\"k\":\"\xF0"), "\x90\x80\x80\"}");
  JsonPrefix split;
  ASSERT_TRUE(split.push("{\"k\":\"\xE2\x82"));
  EXPECT_TRUE(split.inside_character());
}

// Random byte strings from JSON's alphabet: whatever the recognizer accepts, closed by its
// completion, parses; whatever it rejects has a rejected prefix that no completion could fix
// (checked by the parser failing on the accepted prefix plus the rejected byte plus any closing).
TEST(JsonPrefix, AgreesWithTheParserOnRandomText) {
  std::mt19937 rng(11);
  const std::string alphabet = "{}[]\":,0123456789-+.eEtrufalsn \\u\xC3\xA9x";
  int n_long = 0;
  for (int trial = 0; trial < 20000; ++trial) {
    JsonPrefix prefix;
    std::string text;
    for (int i = 0; i < 40; ++i) {
      char c = alphabet[rng() % alphabet.size()];
      JsonPrefix attempt = prefix;
      if (!attempt.push(c)) continue;  // a model under the mask never writes it
      prefix = attempt;
      text.push_back(c);
      if (prefix.complete()) break;
    }
    n_long += text.size() > 10;
    const std::string closed = text + prefix.completion();
    ASSERT_TRUE(parses_as_object(closed)) << closed;
  }
  EXPECT_GT(n_long, 1000);
}

}  // namespace
}  // namespace flare::text
