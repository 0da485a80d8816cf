// The gpt-oss (o200k_harmony) tokenizer against js-tiktoken. Its tokenizer.json is ~12 MB and is
// built at test time from js-tiktoken's ranks (tools/o200k-tokenizer.mjs), with the reference ids
// (tests/e2e/lib/o200k_reference.mjs); tests/e2e/o200k_tokenizer.sh makes both and runs these
// tests with FLARE_O200K_DIR naming the folder. Run alone, without it, they skip (the script
// fails if they do).
#include <cstdlib>

#include <gtest/gtest.h>

#include "text/detokenizer.h"
#include "tokenizer_test_util.h"

namespace flare::text {
namespace {

struct O200kCase {
  std::string name;
  std::string bytes;
  std::vector<int32_t> ids;
  std::string decoded;
};

class O200kTokenizerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* dir = std::getenv("FLARE_O200K_DIR");
    if (dir == nullptr || *dir == '\0') GTEST_SKIP() << "FLARE_O200K_DIR is unset (tests/e2e/o200k_tokenizer.sh sets it)";
    std::filesystem::path folder(dir);
    static std::shared_ptr<const Tokenizer> tokenizer;
    static std::vector<O200kCase> cases;
    if (!tokenizer) {
      tokenizer = Tokenizer::load_from_json(testing::read_text_file(folder / "tokenizer.json"),
                                            testing::read_text_file(folder / "tokenizer_config.json"));
      auto expected = nlohmann::json::parse(testing::read_text_file(folder / "expected.json"));
      for (const auto& c : expected["cases"]) {
        cases.push_back({c["name"].get<std::string>(), testing::hex_to_bytes(c["hex"].get<std::string>()),
                         c["ids"].get<std::vector<int32_t>>(), c["decoded"].get<std::string>()});
      }
    }
    tokenizer_ = tokenizer;
    cases_ = &cases;
  }

  std::shared_ptr<const Tokenizer> tokenizer_;
  const std::vector<O200kCase>* cases_ = nullptr;
};

TEST_F(O200kTokenizerTest, HarmonySpecialsHaveTheirIds) {
  const std::pair<const char*, int32_t> specials[] = {
      {"<|startoftext|>", 199998}, {"<|endoftext|>", 199999}, {"<|return|>", 200002}, {"<|constrain|>", 200003},
      {"<|channel|>", 200005},     {"<|start|>", 200006},     {"<|end|>", 200007},    {"<|message|>", 200008},
      {"<|call|>", 200012},        {"<|endofprompt|>", 200018}, {"<|reserved_200000|>", 200000},
      {"<|reserved_201087|>", 201087}};
  for (const auto& [text, id] : specials) {
    EXPECT_EQ(tokenizer_->token_to_id(text), id) << text;
    EXPECT_TRUE(tokenizer_->is_special(id)) << text;
    EXPECT_EQ(tokenizer_->encode(text, false), std::vector<int32_t>{id}) << text;
  }
  EXPECT_EQ(tokenizer_->vocab_size(), 201088u);
  EXPECT_EQ(tokenizer_->bos_token_id(), 199998);
  EXPECT_EQ(tokenizer_->eos_token_id(), 200002);
  EXPECT_FALSE(tokenizer_->is_special(199997));
}

TEST_F(O200kTokenizerTest, EncodeMatchesJsTiktoken) {
  ASSERT_GT(cases_->size(), 300u);
  for (const auto& c : *cases_) {
    EXPECT_EQ(tokenizer_->encode(c.bytes, false), c.ids) << c.name;
    // gpt-oss adds no BOS: the post-processor is ByteLevel only.
    EXPECT_EQ(tokenizer_->encode(c.bytes, true), c.ids) << c.name;
  }
}

TEST_F(O200kTokenizerTest, DecodeRoundTrips) {
  for (const auto& c : *cases_) {
    EXPECT_EQ(tokenizer_->decode(c.ids, false), c.decoded) << c.name;
    std::vector<int32_t> ordinary;
    for (int32_t id : c.ids) {
      if (id < 199998) ordinary.push_back(id);
    }
    EXPECT_EQ(tokenizer_->decode(c.ids, true), tokenizer_->decode(ordinary, false)) << c.name;
    // The server's streaming path: one id at a time, specials kept (the harmony parser reads them).
    IncrementalDetokenizer stream(tokenizer_, false);
    std::string streamed;
    for (int32_t id : c.ids) streamed += stream.push(id);
    streamed += stream.flush();
    EXPECT_EQ(streamed, c.decoded) << c.name;
  }
}

}  // namespace
}  // namespace flare::text
