// Shared by the prefix-snapshot checks on the CPU (tests/unit/engine/model_engine_test.cpp) and on
// the GPU (tests/gpu/cuda_prefix_snapshot_test.cpp): an engine serves each prompt cut after
// page_size + offset tokens, one greedy token each, so that its prefix cache holds checkpoints
// ending `offset` tokens into a page, which the whole prompts then hit.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <future>
#include <memory>
#include <vector>

#include <gtest/gtest.h>

#include "engine/engine.h"

namespace flare::testing_support {

// Serves the cut prompts one after another; `cuts` gets each prompt's cut (0 for a prompt too short
// to leave a checkpoint there: it is not served). Fatal failures stop it (check HasFatalFailure()).
inline void serve_cut_prompts(engine::LocalEngine& engine, const std::vector<std::vector<std::int32_t>>& prompts,
                              std::int32_t page_size_tokens, std::int32_t offset, std::vector<std::int32_t>& cuts) {
  struct Done : engine::OutputSink {
    void on_output(engine::StepOutput output) override {
      if (output.request_finished) done.set_value();
    }
    std::promise<void> done;
  };
  cuts.clear();
  for (const auto& prompt : prompts) {
    cuts.push_back(std::min(page_size_tokens + offset, std::int32_t(prompt.size()) - 1));
    if (cuts.back() < page_size_tokens) {  // a one-token prompt: no checkpoint, no hit
      cuts.back() = 0;
      continue;
    }
    engine::GenerationRequest request;
    request.prompt_token_ids.assign(prompt.begin(), prompt.begin() + cuts.back());
    request.max_tokens = 1;
    request.sampling.temperature = 0.0f;
    auto sink = std::make_shared<Done>();
    ASSERT_FALSE(engine.submit(request, sink).rejected);
    ASSERT_EQ(sink->done.get_future().wait_for(std::chrono::seconds(120)), std::future_status::ready);
  }
}

}  // namespace flare::testing_support
