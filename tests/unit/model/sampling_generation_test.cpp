// Seeded sampling through the model and the backend's sample(): the same seed and prompt give the
// same tokens, whether the request runs alone or batched beside another; another seed differs.
#include <gtest/gtest.h>

#include "harness.h"

namespace flare::model::testing {
namespace {

// Generates n tokens for each prompt, all sequences batched in every step.
std::vector<std::vector<std::int32_t>> generate(Runner& runner, const std::vector<std::vector<std::int32_t>>& prompts,
                                                const std::vector<helios::SamplingParams>& params, int n) {
  std::vector<std::unique_ptr<helios::SequencePages>> seqs;
  std::vector<helios::SequencePages*> ptrs;
  for (std::size_t i = 0; i < prompts.size(); ++i) {
    seqs.push_back(std::make_unique<helios::SequencePages>(*runner.pool, runner.page_size));
    ptrs.push_back(seqs.back().get());
  }
  std::vector<std::vector<std::int32_t>> outputs(prompts.size()), inputs = prompts;
  for (int step = 0; step < n; ++step) {
    runner.step(ptrs, inputs, false);
    std::vector<helios::SampleRequest> requests;
    for (std::size_t i = 0; i < prompts.size(); ++i) {
      requests.push_back({&params[i], {prompts[i], outputs[i]}, std::uint64_t(step)});
    }
    const auto sampled = runner.backend->sample(runner.last_logits(), requests);
    for (std::size_t i = 0; i < prompts.size(); ++i) {
      outputs[i].push_back(sampled[i].token);
      EXPECT_LE(sampled[i].logprob, 0.0f);
      inputs[i] = {sampled[i].token};
    }
  }
  return outputs;
}

TEST(SeededSampling, SameSeedSameTokensAloneOrBatched) {
  Runner runner(models_dir() / "llama-gqa2-hd64-untied-sharded");  // flat logits: draws vary
  helios::SamplingParams a;
  a.temperature = 2.0f;
  a.top_p = 0.95f;
  a.seed = 1234;
  helios::SamplingParams b = a;
  b.seed = 99;
  b.temperature = 0.7f;
  const std::vector<std::int32_t> p1 = {5, 17, 200, 3, 44}, p2 = {9, 9, 1};
  const auto alone = generate(runner, {p1}, {a}, 24)[0];
  const auto again = generate(runner, {p1}, {a}, 24)[0];
  const auto batched = generate(runner, {p2, p1}, {b, a}, 24);
  EXPECT_EQ(alone, again);
  EXPECT_EQ(alone, batched[1]);
  helios::SamplingParams c = a;
  c.seed = 1235;
  EXPECT_NE(alone, generate(runner, {p1}, {c}, 24)[0]);
  EXPECT_EQ(runner.pool->n_used(), 0);
}

}  // namespace
}  // namespace flare::model::testing
