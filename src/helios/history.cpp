// Per-layer history specs and their storage groups (see history.h).
#include "helios/history.h"

#include <fmt/format.h>

#include "common/error.h"

namespace flare::helios {

std::string history_describe(const HistorySpec& spec) {
  const PagedKvSpec& kv = std::get<PagedKvSpec>(spec);
  std::string out = fmt::format("paged K/V, {} head{} x {}/{}", kv.n_kv_heads, kv.n_kv_heads == 1 ? "" : "s", kv.k_dim,
                                kv.v_dim);
  if (kv.sliding_window > 0) out += fmt::format(", window {}", kv.sliding_window);
  return out;
}

std::vector<HistoryGroup> history_groups(const std::vector<HistorySpec>& layers) {
  std::vector<HistoryGroup> groups;
  for (std::size_t i = 0; i < layers.size(); ++i) {
    PagedKvSpec storage = std::get<PagedKvSpec>(layers[i]);
    storage.sliding_window = 0;
    HistoryGroup* group = nullptr;
    for (HistoryGroup& g : groups) {
      if (g.storage == storage) group = &g;
    }
    if (!group) group = &groups.emplace_back(HistoryGroup{storage, {}});
    group->layers.push_back(std::int32_t(i));
  }
  return groups;
}

std::string history_kinds(const std::vector<HistorySpec>& layers) {
  bool full = false, sliding = false;
  for (const HistorySpec& spec : layers) {
    (std::get<PagedKvSpec>(spec).sliding_window > 0 ? sliding : full) = true;
  }
  if (full && sliding) return "attention+sliding-window attention";
  return sliding ? "sliding-window attention" : "attention";
}

std::size_t history_bytes_per_token(const std::vector<HistorySpec>& layers, DType kv_dtype) {
  std::size_t bytes = 0;
  for (const HistorySpec& spec : layers) {
    const PagedKvSpec& kv = std::get<PagedKvSpec>(spec);
    bytes += std::size_t(kv.n_kv_heads) * std::size_t(kv.k_dim + kv.v_dim) * dtype_size_bytes(kv_dtype);
  }
  return bytes;
}

KvCacheLayout history_kv_layout(const std::vector<HistorySpec>& layers, std::int32_t n_pages,
                                std::int32_t page_size_tokens, DType kv_dtype) {
  const std::vector<HistoryGroup> groups = history_groups(layers);
  if (groups.empty()) fail(ExitCode::failure, "internal: a KV cache layout for a model without layers");
  if (groups.size() != 1) {
    fail(ExitCode::preparation, "the model's layers keep {} kinds of history ({} and {}); one KV cache holds one kind",
         groups.size(), history_describe(groups[0].storage), history_describe(groups[1].storage));
  }
  const PagedKvSpec& kv = groups[0].storage;
  if (kv.k_dim != kv.v_dim) {
    fail(ExitCode::preparation, "keys of {} and values of {} elements a head: KV pages hold equal halves", kv.k_dim,
         kv.v_dim);
  }
  return KvCacheLayout{std::int32_t(layers.size()), n_pages, page_size_tokens, kv.n_kv_heads, kv.k_dim, kv_dtype};
}

}  // namespace flare::helios
