// A deterministic stand-in for a model, for scheduler and engine tests. It keeps a fake KV cache
// (the token written at every page slot) and makes each position's logits a function of every
// token read back through the row's block table, so outputs match the reference (logits_for on
// the logical token sequence) only if the scheduler's pages, forks, copy-on-write, prefix-cache
// hits and recomputation are all right. Reading a slot never written throws.
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "engine/sampling_plan.h"
#include "engine/scheduler.h"
#include "helios/backend.h"
#include "helios/sampling.h"
#include "helios/step.h"

namespace flare::engine::testing {

inline std::uint64_t fake_mix(std::uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ull;
  return x ^ (x >> 33);
}

class FakeModel {
 public:
  FakeModel(std::int32_t n_pages, std::int32_t page_size, std::int32_t vocab)
      : page_size_(page_size), vocab_(vocab), kv_(std::size_t(n_pages) * std::size_t(page_size), -1) {}

  std::int32_t vocab() const { return vocab_; }

  // Logits after the tokens `prefix` (the reference): one clear favourite plus spread. The
  // favourite is a hash of the prefix, or with copy_period > 0 the token copy_period - 1 positions
  // before the last (the sequence repeats with that period: history drafts find it).
  std::vector<float> logits_for(std::span<const std::int32_t> prefix) const {
    std::uint64_t h = 0x1234;
    for (std::int32_t t : prefix) h = fake_mix(h ^ std::uint64_t(std::uint32_t(t)));
    const auto n = std::int32_t(prefix.size());
    return logits_from_hash(h, copy_period > 0 && n >= copy_period ? prefix[std::size_t(n - copy_period)] : -1);
  }

  std::int32_t copy_period = 0;
  // > 0: one favourite in about `perturb` is moved to the next token id (a draft model that
  // mostly agrees with an unperturbed target).
  std::int32_t perturb = 0;

  void run(const helios::Step& step, std::span<const helios::PageCopy> copies, std::span<float> logits) {
    for (const auto& copy : copies) {
      for (std::int32_t i = 0; i < page_size_; ++i) {
        kv_[slot(copy.dst_page, i)] = kv_[slot(copy.src_page, i)];
      }
    }
    std::size_t token_offset = 0;
    std::size_t logit_row = 0;
    for (const auto& row : step.rows) {
      auto table = std::span(step.block_tables).subspan(std::size_t(row.first_block), std::size_t(row.n_blocks));
      for (std::int32_t i = 0; i < row.n_tokens; ++i) {
        const std::int32_t pos = row.start_position + i;
        kv_[slot(table[std::size_t(pos / page_size_)], pos % page_size_)] = step.tokens[token_offset + std::size_t(i)];
      }
      for (std::int32_t i = row.n_tokens - row.n_logits; i < row.n_tokens; ++i) {
        const std::int32_t pos = row.start_position + i;
        std::uint64_t h = 0x1234;
        std::int32_t favourite = -1;
        for (std::int32_t p = 0; p <= pos; ++p) {
          const std::int32_t t = kv_[slot(table[std::size_t(p / page_size_)], p % page_size_)];
          if (t < 0) throw std::runtime_error("fake model read an unwritten KV slot at position " + std::to_string(p));
          h = fake_mix(h ^ std::uint64_t(std::uint32_t(t)));
          if (copy_period > 0 && p == pos + 1 - copy_period) favourite = t;
        }
        auto out = logits_from_hash(h, favourite);
        std::copy(out.begin(), out.end(), logits.begin() + std::ptrdiff_t(logit_row * std::size_t(vocab_)));
        ++logit_row;
      }
      token_offset += std::size_t(row.n_tokens);
    }
    ++n_runs;
  }

  // The StepRunner contract over run(): samples the plan's rows as Backend::sample's host default
  // does (helios::sample_token) and copies out only its host rows, counting both.
  void run(const helios::Step& step, std::span<const helios::PageCopy> copies, const SamplingPlan& plan,
           StepResults& out) {
    sampling_plan_validate(plan, step.n_logit_rows());
    all_logits_.assign(std::size_t(step.n_logit_rows()) * std::size_t(vocab_), 0.0f);
    run(step, copies, all_logits_);
    out.sampled.clear();
    for (std::size_t i = 0; i < plan.sampled_rows.size(); ++i) {
      const helios::SampleRequest& request = plan.requests[i];
      out.sampled.push_back(helios::sample_token(row(plan.sampled_rows[i]), *request.params, request.history,
                                                 request.output_index));
    }
    out.host_logits.clear();
    for (std::int32_t r : plan.host_rows) out.host_logits.insert(out.host_logits.end(), row(r).begin(), row(r).end());
    n_logit_rows += step.n_logit_rows();
    n_sampled_rows += std::int64_t(plan.sampled_rows.size());
    n_host_rows += std::int64_t(plan.host_rows.size());
  }

  // The argmax of each logits row of `step` (a greedy draft forward, draft_plan.h).
  std::vector<std::int32_t> greedy(const helios::Step& step, std::span<const helios::PageCopy> copies) {
    all_logits_.assign(std::size_t(step.n_logit_rows()) * std::size_t(vocab_), 0.0f);
    run(step, copies, all_logits_);
    std::vector<std::int32_t> out;
    for (std::int32_t r = 0; r < step.n_logit_rows(); ++r) {
      const auto logits = row(r);
      out.push_back(std::int32_t(std::max_element(logits.begin(), logits.end()) - logits.begin()));
    }
    return out;
  }

  std::int64_t n_runs = 0;
  std::int64_t n_logit_rows = 0;    // over all runs
  std::int64_t n_sampled_rows = 0;  // of them, sampled "on the backend"
  std::int64_t n_host_rows = 0;     // of them, handed to the host

 private:
  std::span<const float> row(std::int32_t r) const {
    return std::span<const float>(all_logits_).subspan(std::size_t(r) * std::size_t(vocab_), std::size_t(vocab_));
  }
  std::size_t slot(std::int32_t page, std::int32_t i) const { return std::size_t(page) * std::size_t(page_size_) + std::size_t(i); }
  std::vector<float> logits_from_hash(std::uint64_t h, std::int32_t favourite) const {
    std::vector<float> out(static_cast<std::size_t>(vocab_));
    for (std::int32_t v = 0; v < vocab_; ++v) out[std::size_t(v)] = float(fake_mix(h + std::uint64_t(v)) % 1000) / 400.0f;
    std::int32_t best = favourite >= 0 ? favourite : std::int32_t(h % std::uint64_t(vocab_));
    if (perturb > 0 && (h >> 17) % std::uint64_t(perturb) == 0) best = (best + 1) % vocab_;
    out[std::size_t(best)] += 4.0f;
    return out;
  }

  std::int32_t page_size_;
  std::int32_t vocab_;
  std::vector<std::int32_t> kv_;  // [n_pages * page_size] token written at each slot
  std::vector<float> all_logits_;  // [n_logit_rows, vocab] of the last planned run
};

// The tokens a choice must produce: sampling from the reference logits with the choice's seed.
inline std::vector<std::int32_t> reference_tokens(const FakeModel& model, std::vector<std::int32_t> prompt,
                                                  helios::SamplingParams params, std::int32_t choice_index,
                                                  std::int32_t n_tokens) {
  params.seed = scheduler_choice_seed(params.seed, choice_index);
  params.n_top_logprobs = 0;
  std::vector<std::int32_t> output;
  std::vector<std::int32_t> all = prompt;
  for (std::int32_t i = 0; i < n_tokens; ++i) {
    const auto logits = model.logits_for(all);
    const auto token = helios::sample_token(logits, params, {prompt, output}, std::uint64_t(i)).token;
    output.push_back(token);
    all.push_back(token);
  }
  return output;
}

}  // namespace flare::engine::testing
