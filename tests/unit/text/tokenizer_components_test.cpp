// Normalizers, pre-tokenizers, decoders and UTF-8 helpers, one by one, including the shapes the
// committed tokenizers do not use (Metaspace, Digits, Strip, every Split behaviour) and the
// configurations that must be rejected at load.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "common/error.h"
#include "text/decoder.h"
#include "text/normalizer.h"
#include "text/pre_tokenizer.h"
#include "text/unicode.h"
#include "text/unicode_regex.h"

namespace flare::text {
namespace {

using nlohmann::json;

std::string normalize(const char* config, std::string_view text) {
  return make_normalizer(json::parse(config))->normalize(text);
}

std::vector<std::string> pre_tokenize(const char* config, std::string_view text, bool first = true) {
  auto spec = make_pre_tokenizer(json::parse(config));
  PreTokens tokens;
  tokens.pieces.push_back(text);
  spec.pre_tokenizer->pre_tokenize(tokens, first);
  return {tokens.pieces.begin(), tokens.pieces.end()};
}

std::vector<std::string> decode_chain(const char* config, std::vector<std::string> tokens) {
  DecodeTokens in;
  in.added.assign(tokens.size(), 0);
  in.tokens = std::move(tokens);
  make_decoder(json::parse(config))->decode_chain(in);
  return in.tokens;
}

using Strings = std::vector<std::string>;

TEST(Normalizer, UnicodeForms) {
  EXPECT_EQ(normalize(R"({"type":"NFC"})", "e\xCC\x81"), "\xC3\xA9");
  EXPECT_EQ(normalize(R"({"type":"NFD"})", "\xC3\xA9"), "e\xCC\x81");
  EXPECT_EQ(normalize(R"({"type":"NFKC"})", "\xEF\xAC\x81 \xEF\xBC\xA1"), "fi A");  // ligature, fullwidth A
  EXPECT_EQ(normalize(R"({"type":"NFKD"})", "\xE2\x91\xA0"), "1");                   // circled one
  EXPECT_EQ(normalize(R"({"type":"NFC"})", "plain ascii"), "plain ascii");
  EXPECT_EQ(normalize(R"({"type":"NFC"})", "caf\xC3\xA9"), "caf\xC3\xA9");  // below U+0300 fast path
  EXPECT_EQ(normalize(R"({"type":"NFC"})", "\xE2\x84\xAB"), "\xC3\x85");    // angstrom sign
}

TEST(Normalizer, LowercaseStripPrependReplaceSequence) {
  EXPECT_EQ(normalize(R"({"type":"Lowercase"})", "HeLLo \xCE\xA3\xCE\x91\xCE\xA3"), "hello \xCF\x83\xCE\xB1\xCF\x82");
  EXPECT_EQ(normalize(R"({"type":"Strip","strip_left":true,"strip_right":true})", " \t a b \xE3\x80\x80"), "a b");
  EXPECT_EQ(normalize(R"({"type":"Strip","strip_left":false,"strip_right":true})", "  a  "), "  a");
  EXPECT_EQ(normalize(R"({"type":"Prepend","prepend":"\u2581"})", "hi"), "\xE2\x96\x81hi");
  EXPECT_EQ(normalize(R"({"type":"Prepend","prepend":"\u2581"})", ""), "");
  EXPECT_EQ(normalize(R"({"type":"Replace","pattern":{"String":" "},"content":"\u2581"})", "a b  c"),
            "a\xE2\x96\x81" "b\xE2\x96\x81\xE2\x96\x81" "c");
  EXPECT_EQ(normalize(R"({"type":"Replace","pattern":{"Regex":"\\s+"},"content":" "})", "a \t\n b"), "a b");
  EXPECT_EQ(normalize(R"({"type":"Replace","pattern":{"String":"a.b"},"content":"x"})", "a.b axb"), "x axb");
  EXPECT_EQ(normalize(R"({"type":"Sequence","normalizers":[{"type":"NFKC"},{"type":"Lowercase"}]})", "\xEF\xBC\xA1" "B"),
            "ab");
  EXPECT_EQ(normalize(R"({"type":"Sequence","normalizers":[]})", "same"), "same");
}

TEST(Normalizer, RejectsUnsupported) {
  EXPECT_THROW(make_normalizer(json::parse(R"({"type":"BertNormalizer"})")), Error);
  EXPECT_THROW(make_normalizer(json::parse(R"({"type":"Precompiled","precompiled_charsmap":""})")), Error);
  EXPECT_THROW(make_normalizer(json::parse(R"({"no_type":1})")), Error);
  EXPECT_THROW(make_normalizer(json::parse(R"([1,2])")), Error);
  EXPECT_THROW(make_normalizer(json::parse(R"({"type":"Replace","pattern":{"Regex":"("},"content":""})")), Error);
  EXPECT_THROW(make_normalizer(json::parse(R"({"type":"Replace","pattern":{"Other":"x"},"content":""})")), Error);
  EXPECT_THROW(make_normalizer(json::parse(R"({"type":"Sequence","normalizers":{}})")), Error);
  EXPECT_EQ(make_normalizer(json()), nullptr);
}

TEST(PreTokenizer, SplitBehaviours) {
  // The examples of the tokenizers library documentation.
  auto split = [](const char* behavior) {
    std::string config = std::string(R"({"type":"Split","pattern":{"String":"-"},"behavior":")") + behavior + R"("})";
    return pre_tokenize(config.c_str(), "the-final--countdown");
  };
  EXPECT_EQ(split("Removed"), (Strings{"the", "final", "countdown"}));
  EXPECT_EQ(split("Isolated"), (Strings{"the", "-", "final", "-", "-", "countdown"}));
  EXPECT_EQ(split("MergedWithPrevious"), (Strings{"the-", "final-", "-", "countdown"}));
  EXPECT_EQ(split("MergedWithNext"), (Strings{"the", "-final", "-", "-countdown"}));
  EXPECT_EQ(split("Contiguous"), (Strings{"the", "-", "final", "--", "countdown"}));
  EXPECT_EQ(pre_tokenize(R"({"type":"Split","pattern":{"Regex":"\\d+"},"behavior":"Removed","invert":true})", "a12b345"),
            (Strings{"12", "345"}));
  EXPECT_THROW(pre_tokenize(R"({"type":"Split","pattern":{"String":"-"},"behavior":"Sideways"})", "x"), Error);
}

TEST(PreTokenizer, SplitRegexUnicodeAndLookahead) {
  const char* qwen = R"({"type":"Split","pattern":{"Regex":"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"},"behavior":"Isolated","invert":false})";
  EXPECT_EQ(pre_tokenize(qwen, "Hello  world's 42\n\n x"),
            (Strings{"Hello", " ", " world", "'s", " ", "4", "2", "\n\n", " x"}));
  EXPECT_EQ(pre_tokenize(qwen, "\xC3\xA9t\xC3\xA9 \xE6\x97\xA5\xE6\x9C\xAC"), (Strings{"\xC3\xA9t\xC3\xA9", " \xE6\x97\xA5\xE6\x9C\xAC"}));
  EXPECT_EQ(pre_tokenize(qwen, "IT'S"), (Strings{"IT", "'S"}));
}

// gpt-oss's o200k pattern (tools/o200k-tokenizer.mjs): case classes, marks, contractions after
// either case, three-digit groups, "/" kept with a newline run, and (?i:'s) taking the long s the
// way tiktoken's Rust regex does.
TEST(PreTokenizer, SplitO200kPattern) {
  const char* o200k = R"({"type":"Split","pattern":{"Regex":"[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"},"behavior":"Isolated","invert":false})";
  EXPECT_EQ(pre_tokenize(o200k, "parseHTTPResponse getX"), (Strings{"parse", "HTTPResponse", " get", "X"}));
  EXPECT_EQ(pre_tokenize(o200k, "THEY'RE they'Re it\xC5\xBF"), (Strings{"THEY'RE", " they'Re", " it\xC5\xBF"}));
  EXPECT_EQ(pre_tokenize(o200k, "it'\xC5\xBF"), (Strings{"it'\xC5\xBF"}));  // U+017F folds to s
  EXPECT_EQ(pre_tokenize(o200k, "1234567 x"), (Strings{"123", "456", "7", " x"}));
  EXPECT_EQ(pre_tokenize(o200k, "a.\n/b"), (Strings{"a", ".\n/", "b"}));
  EXPECT_EQ(pre_tokenize(o200k, "e\xCC\x81t\xC3\xA9  x"), (Strings{"e\xCC\x81t\xC3\xA9", " ", " x"}));  // combining acute
  EXPECT_EQ(pre_tokenize(o200k, "\xC7\x85" "emal"), (Strings{"\xC7\x85" "emal"}));  // Lt then Ll
}

TEST(Regex, WhitespaceFlavours) {
  auto matches = [](const Regex& regex, std::string_view text) {
    std::vector<Span> spans;
    regex.find_all(text, spans);
    std::vector<std::string> out;
    for (const Span& s : spans) out.emplace_back(text.substr(s.begin, s.end - s.begin));
    return out;
  };
  const std::string nel = "\xC2\x85";
  const std::string bom = "\xEF\xBB\xBF";
  Regex onig("\\s+");
  Regex js("\\s+", RegexFlavour::javascript);
  EXPECT_EQ(matches(onig, " " + nel + " " + bom), (Strings{" " + nel + " "}));
  EXPECT_EQ(matches(js, " " + nel + " " + bom), (Strings{" ", " " + bom}));
  EXPECT_EQ(matches(Regex("[^\\s\\p{L}]+"), "a" + nel + "1-b"), (Strings{"1-"}));
  EXPECT_EQ(matches(Regex("\\S+"), "x" + nel + "y"), (Strings{"x", "y"}));
  EXPECT_EQ(matches(Regex("\\\\s"), "a\\sb s"), (Strings{"\\s"}));  // an escaped backslash, then 's'
  EXPECT_EQ(matches(Regex("[]s]+"), "]s]x"), (Strings{"]s]"}));
  EXPECT_EQ(matches(Regex("[[:alpha:]\\s]+"), "ab c1"), (Strings{"ab c"}));
  EXPECT_EQ(matches(Regex::literal("a.b\\s"), "a.b\\s axb"), (Strings{"a.b\\s"}));
  EXPECT_EQ(matches(Regex("\\w+"), "a\xC2\xBD_1 \xE2\x85\xA0"), (Strings{"a\xC2\xBD_1", "\xE2\x85\xA0"}));  // 1/2, roman one
  EXPECT_EQ(matches(Regex("x*"), "ab"), (Strings{"", "", ""}));  // empty matches advance by one character
  EXPECT_THROW(Regex("(?<=a+)b"), Error);                         // unbounded look-behind: PCRE2 refuses
}

TEST(PreTokenizer, ByteLevelPlacement) {
  EXPECT_TRUE(make_pre_tokenizer(json::parse(R"({"type":"ByteLevel","add_prefix_space":false})")).byte_level);
  EXPECT_EQ(pre_tokenize(R"({"type":"ByteLevel","add_prefix_space":true,"use_regex":true})", "hi there"),
            (Strings{" hi", " there"}));
  EXPECT_EQ(pre_tokenize(R"({"type":"ByteLevel","add_prefix_space":false,"use_regex":false})", "hi there"),
            (Strings{"hi there"}));
  EXPECT_THROW(make_pre_tokenizer(json::parse(
                   R"({"type":"Sequence","pretokenizers":[{"type":"ByteLevel"},{"type":"Digits"}]})")),
               Error);
  EXPECT_FALSE(make_pre_tokenizer(json()).pre_tokenizer);
}

TEST(PreTokenizer, MetaspaceDigitsWhitespace) {
  const char* always = R"({"type":"Metaspace","replacement":"\u2581","prepend_scheme":"always","split":true})";
  EXPECT_EQ(pre_tokenize(always, "hey friend"), (Strings{"\xE2\x96\x81hey", "\xE2\x96\x81" "friend"}));
  const char* first = R"({"type":"Metaspace","replacement":"\u2581","prepend_scheme":"first","split":false})";
  EXPECT_EQ(pre_tokenize(first, "a b", true), (Strings{"\xE2\x96\x81" "a\xE2\x96\x81" "b"}));
  EXPECT_EQ(pre_tokenize(first, "a b", false), (Strings{"a\xE2\x96\x81" "b"}));
  const char* never = R"({"type":"Metaspace","replacement":"\u2581","prepend_scheme":"never","split":true})";
  EXPECT_EQ(pre_tokenize(never, "a b"), (Strings{"a", "\xE2\x96\x81" "b"}));
  EXPECT_THROW(pre_tokenize(R"({"type":"Metaspace","prepend_scheme":"sometimes"})", "x"), Error);
  EXPECT_EQ(pre_tokenize(R"({"type":"Digits","individual_digits":true})", "a123b"), (Strings{"a", "1", "2", "3", "b"}));
  EXPECT_EQ(pre_tokenize(R"({"type":"Digits","individual_digits":false})", "a123b4"), (Strings{"a", "123", "b", "4"}));
  EXPECT_EQ(pre_tokenize(R"({"type":"Whitespace"})", "Hey, friend!"), (Strings{"Hey", ",", "friend", "!"}));
  EXPECT_EQ(pre_tokenize(R"({"type":"WhitespaceSplit"})", " a  b\t"), (Strings{"a", "b"}));
  EXPECT_THROW(pre_tokenize(R"({"type":"BertPreTokenizer"})", "x"), Error);
}

TEST(Decoder, Components) {
  EXPECT_EQ(decode_chain(R"({"type":"Strip","content":" ","start":1,"stop":0})", {"  a", " b", "c "}),
            (Strings{" a", "b", "c "}));
  EXPECT_EQ(decode_chain(R"({"type":"Replace","pattern":{"String":"\u2581"},"content":" "})", {"\xE2\x96\x81" "a"}),
            (Strings{" a"}));
  EXPECT_EQ(decode_chain(R"({"type":"Metaspace","replacement":"\u2581","prepend_scheme":"always"})",
                         {"\xE2\x96\x81" "Hey", "\xE2\x96\x81" "you"}),
            (Strings{"Hey", " you"}));
  EXPECT_EQ(decode_chain(R"({"type":"Metaspace","replacement":"\u2581","prepend_scheme":"never"})", {"\xE2\x96\x81" "Hey"}),
            (Strings{" Hey"}));
  // Byte tokens are gathered and decoded together; invalid sequences become U+FFFD.
  EXPECT_EQ(decode_chain(R"({"type":"ByteFallback"})", {"<0xE6>", "<0x97>", "<0xA5>", "x", "<0xFF>", "<0xZZ>"}),
            (Strings{"\xE6\x97\xA5", "x", "\xEF\xBF\xBD", "<0xZZ>"}));
  EXPECT_EQ(decode_chain(R"({"type":"Fuse"})", {"a", "b", "c"}), (Strings{"abc"}));
  EXPECT_EQ(decode_chain(R"({"type":"ByteLevel"})", {"\xC4\xA0" "hi", "!"}), (Strings{" hi!"}));
  EXPECT_THROW(make_decoder(json::parse(R"({"type":"WordPiece"})")), Error);
  EXPECT_THROW(make_decoder(json::parse(R"({"type":"Strip","content":"ab","start":1,"stop":0})")), Error);
  EXPECT_THROW(make_decoder(json::parse(R"({"type":"Strip","content":" ","start":-1})")), Error);
}

TEST(Utf8, RepairFollowsWhatwg) {
  EXPECT_EQ(utf8_repair("abc"), "abc");
  EXPECT_EQ(utf8_repair("\xFF"), "\xEF\xBF\xBD");
  EXPECT_EQ(utf8_repair("\xC0\xAF"), "\xEF\xBF\xBD\xEF\xBF\xBD");                  // overlong: two errors
  EXPECT_EQ(utf8_repair("\xED\xA0\x80"), "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");  // surrogate
  EXPECT_EQ(utf8_repair("\xE2\x82"), "\xEF\xBF\xBD");                              // truncated: one error
  EXPECT_EQ(utf8_repair("\xE2\x82" "A"), "\xEF\xBF\xBD" "A");
  EXPECT_EQ(utf8_repair("\xF4\x90\x80\x80"), "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");
  EXPECT_EQ(utf8_repair(std::string("a\0b", 3)), std::string("a\0b", 3));
  EXPECT_TRUE(utf8_is_valid("\xF0\x9F\x98\x80"));
  EXPECT_FALSE(utf8_is_valid("\xF0\x9F\x98"));
  EXPECT_FALSE(utf8_is_valid("\xED\xA0\x80"));
  EXPECT_EQ(utf8_complete_prefix_bytes("ab\xF0\x9F\x98"), 2u);
  EXPECT_EQ(utf8_complete_prefix_bytes("ab\xF0\x9F\x98\x80"), 6u);
  EXPECT_EQ(utf8_complete_prefix_bytes("ab\xFF"), 3u);
}

TEST(Utf8, ByteLevelAlphabetRoundTrips) {
  std::string all;
  for (int b = 0; b < 256; ++b) all.push_back(static_cast<char>(b));
  std::string encoded = byte_level_encode(all);
  std::string decoded;
  EXPECT_TRUE(byte_level_decode(encoded, decoded));
  EXPECT_EQ(decoded, all);
  EXPECT_EQ(byte_level_encode(" "), "\xC4\xA0");  // the familiar 'Ġ'
  std::string out;
  EXPECT_FALSE(byte_level_decode("\xE6\x97\xA5", out));
}

}  // namespace
}  // namespace flare::text
