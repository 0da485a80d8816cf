// Test harness for whole-model tests: runs sequences through Model::forward with a real page pool,
// either alone (optionally in prefill chunks) or batched together, and reads reference fixtures.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "helios/cpu/cpu_backend.h"
#include "helios/page_pool.h"
#include "model/model.h"
#include "package/safetensors.h"

namespace flare::model::testing {

inline std::filesystem::path models_dir() { return std::filesystem::path(FLARE_TEST_DATA) / "models"; }

inline std::vector<std::string> fixture_names() {
  std::vector<std::string> out;
  for (const auto& entry : std::filesystem::directory_iterator(models_dir())) {
    if (std::filesystem::exists(entry.path() / "config.json")) out.push_back(entry.path().filename().string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

template <typename T>
std::vector<T> tensor_values(const package::SafetensorsFile& file, const std::string& name) {
  const auto view = file.tensor(name);
  std::vector<T> out(view.bytes.size() / sizeof(T));
  std::memcpy(out.data(), view.bytes.data(), view.bytes.size());
  return out;
}

// max |a - b| / max |b|
inline double max_relative_error(const std::vector<float>& a, const std::vector<float>& b) {
  double diff = 0, scale = 0;
  for (std::size_t i = 0; i < a.size() && i < b.size(); ++i) {
    diff = std::max(diff, std::fabs(double(a[i]) - b[i]));
    scale = std::max(scale, std::fabs(double(b[i])));
  }
  return scale > 0 ? diff / scale : diff;
}

inline std::int32_t argmax(const float* logits, std::int32_t n) {
  return std::int32_t(std::max_element(logits, logits + n) - logits);
}

struct Runner {
  std::unique_ptr<helios::cpu::CpuBackend> backend;
  std::unique_ptr<Model> model;
  helios::HistoryCaches cache;
  std::unique_ptr<helios::PagePool> pool;
  std::int32_t page_size = 4;
  helios::Tensor last_logits_;

  explicit Runner(const std::filesystem::path& dir, helios::DType kv = helios::DType::f32, std::int32_t n_pages = 256,
                  std::int32_t page_size_tokens = 4, int n_threads = 2)
      : backend(std::make_unique<helios::cpu::CpuBackend>(n_threads)), page_size(page_size_tokens) {
    model = Model::load(dir, *backend);
    cache = helios::history_allocate(*backend, model->kv_cache_layout(n_pages, page_size_tokens, kv));
    pool = std::make_unique<helios::PagePool>(n_pages);
  }

  std::int32_t vocab() const { return model->spec().vocab_size; }

  // One step over several sequences: each computes `tokens[i]` after what its pages hold, with
  // logits for all of its tokens (all_logits) or only the last. Returns the logits rows.
  std::vector<float> step(std::vector<helios::SequencePages*> seqs, const std::vector<std::vector<std::int32_t>>& tokens,
                          bool all_logits) {
    helios::Step step;
    std::vector<helios::PageCopy> copies;
    for (std::size_t i = 0; i < seqs.size(); ++i) {
      helios::StepRow row;
      row.start_position = seqs[i]->n_tokens();
      row.n_tokens = std::int32_t(tokens[i].size());
      row.n_logits = all_logits ? row.n_tokens : 1;
      if (!seqs[i]->append(row.n_tokens, copies)) throw std::runtime_error("page pool exhausted");
      row.first_block = std::int32_t(step.block_tables.size());
      row.n_blocks = std::int32_t(seqs[i]->pages().size());
      step.block_tables.insert(step.block_tables.end(), seqs[i]->pages().begin(), seqs[i]->pages().end());
      step.tokens.insert(step.tokens.end(), tokens[i].begin(), tokens[i].end());
      step.rows.push_back(row);
    }
    helios::history_copy_pages(*backend, cache, copies, true);  // one page id space for every group
    last_logits_ = model->forward_logits(step, cache);
    std::vector<float> out(std::size_t(last_logits_.rows * last_logits_.cols));
    std::memcpy(out.data(), last_logits_.data, out.size() * sizeof(float));  // CPU backend: host memory
    return out;
  }

  // The last step's logits, still on the backend.
  const helios::Tensor& last_logits() const { return last_logits_; }

  // Prefill in chunks of `chunk` tokens (0: one shot); returns all positions' logits.
  std::vector<float> prefill(helios::SequencePages& seq, const std::vector<std::int32_t>& prompt, std::size_t chunk = 0) {
    std::vector<float> out;
    if (chunk == 0) chunk = prompt.size();
    for (std::size_t begin = 0; begin < prompt.size(); begin += chunk) {
      const std::vector<std::int32_t> part(prompt.begin() + std::ptrdiff_t(begin),
                                           prompt.begin() + std::ptrdiff_t(std::min(prompt.size(), begin + chunk)));
      auto logits = step({&seq}, {part}, true);
      out.insert(out.end(), logits.begin(), logits.end());
    }
    return out;
  }

  std::vector<std::int32_t> greedy(const std::vector<std::int32_t>& prompt, std::int32_t n_new) {
    helios::SequencePages seq(*pool, page_size);
    auto logits = step({&seq}, {prompt}, false);
    std::vector<std::int32_t> out;
    for (std::int32_t i = 0; i < n_new; ++i) {
      out.push_back(argmax(logits.data(), vocab()));
      if (i + 1 < n_new) logits = step({&seq}, {{out.back()}}, false);
    }
    return out;
  }
};

}  // namespace flare::model::testing
