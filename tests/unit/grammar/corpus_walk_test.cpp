// Random walks through the token masks over the real Qwen3 and Llama 3 vocabularies, for every
// constraint of the corpus in tests/data/structured (JSON schemas, regular expressions, GBNF):
// what a random-weight model writes at temperature 1 (Gumbel-max over random logits) and at
// temperature 0 (argmax of fixed random logits), under a token budget. Every walk must end in a
// complete match within the budget; the texts are written (FLARE_GRAMMAR_WALKS=path, JSON
// lines) for tests/e2e/structured_outputs.sh to validate with an independent validator (ajv,
// JavaScript regular expressions).
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <random>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "grammar/grammar_cursor.h"
#include "server/grammar_constraint.h"
#include "vocabularies.h"

namespace flare::grammar {
namespace {

using json = nlohmann::ordered_json;

json load_corpus(const char* file) {
  std::ifstream in(std::filesystem::path(FLARE_TEST_DATA) / "structured" / file);
  return json::parse(in);
}

std::ofstream& walks_out() {
  static std::ofstream out = [] {
    const char* path = std::getenv("FLARE_GRAMMAR_WALKS");
    return path ? std::ofstream(path, std::ios::app) : std::ofstream();
  }();
  return out;
}

struct Walk {
  std::string text;
  bool complete = false;
  int n_tokens = 0;
};

// One walk: `temperature` 0 or 1 over logits fixed per vocabulary (a random-weight model's
// preferences) plus, at temperature 1, fresh Gumbel noise per step.
Walk walk(const std::shared_ptr<const TokenMasker>& masker, TokenId eos, const std::vector<float>& logits, int budget,
          int temperature, std::mt19937& rng) {
  GrammarCursor cursor(masker, eos >= 0 ? std::vector<TokenId>{eos} : std::vector<TokenId>{});
  Walk out;
  std::exponential_distribution<float> exp1(1.0f);
  while (out.n_tokens < budget && !cursor.ended()) {
    AllowedTokens allowed = cursor.next(budget - out.n_tokens);
    EXPECT_FALSE(allowed.empty());
    TokenId best = -1;
    float best_score = -INFINITY;
    auto consider = [&](TokenId t) {
      const float score = logits[std::size_t(t)] + (temperature > 0 ? -std::log(exp1(rng)) : 0.0f);
      if (score > best_score) best_score = score, best = t;
    };
    const auto& words = *allowed.mask;
    for (std::size_t w = 0; w < words.size(); ++w) {
      for (std::uint64_t bits = words[w]; bits != 0; bits &= bits - 1) consider(TokenId(w * 64 + std::size_t(__builtin_ctzll(bits))));
    }
    for (TokenId t : allowed.end_tokens) consider(t);
    if (best < 0) break;
    ++out.n_tokens;
    if (best != eos) out.text += masker->trie().token_bytes(best);
    EXPECT_TRUE(cursor.accept(best));
  }
  out.complete = cursor.ended() || cursor.can_end();
  return out;
}

void run_corpus(const char* kind, const json& corpus, const std::function<ConstraintSpec(const json&)>& spec_of) {
  for (const char* vocabulary : {"qwen3", "llama3"}) {
    const auto& v = testing::test_vocabulary(vocabulary);
    std::mt19937 rng(17);
    std::normal_distribution<float> normal(0.0f, 2.0f);
    std::vector<float> logits(std::size_t(v.frontend->vocab_size()));
    for (float& x : logits) x = normal(rng);
    for (const auto& entry : corpus) {
      const std::string name = entry["name"];
      std::shared_ptr<const TokenMasker> masker;
      try {
        masker = server::grammar_cache_for(*v.frontend).get(spec_of(entry));
      } catch (const GrammarError& e) {
        ADD_FAILURE() << kind << " " << name << ": " << e.what();
        continue;
      }
      for (int temperature : {0, 1, 1}) {
        const int budget = 160;
        Walk w = walk(masker, v.eos, logits, budget, temperature, rng);
        EXPECT_TRUE(w.complete) << kind << " " << name << " " << vocabulary << " t" << temperature << ": " << w.text;
        if (walks_out().is_open()) {
          json line = {{"kind", kind}, {"name", name}, {"vocabulary", vocabulary}, {"temperature", temperature},
                       {"complete", w.complete}, {"text", w.text}};
          walks_out() << line.dump(-1, ' ', false, json::error_handler_t::replace) << "\n";
        }
      }
    }
  }
  walks_out().flush();
}

TEST(CorpusWalk, JsonSchemas) {
  const json corpus = load_corpus("schemas.json");
  ASSERT_GE(corpus.size(), 50u);
  run_corpus("schema", corpus, [](const json& e) {
    ConstraintSpec spec;
    spec.kind = ConstraintSpec::Kind::json_schema;
    spec.schema = e["schema"];
    spec.path = "schema";
    return spec;
  });
}

TEST(CorpusWalk, RegularExpressions) {
  run_corpus("regex", load_corpus("regexes.json"), [](const json& e) {
    ConstraintSpec spec;
    spec.kind = ConstraintSpec::Kind::regex;
    spec.text = e["pattern"];
    spec.path = "regex";
    return spec;
  });
}

TEST(CorpusWalk, Gbnf) {
  run_corpus("gbnf", load_corpus("gbnf.json"), [](const json& e) {
    ConstraintSpec spec;
    spec.kind = ConstraintSpec::Kind::gbnf;
    spec.text = e["grammar"];
    spec.path = "grammar";
    return spec;
  });
}

}  // namespace
}  // namespace flare::grammar
