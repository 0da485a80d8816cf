// Speculative rounds on the CUDA backend (see round_bench.h).
#include "bench/cuda/round_bench.h"

#include <algorithm>

#include <fmt/format.h>

#include "bench/bench_steps.h"
#include "bench/cuda/event_timer.h"
#include "common/error.h"

namespace flare::bench::cuda {
namespace {

using helios::DType;

// One case's state for one seed: the verify step (pending token then drafts, a row each), the
// sampling requests of its positions, and the drafts accepted over the rounds run so far.
struct SeededRound {
  helios::Step step;
  helios::SamplingParams params;
  std::vector<helios::SampleRequest> requests;
  std::int64_t n_accepted = 0, n_rounds = 0;

  SeededRound(std::int32_t batch, std::int32_t width, std::int32_t context, std::int32_t page, std::int32_t vocab,
              std::uint64_t seed) {
    step = uniform_step({batch, width, context, page}, vocab, seed * 7919 + 17);
    for (helios::StepRow& row : step.rows) row.n_logits = width;
    params.temperature = 1.0f;  // the target's own distribution: drafts stand or fall as sampled
    params.seed = seed;
    requests.resize(step.tokens.size());
    for (std::size_t i = 0; i < requests.size(); ++i) {
      requests[i].params = &params;
      const std::size_t row = i / std::size_t(width);
      requests[i].history.prompt = std::span<const std::int32_t>(step.tokens).subspan(row * std::size_t(width), i % std::size_t(width) + 1);
      requests[i].output_index = i;
    }
  }

  // Verify, sample every position, accept the leading drafts the samples match.
  void run(model::Model& model, helios::Backend& backend, helios::HistoryCaches& cache, std::int32_t width) {
    const helios::Tensor logits = model.forward_logits(step, cache);
    const std::vector<helios::SampledToken> sampled = backend.sample(logits, requests);
    for (std::size_t row = 0; row < step.rows.size(); ++row) {
      for (std::int32_t j = 0; j + 1 < width; ++j) {
        const std::size_t at = row * std::size_t(width) + std::size_t(j);
        if (sampled[at].token != step.tokens[at + 1]) break;
        ++n_accepted;
      }
    }
    ++n_rounds;
  }
};

void fill_cache(DeviceFill& fill, helios::HistoryCaches& caches, std::uint64_t seed) {
  for (const helios::KvCache& cache : caches.groups) {
    fill.bf16(cache.storage->data(), cache.layout.size_bytes() / 2, seed + std::uint64_t(cache.group), 1.0f);
  }
}

}  // namespace

void measure_rounds(TimingBackend& timing, model::Model& model, DeviceFill& fill, const BenchOptions& options,
                    std::int32_t page, BenchReport& report, const std::function<void(std::string_view)>& progress) {
  const std::int32_t width = options.verify_tokens;
  const std::int32_t max_batch = *std::max_element(options.batches.begin(), options.batches.end());
  helios::cuda::CudaBackend& backend = timing.inner();
  backend.reserve_sampling(max_batch * width, model.spec().vocab_size);
  for (const std::int32_t context : options.contexts) {
    const StepShape largest{max_batch, width, context, page};
    const std::int32_t scratch_page = largest.n_pages();  // one spare page after the rows' pages
    helios::HistoryCaches cache;
    std::string cache_failure;
    try {
      cache = helios::history_allocate(timing, model.kv_cache_layout(largest.n_pages() + 1, page, DType::bf16));
    } catch (const Error& e) {
      cache_failure = e.what();
    }
    for (const std::int32_t batch : options.batches) {
      RoundCase c;
      c.batch = batch;
      c.context = context;
      c.width = width;
      c.failure = cache_failure;
      if (c.failure.empty()) {
        try {
          model.drop_graphs();
          model.capture_decode_graph(batch, cache, {scratch_page});
          model.capture_verify_graph(batch, width, cache, {scratch_page});
          fill_cache(fill, cache, options.seed);
          const helios::Step decode = uniform_step({batch, 1, context, page}, model.spec().vocab_size, options.seed);
          c.decode = time_runs(backend.stream(), options.warmup, options.repetitions,
                               [&] { model.forward_logits(decode, cache); });
          std::int64_t n_accepted = 0, n_rounds = 0;
          for (const std::uint64_t seed : options.seeds) {
            fill_cache(fill, cache, seed);  // each seed its own context (KV) and tokens
            SeededRound round(batch, width, context, page, model.spec().vocab_size, seed);
            c.by_seed.push_back(time_runs(backend.stream(), options.warmup, options.repetitions,
                                          [&] { round.run(model, backend, cache, width); }));
            c.seeds.push_back(seed);
            n_accepted += round.n_accepted;
            n_rounds += round.n_rounds * batch;
            progress(fmt::format("rounds: batch {} context {} seed {}: median {:.3f} ms", batch, context, seed,
                                 c.by_seed.back().median_ms));
          }
          c.accepted_per_round = n_rounds > 0 ? double(n_accepted) / double(n_rounds) : 0.0;
        } catch (const Error& e) {
          try {
            backend.synchronize();
          } catch (const Error&) {
          }
          c.failure = e.what();
        }
      }
      report.rounds.push_back(std::move(c));
    }
    model.drop_graphs();  // they name this cache, freed on return
  }
}

}  // namespace flare::bench::cuda
