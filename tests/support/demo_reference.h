// Shared by the demo-model checks on the CPU (tests/unit/model) and on the GPU (tests/gpu): where
// the demo model is (restored from its compressed shards on first use), log-softmax of a logits row,
// the reference's values, and the greedy check with the near-tie rule under which a continuation
// may leave transformers' path.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <numeric>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "package/safetensors.h"

namespace flare::testing_support {

// Divergence is accepted only at a near-tie: each backend's token is in the other's top 5 and the
// reference's top-1/top-2 logprob margin is under this many nats.
inline constexpr double kNearTieNats = 0.3;

// `source_dir`/assets/demo-model, or ./assets/demo-model in a copied tree run from its root; the
// shards are restored by scripts/restore-assets when absent. Returns "" when restoring failed.
inline std::filesystem::path demo_model_dir(std::filesystem::path source_dir) {
  if (!std::filesystem::exists(source_dir / "assets" / "demo-model")) source_dir = ".";
  const std::filesystem::path dir = source_dir / "assets" / "demo-model";
  if (!std::filesystem::exists(dir / "model-00001-of-00003.safetensors")) {
    const std::string command = (source_dir / "scripts" / "restore-assets").string();
    if (std::system(command.c_str()) != 0) return {};
  }
  return dir;
}

inline std::vector<float> log_softmax(const float* logits, std::int32_t n) {
  const float max = *std::max_element(logits, logits + n);
  double sum = 0;
  for (std::int32_t i = 0; i < n; ++i) sum += std::exp(double(logits[i]) - max);
  const double lse = max + std::log(sum);
  std::vector<float> out(static_cast<std::size_t>(n));
  for (std::int32_t i = 0; i < n; ++i) out[std::size_t(i)] = float(logits[i] - lse);
  return out;
}

inline std::vector<std::int32_t> top5(const std::vector<float>& logprobs) {
  std::vector<std::int32_t> ids(logprobs.size());
  std::iota(ids.begin(), ids.end(), 0);
  std::partial_sort(ids.begin(), ids.begin() + 5, ids.end(),
                    [&](std::int32_t a, std::int32_t b) { return logprobs[std::size_t(a)] > logprobs[std::size_t(b)]; });
  ids.resize(5);
  return ids;
}

template <typename T>
std::vector<T> reference_values(const package::SafetensorsFile& file, const std::string& name) {
  const auto view = file.tensor(name);
  std::vector<T> out(view.bytes.size() / sizeof(T));
  std::memcpy(out.data(), view.bytes.data(), view.bytes.size());
  return out;
}

// Greedy continuations of samples.json's prompts against the reference's ids. `start(prompt)`
// begins a fresh sequence and returns the logits after the prompt; `next(token)` appends one
// token and returns the next logits. A divergence must be a near-tie; it ends that sample.
inline void expect_greedy_matches_reference(
    const std::filesystem::path& model_dir, const package::SafetensorsFile& reference, std::int32_t vocab,
    const char* tag, const std::function<std::vector<float>(const std::vector<std::int32_t>&)>& start,
    const std::function<std::vector<float>(std::int32_t)>& next) {
  std::ifstream in(model_dir / "samples.json");
  const auto samples = nlohmann::json::parse(in).at("samples");
  for (std::size_t s = 0; s < samples.size(); ++s) {
    const auto prompt = samples[s].at("prompt_ids").get<std::vector<std::int32_t>>();
    const auto expected = samples[s].at("greedy_ids").get<std::vector<std::int32_t>>();
    const auto ref_top_ids = reference_values<std::int32_t>(reference, fmt::format("sample.{}.top5_ids", s));
    const auto ref_top_lp = reference_values<float>(reference, fmt::format("sample.{}.top5_logprobs", s));
    auto logits = start(prompt);
    std::size_t i = 0;
    for (; i < expected.size(); ++i) {
      const std::int32_t token = std::int32_t(std::max_element(logits.begin(), logits.begin() + vocab) - logits.begin());
      if (token != expected[i]) {
        const auto ours = top5(log_softmax(logits.data(), vocab));
        const std::int32_t* theirs = &ref_top_ids[5 * i];
        const double margin = double(ref_top_lp[5 * i]) - ref_top_lp[5 * i + 1];
        const bool ref_in_ours = std::find(ours.begin(), ours.end(), expected[i]) != ours.end();
        const bool ours_in_ref = std::find(theirs, theirs + 5, token) != theirs + 5;
        std::printf("[ %s ] sample %zu: first divergence at token %zu (ours %d, reference %d), reference "
                    "top-1/top-2 margin %.4f nats\n", tag, s, i, token, expected[i], margin);
        EXPECT_TRUE(ref_in_ours && ours_in_ref && margin < kNearTieNats)
            << "sample " << s << " diverges at " << i << " without a near-tie (margin " << margin << ")";
        break;
      }
      logits = next(token);
    }
    if (i == expected.size()) std::printf("[ %s ] sample %zu: all %zu greedy tokens identical\n", tag, s, i);
  }
}

}  // namespace flare::testing_support
