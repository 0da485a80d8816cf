// Structured-output benchmark: grammar compile times for the schema corpus and token-mask times
// per token over a real vocabulary.
//
//   grammar_bench TOKENIZER_DIR SCHEMAS_JSON [WALKS]
//
// TOKENIZER_DIR holds tokenizer.json and tokenizer_config.json (uncompressed: `xz -dk`), e.g. the
// Qwen3 tokenizer of tests/data/tokenizers (151,669 tokens). SCHEMAS_JSON: tests/data/structured/
// schemas.json. Prints, in thread CPU time: the vocabulary trie's build; each schema's compile
// (best of 3; median and max over the corpus); for the corpus's nested "invoice" schema, a
// mask computed afresh per state (mean, max) and the per-token cost of GrammarCursor::next +
// accept along WALKS random walks (temperature 1 over random logits), the first with the
// grammar's mask cache empty and the rest with it warm (what requests repeating a schema see).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <numeric>
#include <random>
#include <sstream>

#include <nlohmann/json.hpp>

#include "grammar/constraint_spec.h"
#include "grammar/grammar_cursor.h"
#include "server/text_frontend.h"

namespace {

using namespace flare;

double cpu_us() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return double(ts.tv_sec) * 1e6 + double(ts.tv_nsec) * 1e-3;
}

std::string read(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s TOKENIZER_DIR SCHEMAS_JSON [WALKS]\n", argv[0]);
    return 2;
  }
  const int n_walks = argc > 3 ? std::atoi(argv[3]) : 5;
  server::TextFrontendAssets assets;
  assets.tokenizer_json = read(std::string(argv[1]) + "/tokenizer.json");
  assets.tokenizer_config_json = read(std::string(argv[1]) + "/tokenizer_config.json");
  auto frontend = server::make_text_frontend(assets);
  auto vocabulary = frontend->token_vocabulary();
  double t = cpu_us();
  auto trie = std::make_shared<const grammar::VocabularyTrie>(vocabulary->bytes, vocabulary->control);
  std::printf("vocabulary %zu tokens, trie %zu nodes, built in %.0f ms\n", trie->vocab_size(), trie->n_nodes(), (cpu_us() - t) / 1e3);

  const auto corpus = nlohmann::ordered_json::parse(read(argv[2]));
  std::vector<double> compile_us;
  std::string slowest;
  nlohmann::ordered_json nested;
  for (const auto& entry : corpus) {
    grammar::ConstraintSpec spec;
    spec.kind = grammar::ConstraintSpec::Kind::json_schema;
    spec.schema = entry["schema"];
    double best = 1e18;
    for (int i = 0; i < 3; ++i) {
      t = cpu_us();
      grammar::Grammar g = grammar::compile_constraint(spec);
      best = std::min(best, cpu_us() - t);
    }
    if (compile_us.empty() || best > *std::max_element(compile_us.begin(), compile_us.end())) slowest = entry["name"];
    compile_us.push_back(best);
    if (entry["name"] == "invoice") nested = entry["schema"];
  }
  std::printf("compile: %zu schemas, median %.0f us, max %.0f us (%s)\n", compile_us.size(), median(compile_us),
              *std::max_element(compile_us.begin(), compile_us.end()), slowest.c_str());

  grammar::ConstraintSpec spec;
  spec.kind = grammar::ConstraintSpec::Kind::json_schema;
  spec.schema = nested;
  auto masker = std::make_shared<const grammar::TokenMasker>(std::make_shared<const grammar::Grammar>(grammar::compile_constraint(spec)), trie);
  std::mt19937 rng(3);
  std::normal_distribution<float> normal(0.0f, 2.0f);
  std::vector<float> logits(trie->vocab_size());
  for (float& x : logits) x = normal(rng);
  std::exponential_distribution<float> exp1(1.0f);
  std::vector<double> fresh;
  for (int w = 0; w < n_walks; ++w) {
    grammar::GrammarCursor cursor(masker, {});
    double spent = 0;
    int n = 0;
    const int budget = 400;
    while (!cursor.ended() && n < budget) {
      if (w == 0) {  // the same state's mask computed afresh, outside the timed walk
        grammar::Matcher copy = cursor.matcher();
        const double a = cpu_us();
        (void)masker->compute(copy);
        fresh.push_back(cpu_us() - a);
      }
      const double a = cpu_us();
      grammar::AllowedTokens allowed = cursor.next(budget - n);
      spent += cpu_us() - a;
      grammar::TokenId best = -1;
      float best_score = -INFINITY;
      for (std::size_t i = 0; i < allowed.mask->size(); ++i) {
        for (std::uint64_t bits = (*allowed.mask)[i]; bits != 0; bits &= bits - 1) {
          const auto id = grammar::TokenId(i * 64 + std::size_t(__builtin_ctzll(bits)));
          const float score = logits[std::size_t(id)] - std::log(exp1(rng));
          if (score > best_score) best_score = score, best = id;
        }
      }
      const double b = cpu_us();
      cursor.accept(best);
      spent += cpu_us() - b;
      ++n;
    }
    std::printf("walk %d (%s cache): %d tokens, %.1f us per token (next + accept)%s\n", w, w == 0 ? "cold" : "warm", n,
                spent / n, cursor.ended() ? "" : ", not complete");
  }
  std::printf("mask computed afresh: %zu states, mean %.0f us, median %.0f us, max %.0f us\n", fresh.size(),
              fresh.empty() ? 0 : std::accumulate(fresh.begin(), fresh.end(), 0.0) / fresh.size(), median(fresh),
              fresh.empty() ? 0 : *std::max_element(fresh.begin(), fresh.end()));
  return 0;
}
