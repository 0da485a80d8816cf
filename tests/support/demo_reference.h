// Shared by the demo-model checks on the CPU (tests/unit/model) and on the GPU (tests/gpu): where
// the demo model is (restored from its compressed shards on first use), log-softmax of a logits row,
// and the near-tie rule under which a greedy continuation may leave transformers' path.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <numeric>
#include <string>
#include <vector>

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

}  // namespace flare::testing_support
