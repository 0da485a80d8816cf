// Golden tests against Hugging Face transformers (fixtures made by tools/make-reference-fixtures.py):
// for every tiny checkpoint, the CPU backend's logits match the reference at every position of every
// prompt (FP32 KV pages: tight; BF16 KV pages: BF16-level), greedy continuations are identical, chunked
// prefill equals one-shot prefill, and a batch of mixed lengths equals each sequence alone.
#include <gtest/gtest.h>

#include <cstdio>

#include "harness.h"

namespace flare::model::testing {
namespace {

class Fixture : public ::testing::TestWithParam<std::string> {
 protected:
  std::filesystem::path dir() const { return models_dir() / GetParam(); }
  std::shared_ptr<package::SafetensorsFile> reference() const {
    return package::SafetensorsFile::open(dir() / "reference.safetensors");
  }
  static std::int32_t n_prompts(const package::SafetensorsFile& ref) {
    std::int32_t n = 0;
    while (ref.find("prompt." + std::to_string(n))) ++n;
    return n;
  }
};

void check_logits(const std::filesystem::path& dir, const package::SafetensorsFile& ref, std::int32_t n_prompts,
                  helios::DType kv, double tolerance, const std::string& label) {
  Runner runner(dir, kv);
  double worst = 0;
  for (std::int32_t i = 0; i < n_prompts; ++i) {
    const auto prompt = tensor_values<std::int32_t>(ref, "prompt." + std::to_string(i));
    const auto expected = tensor_values<float>(ref, "logits." + std::to_string(i));
    helios::SequencePages seq(*runner.pool, runner.page_size);
    const auto logits = runner.prefill(seq, prompt);
    ASSERT_EQ(logits.size(), expected.size());
    const double error = max_relative_error(logits, expected);
    worst = std::max(worst, error);
    EXPECT_LT(error, tolerance) << label << " prompt " << i;
  }
  std::printf("[ %s ] %s logits: max relative error %.3g\n", dir.filename().c_str(), label.c_str(), worst);
}

TEST_P(Fixture, LogitsMatchReferenceWithF32Pages) {
  const auto ref = reference();
  check_logits(dir(), *ref, n_prompts(*ref), helios::DType::f32, 1e-5, "f32 KV");
}

TEST_P(Fixture, LogitsMatchReferenceWithBf16Pages) {
  const auto ref = reference();
  check_logits(dir(), *ref, n_prompts(*ref), helios::DType::bf16, 1e-2, "bf16 KV");
}

TEST_P(Fixture, LogitsMatchReferenceWithFp8Pages) {
  const auto ref = reference();
  check_logits(dir(), *ref, n_prompts(*ref), helios::DType::f8_e4m3, 1e-1, "fp8 KV");
}

TEST_P(Fixture, GreedyContinuationsAreIdentical) {
  const auto ref = reference();
  Runner runner(dir(), helios::DType::f32);
  for (std::int32_t i = 0; i < n_prompts(*ref); ++i) {
    const auto prompt = tensor_values<std::int32_t>(*ref, "prompt." + std::to_string(i));
    const auto expected = tensor_values<std::int32_t>(*ref, "greedy." + std::to_string(i));
    EXPECT_EQ(runner.greedy(prompt, std::int32_t(expected.size())), expected) << "prompt " << i;
  }
}

TEST_P(Fixture, ChunkedPrefillEqualsOneShot) {
  const auto ref = reference();
  Runner runner(dir(), helios::DType::f32);
  const auto prompt = tensor_values<std::int32_t>(*ref, "prompt.2");  // the longest
  helios::SequencePages one(*runner.pool, runner.page_size);
  const auto expected = runner.prefill(one, prompt);
  for (std::size_t chunk : {1, 3, 5, 8}) {
    helios::SequencePages seq(*runner.pool, runner.page_size);
    const auto logits = runner.prefill(seq, prompt, chunk);
    // Dynamic NTK rope follows the length seen so far, so chunks legitimately differ past the limit.
    if (runner.model->spec().rope.type == RopeType::dynamic &&
        std::int32_t(prompt.size()) > runner.model->spec().max_position_embeddings) {
      continue;
    }
    EXPECT_LT(max_relative_error(logits, expected), 1e-5) << "chunk " << chunk;
  }
}

TEST_P(Fixture, MixedBatchEqualsEachSequenceAlone) {
  const auto ref = reference();
  const std::int32_t n = n_prompts(*ref);
  Runner runner(dir(), helios::DType::f32);
  std::vector<std::vector<std::int32_t>> prompts;
  std::vector<std::vector<float>> alone;
  for (std::int32_t i = 0; i < n; ++i) {
    prompts.push_back(tensor_values<std::int32_t>(*ref, "prompt." + std::to_string(i)));
    helios::SequencePages seq(*runner.pool, runner.page_size);
    alone.push_back(runner.prefill(seq, prompts.back()));
  }
  // Two sequences already decoding plus the rest prefilling, in one step.
  std::vector<std::unique_ptr<helios::SequencePages>> seqs;
  std::vector<helios::SequencePages*> ptrs;
  std::vector<std::vector<std::int32_t>> first, second;
  for (std::int32_t i = 0; i < n; ++i) {
    seqs.push_back(std::make_unique<helios::SequencePages>(*runner.pool, runner.page_size));
    ptrs.push_back(seqs.back().get());
    const std::size_t head = i < 2 ? prompts[std::size_t(i)].size() - 1 : 0;
    first.emplace_back(prompts[std::size_t(i)].begin(), prompts[std::size_t(i)].begin() + std::ptrdiff_t(head));
    second.emplace_back(prompts[std::size_t(i)].begin() + std::ptrdiff_t(head), prompts[std::size_t(i)].end());
  }
  runner.step({ptrs[0], ptrs[1]}, {first[0], first[1]}, true);
  const auto batched = runner.step(ptrs, second, true);
  std::size_t offset = 0;
  for (std::int32_t i = 0; i < n; ++i) {
    const std::size_t n_rows = second[std::size_t(i)].size();
    const std::vector<float> got(batched.begin() + std::ptrdiff_t(offset * std::size_t(runner.vocab())),
                                 batched.begin() + std::ptrdiff_t((offset + n_rows) * std::size_t(runner.vocab())));
    const auto& all = alone[std::size_t(i)];
    const std::vector<float> want(all.end() - std::ptrdiff_t(n_rows * std::size_t(runner.vocab())), all.end());
    EXPECT_LT(max_relative_error(got, want), 1e-5) << "sequence " << i;
    offset += n_rows;
  }
}

INSTANTIATE_TEST_SUITE_P(Models, Fixture, ::testing::ValuesIn(fixture_names()),
                         [](const auto& info) {
                           std::string name = info.param;
                           for (char& c : name) {
                             if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
                           }
                           return name;
                         });

}  // namespace
}  // namespace flare::model::testing
