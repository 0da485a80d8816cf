// Whole-tokenizer behaviour on small hand-written tokenizer.json files (BPE merge order,
// unknowns, byte fallback, ignore_merges, added-token flags, post-processors, config fields),
// malformed and hostile files, and the committed tokenizers' config accessors and thread safety.
#include <gtest/gtest.h>

#include <random>
#include <thread>

#include <nlohmann/json.hpp>

#include "common/error.h"
#include "text/tokenizer.h"
#include "text/unicode.h"
#include "tokenizer_test_util.h"

namespace flare::text {
namespace {

using nlohmann::json;
using Ids = std::vector<int32_t>;

// A character-level BPE over a few letters; `patch` is merged into the default document.
json mini(const json& patch = json::object()) {
  json doc = json::parse(R"({
    "version": "1.0", "truncation": null, "padding": null,
    "added_tokens": [],
    "normalizer": null,
    "pre_tokenizer": {"type": "WhitespaceSplit"},
    "post_processor": null,
    "decoder": null,
    "model": {"type": "BPE", "dropout": null, "unk_token": null, "fuse_unk": false, "byte_fallback": false,
              "vocab": {"a": 0, "b": 1, "c": 2, "ab": 3, "bc": 4, "abc": 5, "aa": 6, " ": 7},
              "merges": ["b c", "a b", "a bc", "a a"]}
  })");
  doc.merge_patch(patch);
  return doc;
}

std::shared_ptr<const Tokenizer> load(const json& doc, const json& config = json::object()) {
  return Tokenizer::load_from_json(doc.dump(), config.empty() ? std::string() : config.dump());
}

TEST(TokenizerBpe, MergesByRankLeftmostFirst) {
  auto tok = load(mini());
  EXPECT_EQ(tok->encode("abc", false), (Ids{5}));     // b c (rank 0), then a bc (rank 2)
  EXPECT_EQ(tok->encode("aaa", false), (Ids{6, 0}));  // leftmost pair first on equal ranks
  EXPECT_EQ(tok->encode("ab ab", false), (Ids{3, 3}));
  EXPECT_EQ(tok->encode("", false), Ids{});
  // A long word takes the heap path; it must agree with the short-word path piece by piece.
  std::string long_word;
  for (int i = 0; i < 50; ++i) long_word += "abc";
  EXPECT_EQ(tok->encode(long_word, false), Ids(50, 5));
  std::string long_a(201, 'a');
  Ids want(100, 6);
  want.push_back(0);
  EXPECT_EQ(tok->encode(long_a, false), want);
}

TEST(TokenizerBpe, UnknownsDroppedUnkFusedOrByteFallback) {
  EXPECT_EQ(load(mini())->encode("axb", false), (Ids{0, 1}));  // no unk token: dropped
  json with_unk = mini({{"model", {{"unk_token", "<unk>"}, {"vocab", {{"<unk>", 8}}}}}});
  EXPECT_EQ(load(with_unk)->encode("axyb", false), (Ids{0, 8, 8, 1}));
  with_unk["model"]["fuse_unk"] = true;
  EXPECT_EQ(load(with_unk)->encode("axyb", false), (Ids{0, 8, 1}));
  json fallback = mini({{"model", {{"byte_fallback", true}, {"vocab", {{"<0xC3>", 9}, {"<0xA9>", 10}}}}}});
  EXPECT_EQ(load(fallback)->encode("a\xC3\xA9", false), (Ids{0, 9, 10}));
  json bad_unk = mini({{"model", {{"unk_token", "<missing>"}}}});
  EXPECT_THROW(load(bad_unk), Error);
}

TEST(TokenizerBpe, IgnoreMerges) {
  json doc = mini({{"model", {{"vocab", {{"cab", 9}}}}}});
  EXPECT_EQ(load(doc)->encode("cab", false), (Ids{2, 3}));
  doc["model"]["ignore_merges"] = true;
  EXPECT_EQ(load(doc)->encode("cab", false), (Ids{9}));
}

json added(const char* content, int id, bool special, json flags = json::object()) {
  json t = {{"id", id}, {"content", content}, {"special", special}, {"single_word", false},
            {"lstrip", false}, {"rstrip", false}, {"normalized", false}};
  t.merge_patch(flags);
  return t;
}

TEST(TokenizerAddedTokens, LongestMatchAndFlags) {
  json doc = mini();
  doc["added_tokens"] = json::array({added("<s>", 20, true), added("<s><s>", 21, true), added("<x>", 22, false)});
  doc["pre_tokenizer"] = nullptr;
  auto tok = load(doc);
  EXPECT_EQ(tok->encode("a<s><s>b<s>", false), (Ids{0, 21, 1, 20}));
  EXPECT_EQ(tok->encode("<s", false), (Ids{}));  // '<' and 's' are unknown characters: dropped
  EXPECT_EQ(tok->decode(Ids{0, 21, 22, 1}, false), "a <s><s> <x> b");
  EXPECT_EQ(tok->decode(Ids{0, 21, 22, 1}, true), "a <x> b");  // no decoder: tokens joined by spaces
  EXPECT_TRUE(tok->is_special(20));
  EXPECT_FALSE(tok->is_special(22));
  EXPECT_TRUE(tok->is_added(22));
  EXPECT_EQ(tok->token_to_id("<x>"), 22);
  EXPECT_EQ(tok->id_to_token(21), "<s><s>");
  EXPECT_EQ(tok->vocab_size(), 23u);

  doc["added_tokens"] = json::array({added("<l>", 20, true, {{"lstrip", true}}), added("<r>", 21, true, {{"rstrip", true}})});
  tok = load(doc);
  EXPECT_EQ(tok->encode("a  <l> b", false), (Ids{0, 20, 7, 1}));
  EXPECT_EQ(tok->encode("a <r>  b", false), (Ids{0, 7, 21, 1}));

  doc["added_tokens"] = json::array({added("ab", 20, false, {{"single_word", true}})});
  tok = load(doc);
  EXPECT_EQ(tok->encode("ab", false), (Ids{20}));
  EXPECT_EQ(tok->encode("cab", false), (Ids{2, 3}));
  EXPECT_EQ(tok->encode("c ab", false), (Ids{2, 7, 20}));
}

TEST(TokenizerAddedTokens, NormalizedAndSplitSpecialTokens) {
  json doc = mini();
  doc["normalizer"] = {{"type", "Lowercase"}};
  doc["added_tokens"] = json::array({added("ABC", 20, false, {{"normalized", true}}), added("<S>", 21, true)});
  auto tok = load(doc);
  EXPECT_EQ(tok->encode("AbC", false), (Ids{20}));  // matched after normalization
  EXPECT_EQ(tok->encode("<S>", false), (Ids{21}));  // matched before normalization
  auto split = load(doc, {{"split_special_tokens", true}});
  EXPECT_TRUE(split->split_special_tokens());
  EXPECT_EQ(split->encode("<S>", false), (Ids{}));  // treated as text: characters not in the vocabulary
}

TEST(TokenizerPostProcessor, TemplateAndBosEosFlags) {
  json doc = mini();
  doc["added_tokens"] = json::array({added("<s>", 20, true), added("</s>", 21, true)});
  doc["post_processor"] = json::parse(R"({"type":"TemplateProcessing",
      "single":[{"SpecialToken":{"id":"<s>","type_id":0}},{"Sequence":{"id":"A","type_id":0}},{"SpecialToken":{"id":"</s>","type_id":0}}],
      "pair":[], "special_tokens":{"<s>":{"id":"<s>","ids":[20],"tokens":["<s>"]},"</s>":{"id":"</s>","ids":[21],"tokens":["</s>"]}}})");
  auto tok = load(doc);
  EXPECT_EQ(tok->encode("ab", true), (Ids{20, 3, 21}));
  EXPECT_EQ(tok->encode("ab", false), (Ids{3}));
  // Llama/Gemma tokenizer classes rebuild the template from add_bos_token / add_eos_token.
  json config = {{"tokenizer_class", "LlamaTokenizerFast"}, {"bos_token", "<s>"}, {"eos_token", "</s>"},
                 {"add_bos_token", false}, {"add_eos_token", true}};
  tok = load(doc, config);
  EXPECT_EQ(tok->encode("ab", true), (Ids{3, 21}));
  EXPECT_EQ(tok->bos_token_id(), 20);
  EXPECT_FALSE(tok->add_bos_token());
  EXPECT_TRUE(tok->add_eos_token());
  // Other classes keep the tokenizer.json post-processor.
  config["tokenizer_class"] = "PreTrainedTokenizerFast";
  EXPECT_EQ(load(doc, config)->encode("ab", true), (Ids{20, 3, 21}));

  doc["post_processor"] = json::parse(R"({"type":"RobertaProcessing","sep":["</s>",21],"cls":["<s>",20]})");
  EXPECT_EQ(load(doc)->encode("ab", true), (Ids{20, 3, 21}));
  doc["post_processor"] = json::parse(R"({"type":"TemplateProcessing","single":[{"Sequence":{"id":"B","type_id":0}}],"special_tokens":{}})");
  EXPECT_THROW(load(doc), Error);
  doc["post_processor"] = json::parse(R"({"type":"TemplateProcessing","single":[{"SpecialToken":{"id":"<q>","type_id":0}},{"Sequence":{"id":"A","type_id":0}}],"special_tokens":{}})");
  EXPECT_THROW(load(doc), Error);
}

TEST(TokenizerConfig, FieldsAndTemplates) {
  json config = {{"bos_token", {{"__type", "AddedToken"}, {"content", "ab"}}},
                 {"eos_token", "abc"},
                 {"pad_token", nullptr},
                 {"clean_up_tokenization_spaces", false},
                 {"additional_special_tokens", {"aa"}},
                 {"chat_template", json::array({{{"name", "default"}, {"template", "{{ x }}"}},
                                                {{"name", "tool_use"}, {"template", "{{ y }}"}}})}};
  auto tok = load(mini(), config);
  EXPECT_EQ(tok->bos_token(), "ab");
  EXPECT_EQ(tok->bos_token_id(), 3);
  EXPECT_EQ(tok->eos_token_id(), 5);
  EXPECT_FALSE(tok->pad_token_id());
  EXPECT_EQ(tok->chat_template(), "{{ x }}");
  ASSERT_EQ(tok->chat_templates().size(), 2u);
  EXPECT_EQ(tok->chat_templates()[1].first, "tool_use");
  EXPECT_TRUE(tok->is_special(6));  // additional_special_tokens
  EXPECT_EQ(tok->decode(Ids{6, 0}, true), "a");
  EXPECT_FALSE(tok->clean_up_tokenization_spaces());
  EXPECT_THROW(load(mini(), {{"chat_template", 5}}), Error);
  EXPECT_THROW(load(mini(), {{"bos_token", 5}}), Error);
  EXPECT_THROW(Tokenizer::load_from_json(mini().dump(), "{not json"), Error);
}

TEST(TokenizerDecode, CleanUpAndOutOfRange) {
  json doc = mini();
  doc["model"]["vocab"]["."] = 8;
  auto tok = load(doc);  // clean_up_tokenization_spaces defaults to true, as in the reference
  EXPECT_EQ(tok->decode(Ids{0, 8}, false), "a.");
  EXPECT_EQ(tok->decode(Ids{0, 8}, false, false), "a .");
  EXPECT_EQ(tok->decode(Ids{-1, 0, 999, 1}, false), "a b");
  EXPECT_EQ(tok->decode(Ids{}, false), "");
  EXPECT_EQ(tok->id_to_token(-3), "");
  EXPECT_FALSE(tok->token_to_id("zzz"));
}

TEST(TokenizerMalformed, RejectedWithErrors) {
  auto rejects = [](const std::string& text) {
    try {
      Tokenizer::load_from_json(text, "");
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()), "");
      return true;
    }
    return false;
  };
  EXPECT_TRUE(rejects(""));
  EXPECT_TRUE(rejects("not json"));
  EXPECT_TRUE(rejects("[]"));
  EXPECT_TRUE(rejects("{}"));
  EXPECT_TRUE(rejects(R"({"model":{"type":"Unigram","vocab":[]}})"));
  EXPECT_TRUE(rejects(R"({"model":{"type":"WordPiece","vocab":{}}})"));
  EXPECT_TRUE(rejects(R"({"model":{"type":"BPE","vocab":{"a":"zero"},"merges":[]}})"));
  EXPECT_TRUE(rejects(R"({"model":{"type":"BPE","vocab":{"a":-1},"merges":[]}})"));
  EXPECT_TRUE(rejects(R"({"model":{"type":"BPE","vocab":{"a":99999999999},"merges":[]}})"));
  EXPECT_TRUE(rejects(R"({"model":{"type":"BPE","vocab":{"a":0},"merges":["a b"]}})"));
  EXPECT_TRUE(rejects(R"({"model":{"type":"BPE","vocab":{"a":0},"merges":["ab"]}})"));
  EXPECT_TRUE(rejects(R"({"model":{"type":"BPE","vocab":{"a":0},"merges":[3]}})"));
  EXPECT_TRUE(rejects(R"({"model":{"type":"BPE","vocab":{"a":0},"merges":[["a"]]}})"));
  EXPECT_TRUE(rejects(R"({"model":{"type":"BPE","vocab":{"a":0},"merges":[["a","a","a"]]}})"));
  EXPECT_TRUE(rejects(R"({"model":{"type":"BPE","vocab":{"a":0}}})"));
  EXPECT_TRUE(rejects(R"({"model":{"type":"BPE","merges":[]}})"));
  EXPECT_TRUE(rejects(R"({"model":{"type":"BPE","vocab":{"a":0},"merges":[],"dropout":0.1}})"));
  EXPECT_TRUE(rejects(R"({"model":{"type":"BPE","vocab":{"a":0},"merges":[],"continuing_subword_prefix":"##"}})"));
  EXPECT_TRUE(rejects(R"({"model":{"type":"BPE","vocab":{"a":0},"merges":[]},"truncation":{"max_length":5}})"));
  EXPECT_TRUE(rejects(R"({"model":{"type":"BPE","vocab":{"a":0},"merges":[]},"added_tokens":[{"content":"x"}]})"));
  EXPECT_TRUE(rejects(R"({"model":{"type":"BPE","vocab":{"a":0},"merges":[]},"added_tokens":[{"id":1,"content":""}]})"));
  EXPECT_TRUE(rejects(R"({"model":{"type":"BPE","vocab":{"a":0},"merges":[]},"pre_tokenizer":{"type":"Nope"}})"));
  EXPECT_TRUE(rejects(R"({"model":{"type":"BPE","vocab":{"a":0},"merges":[]},"decoder":{"type":"CTC"}})"));
  EXPECT_TRUE(rejects(R"({"model":{"type":"BPE","vocab":{"a":0},"merges":[]},"post_processor":{"type":"BertProcessing"}})"));
  EXPECT_TRUE(rejects(R"({"model":{"type":"BPE","vocab":{"a":0},"merges":[]},"normalizer":{"type":"Replace","pattern":{"Regex":"[a-"},"content":""}})"));
  // Hostile: deep nesting, truncated documents, stray bytes.
  EXPECT_TRUE(rejects(std::string(100000, '[') + std::string(100000, ']')));
  std::string doc = mini().dump();
  for (size_t cut : {doc.size() / 3, doc.size() / 2, doc.size() - 1}) EXPECT_TRUE(rejects(doc.substr(0, cut)));
  EXPECT_TRUE(rejects(doc + "\xFF"));
  EXPECT_FALSE(rejects(doc));
}

TEST(TokenizerCommitted, ConfigAccessors) {
  auto qwen = testing::committed_tokenizer("qwen3");
  EXPECT_EQ(qwen->eos_token(), "<|im_end|>");
  EXPECT_EQ(qwen->eos_token_id(), 151645);
  EXPECT_EQ(qwen->pad_token_id(), 151643);
  EXPECT_FALSE(qwen->bos_token_id());
  EXPECT_FALSE(qwen->add_bos_token());
  EXPECT_NE(qwen->chat_template().find("<|im_start|>"), std::string::npos);
  EXPECT_TRUE(qwen->is_special(151644));
  EXPECT_FALSE(qwen->is_special(151667));  // <think> is an added, non-special token
  EXPECT_EQ(qwen->token_to_id("<think>"), 151667);
  EXPECT_EQ(qwen->token_to_id("\xC4\xA0the"), 279);  // "Ġthe"
  EXPECT_EQ(qwen->id_to_token(279), "\xC4\xA0the");
  EXPECT_EQ(qwen->vocab_size(), 151669u);

  auto gemma = testing::committed_tokenizer("gemma3");
  EXPECT_EQ(gemma->bos_token_id(), 2);
  EXPECT_EQ(gemma->eos_token(), "<end_of_turn>");
  EXPECT_TRUE(gemma->add_bos_token());
  EXPECT_EQ(gemma->encode("hi", true).front(), 2);

  auto deepseek = testing::committed_tokenizer("deepseek_v3");
  EXPECT_EQ(deepseek->bos_token_id(), 0);
  EXPECT_EQ(deepseek->encode("hi", true).front(), 0);
  EXPECT_EQ(deepseek->eos_token_id(), 1);

  auto llama = testing::committed_tokenizer("llama3");
  EXPECT_EQ(llama->bos_token_id(), 128000);
  EXPECT_TRUE(llama->clean_up_tokenization_spaces());

  auto demo = testing::committed_tokenizer("demo");
  EXPECT_EQ(demo->eos_token_id(), 0);
  EXPECT_FALSE(demo->chat_template().empty());
}

TEST(TokenizerCommitted, LoadFromDirectory) {
  std::filesystem::path dir = std::filesystem::path(FLARE_BINARY_DIR) / "tokenizer_test_demo";
  std::filesystem::create_directories(dir);
  {
    std::ofstream(dir / "tokenizer.json") << testing::read_maybe_xz(testing::tokenizer_data_dir() / "demo/tokenizer.json");
  }
  auto tok = Tokenizer::load(dir);
  EXPECT_EQ(tok->encode("def f():", false), testing::committed_tokenizer("demo")->encode("def f():", false));
  EXPECT_TRUE(tok->config_json().empty());
  {
    std::ofstream(dir / "chat_template.jinja") << "{{ messages }}";
  }
  EXPECT_EQ(Tokenizer::load(dir)->chat_template(), "{{ messages }}");
  EXPECT_THROW(Tokenizer::load(dir / "missing"), Error);
  std::filesystem::remove_all(dir);
}

TEST(TokenizerCommitted, ConcurrentEncodeMatchesSerial) {
  auto tok = testing::committed_tokenizer("qwen3");
  const auto& cases = testing::corpus();
  std::vector<Ids> serial;
  for (const auto& c : cases) serial.push_back(tok->encode(c.bytes, true));
  std::vector<std::thread> threads;
  std::vector<int> mismatches(4, 0);
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int round = 0; round < 3; ++round) {
        for (size_t i = 0; i < cases.size(); ++i) {
          size_t k = (i + static_cast<size_t>(t) * 7) % cases.size();
          if (tok->encode(cases[k].bytes, true) != serial[k]) ++mismatches[static_cast<size_t>(t)];
          if (tok->decode(serial[k], false) != tok->decode(serial[k], false)) ++mismatches[static_cast<size_t>(t)];
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(mismatches, std::vector<int>(4, 0));
}

}  // namespace
}  // namespace flare::text

namespace flare::text {
namespace {

// Random bytes (mostly invalid UTF-8) and random code points: encoding never fails, and for the
// byte-level tokenizers without a normalizer, decoding gives back the repaired input.
TEST(TokenizerCommitted, RandomInputRoundTrips) {
  std::mt19937 rng(77);
  auto random_bytes = [&](size_t n) {
    std::string s(n, '\0');
    for (auto& c : s) c = static_cast<char>(rng());
    return s;
  };
  auto random_code_points = [&](size_t n) {
    std::string s;
    std::uniform_int_distribution<uint32_t> plane(0, 0x2FFFF);
    while (s.size() < n) {
      uint32_t cp = plane(rng);
      if (cp >= 0xD800 && cp <= 0xDFFF) continue;
      utf8_append(s, cp);
    }
    return s;
  };
  for (const auto& name : testing::committed_tokenizer_names()) {
    auto tok = testing::committed_tokenizer(name);
    bool lossless = name == "llama3" || name == "deepseek_v3" || name == "demo";
    for (int i = 0; i < 100; ++i) {
      std::string input = i % 2 ? random_bytes(1 + rng() % 300) : random_code_points(1 + rng() % 300);
      std::vector<int32_t> ids;
      ASSERT_NO_THROW(ids = tok->encode(input, false)) << name;
      std::string text = tok->decode(ids, false, false);
      EXPECT_TRUE(utf8_is_valid(text)) << name;
      if (lossless) EXPECT_EQ(text, utf8_repair(input)) << name << " case " << i;
    }
  }
}

}  // namespace
}  // namespace flare::text
