// Exactness against the reference: ids and decoded text for every corpus case and every
// committed tokenizer must equal tests/data/tokenizers/<name>/expected.json, which
// tools/tokenizer-fixtures.mjs generates with @huggingface/transformers.
#include <gtest/gtest.h>

#include "tokenizer_test_util.h"

namespace flare::text {
namespace {

using testing::committed_tokenizer;
using testing::corpus;
using testing::tokenizer_data_dir;

class TokenizerExactTest : public ::testing::TestWithParam<std::string> {
 protected:
  nlohmann::json expected() const {
    return nlohmann::json::parse(testing::read_text_file(tokenizer_data_dir() / GetParam() / "expected.json"));
  }
};

std::string show_ids(const std::vector<int32_t>& ids) {
  std::string out;
  for (size_t i = 0; i < ids.size() && i < 64; ++i) out += std::to_string(ids[i]) + " ";
  return out;
}

TEST_P(TokenizerExactTest, EncodeMatchesReference) {
  auto tok = committed_tokenizer(GetParam());
  auto fixture = expected();
  const auto& cases = corpus();
  ASSERT_EQ(fixture["cases"].size(), cases.size()) << "fixtures are stale: rerun tools/tokenizer-fixtures.mjs";
  for (size_t i = 0; i < cases.size(); ++i) {
    const auto& want = fixture["cases"][i];
    ASSERT_EQ(want["name"].get<std::string>(), cases[i].name);
    auto ids = tok->encode(cases[i].bytes, false);
    auto want_ids = want["ids"].get<std::vector<int32_t>>();
    EXPECT_EQ(ids, want_ids) << cases[i].name << "\n got: " << show_ids(ids) << "\nwant: " << show_ids(want_ids);
    EXPECT_EQ(tok->encode(cases[i].bytes, true), want["ids_special"].get<std::vector<int32_t>>()) << cases[i].name;
  }
}

TEST_P(TokenizerExactTest, RandomTextsMatchReference) {
  auto tok = committed_tokenizer(GetParam());
  auto fixture = expected();
  auto texts = nlohmann::json::parse(testing::read_text_file(tokenizer_data_dir() / "corpus_random.json"));
  ASSERT_EQ(fixture["random_cases"].size(), texts.size()) << "fixtures are stale: rerun tools/tokenizer-fixtures.mjs";
  for (size_t i = 0; i < texts.size(); ++i) {
    const auto& want = fixture["random_cases"][i];
    auto ids = tok->encode(texts[i].get<std::string>(), false);
    auto want_ids = want["ids"].get<std::vector<int32_t>>();
    EXPECT_EQ(ids, want_ids) << "random text " << i << ": " << texts[i].dump() << "\n got: " << show_ids(ids)
                             << "\nwant: " << show_ids(want_ids);
    EXPECT_EQ(tok->decode(want_ids, false), want["decoded"].get<std::string>()) << "random text " << i;
  }
}

TEST_P(TokenizerExactTest, DecodeMatchesReference) {
  auto tok = committed_tokenizer(GetParam());
  auto fixture = expected();
  for (const auto& c : fixture["cases"]) {
    auto ids = c["ids"].get<std::vector<int32_t>>();
    EXPECT_EQ(tok->decode(ids, false), c["decoded"].get<std::string>()) << c["name"];
    EXPECT_EQ(tok->decode(ids, true), c["decoded_skip"].get<std::string>()) << c["name"];
  }
  for (const auto& c : fixture["decodes"]) {
    auto ids = c["ids"].get<std::vector<int32_t>>();
    EXPECT_EQ(tok->decode(ids, false), c["decoded"].get<std::string>()) << c["ids"].dump();
    EXPECT_EQ(tok->decode(ids, true), c["decoded_skip"].get<std::string>()) << c["ids"].dump();
  }
}

INSTANTIATE_TEST_SUITE_P(Committed, TokenizerExactTest, ::testing::ValuesIn(testing::committed_tokenizer_names()),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace flare::text
