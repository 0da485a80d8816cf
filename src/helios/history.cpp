// Per-layer history specs and their storage groups (see history.h).
#include "helios/history.h"

#include <algorithm>

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
  std::vector<HistoryGroup> full, sliding;
  for (std::size_t i = 0; i < layers.size(); ++i) {
    const PagedKvSpec& spec = std::get<PagedKvSpec>(layers[i]);
    auto& groups = spec.sliding_window > 0 ? sliding : full;
    HistoryGroup* group = nullptr;
    for (HistoryGroup& g : groups) {
      if (g.storage == spec) group = &g;
    }
    if (!group) group = &groups.emplace_back(HistoryGroup{spec, {}});
    group->layers.push_back(std::int32_t(i));
  }
  full.insert(full.end(), sliding.begin(), sliding.end());
  return full;
}

void history_copy_pages(Backend& backend, HistoryCaches& caches, std::span<const PageCopy> copies,
                        bool shared_page_ids) {
  for (KvCache& cache : caches.groups) {
    std::vector<PageCopy> mine;
    for (const PageCopy& copy : copies) {
      if (copy.group == cache.group || (shared_page_ids && copy.group == 0)) mine.push_back(copy);
    }
    if (!mine.empty()) backend.kv_copy_pages(cache, mine);
  }
}

std::vector<const KvCache*> HistoryCaches::pointers() const {
  std::vector<const KvCache*> out;
  for (const KvCache& cache : groups) out.push_back(&cache);
  return out;
}

HistoryLayout HistoryCaches::layout() const {
  HistoryLayout out;
  for (const KvCache& cache : groups) out.groups.push_back(cache.layout);
  out.layers = layers;
  return out;
}

std::size_t HistoryCaches::size_bytes() const {
  std::size_t bytes = 0;
  for (const KvCache& cache : groups) bytes += cache.layout.size_bytes();
  return bytes;
}

HistoryCaches history_allocate(Backend& backend, const HistoryLayout& layout) {
  HistoryCaches caches;
  for (std::size_t g = 0; g < layout.groups.size(); ++g) {
    caches.groups.push_back(backend.allocate_kv_cache(layout.groups[g]));
    caches.groups.back().group = std::int32_t(g);
  }
  caches.layers = layout.layers;
  return caches;
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

std::size_t history_full_bytes_per_token(const std::vector<HistorySpec>& layers, DType kv_dtype) {
  std::vector<HistorySpec> full;
  for (const HistorySpec& spec : layers) {
    if (std::get<PagedKvSpec>(spec).sliding_window == 0) full.push_back(spec);
  }
  return history_bytes_per_token(full, kv_dtype);
}

std::size_t history_group_page_bytes(const HistoryGroup& group, std::int32_t page_size_tokens, DType kv_dtype) {
  const PagedKvSpec& kv = group.storage;
  return group.layers.size() * std::size_t(page_size_tokens) * std::size_t(kv.n_kv_heads) *
         std::size_t(kv.k_dim + kv.v_dim) * dtype_size_bytes(kv_dtype);
}

std::int32_t history_window_pages(std::int32_t window, std::int32_t step_tokens, std::int32_t page_size_tokens) {
  const std::int64_t tokens = std::int64_t(window) + std::max(step_tokens, 1);
  return std::int32_t((tokens + page_size_tokens - 1) / page_size_tokens + 1);
}

std::int32_t history_window_pool_pages(std::int32_t window, std::int64_t concurrency, std::int32_t step_tokens,
                                       std::int32_t page_size_tokens) {
  const std::int64_t slots = std::max<std::int64_t>(concurrency, 1);
  const std::int64_t per_slot = (std::int64_t(window) + page_size_tokens - 1) / page_size_tokens + 2;
  const std::int64_t step = (std::int64_t(std::max(step_tokens, 1)) + page_size_tokens - 1) / page_size_tokens;
  const std::int64_t pages = 2 * slots * per_slot + step + slots;
  return std::int32_t(std::min<std::int64_t>(pages, std::int64_t{1} << 30));
}

std::uint64_t history_window_pool_bytes(const std::vector<HistorySpec>& layers, std::int64_t concurrency,
                                        std::int32_t step_tokens, std::int32_t page_size_tokens, DType kv_dtype) {
  const std::vector<HistoryGroup> groups = history_groups(layers);
  if (groups.empty() || groups.front().window() > 0) return 0;
  std::uint64_t bytes = 0;
  for (const HistoryGroup& group : groups) {
    if (group.window() == 0) continue;
    const std::int32_t pages = history_window_pool_pages(group.window(), concurrency, step_tokens, page_size_tokens);
    bytes += std::uint64_t(pages + 1) * history_group_page_bytes(group, page_size_tokens, kv_dtype);
  }
  return bytes;
}

std::uint64_t history_token_bytes(const std::vector<HistorySpec>& layers, DType kv_dtype) {
  const std::vector<HistoryGroup> groups = history_groups(layers);
  const bool full_group = !groups.empty() && groups.front().window() == 0;
  return full_group ? history_full_bytes_per_token(layers, kv_dtype) : history_bytes_per_token(layers, kv_dtype);
}

HistoryLayout history_kv_layout(const std::vector<HistorySpec>& layers, std::span<const std::int32_t> n_pages,
                                std::int32_t page_size_tokens, DType kv_dtype) {
  const std::vector<HistoryGroup> groups = history_groups(layers);
  if (groups.empty()) fail(ExitCode::failure, "internal: a KV cache layout for a model without layers");
  if (n_pages.size() != 1 && n_pages.size() != groups.size()) {
    fail(ExitCode::failure, "internal: page counts for {} history groups, the model has {}", n_pages.size(),
         groups.size());
  }
  HistoryLayout out;
  out.layers.resize(layers.size());
  for (std::size_t g = 0; g < groups.size(); ++g) {
    const PagedKvSpec& kv = groups[g].storage;
    if (kv.k_dim != kv.v_dim) {
      fail(ExitCode::preparation, "keys of {} and values of {} elements a head: KV pages hold equal halves", kv.k_dim,
           kv.v_dim);
    }
    const std::int32_t pages = n_pages.size() == 1 ? n_pages[0] : n_pages[g];
    out.groups.push_back(KvCacheLayout{std::int32_t(groups[g].layers.size()), pages, page_size_tokens, kv.n_kv_heads,
                                       kv.k_dim, kv_dtype});
    for (std::size_t i = 0; i < groups[g].layers.size(); ++i) {
      out.layers[std::size_t(groups[g].layers[i])] = LayerHistory{std::int32_t(g), std::int32_t(i)};
    }
  }
  return out;
}

HistoryLayout history_kv_layout(const std::vector<HistorySpec>& layers, std::int32_t n_pages,
                                std::int32_t page_size_tokens, DType kv_dtype) {
  return history_kv_layout(layers, std::span<const std::int32_t>(&n_pages, 1), page_size_tokens, kv_dtype);
}

}  // namespace flare::helios
