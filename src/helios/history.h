// What each layer keeps of a sequence's past, declared by the architecture (one spec per layer):
// today paged K/V, the kind every attention layer has. A latent kind (MLA: one vector per token, no
// V) and a recurrent-state kind (a fixed-size slot per sequence, with snapshots for prefix reuse)
// join the variant when their architectures arrive. Layers of equal specs form one group over one
// KV cache with a page table per sequence. Sliding-window layers are a group of their own even
// where their pages look like the full layers': their sequences give back every page the window
// has left behind, so their cache needs only about a window of pages per sequence.
// Admission, KV sizing, the export memory plan and `flare inspect` count memory from these specs.
#pragma once

#include <compare>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <variant>
#include <vector>

#include "helios/backend.h"
#include "helios/dtype.h"

namespace flare::helios {

// Paged K and V: per token, n_kv_heads heads of k_dim (keys) and v_dim (values) elements.
struct PagedKvSpec {
  std::int32_t n_kv_heads = 0;
  std::int32_t k_dim = 0;
  std::int32_t v_dim = 0;
  std::int32_t sliding_window = 0;  // 0: the layer attends to every cached position

  auto operator<=>(const PagedKvSpec&) const = default;
};

using HistorySpec = std::variant<PagedKvSpec>;

std::string history_describe(const HistorySpec& spec);  // "paged K/V, 8 heads x 128/128, window 4096"

// Layers sharing one storage: what their pages hold, and which layers they are (ascending).
struct HistoryGroup {
  PagedKvSpec storage;  // sliding_window > 0: pages older than the window are given back
  std::vector<std::int32_t> layers;
  std::int32_t window() const { return storage.sliding_window; }
};

// Groups layers of equal specs: groups of full layers first, then sliding ones, each in order of
// its first layer (so group 0 keeps a full history whenever any layer does).
std::vector<HistoryGroup> history_groups(const std::vector<HistorySpec>& layers);

// Where one layer keeps its history: which group's cache, and which of that cache's layers.
struct LayerHistory {
  std::int32_t group = 0;
  std::int32_t slot = 0;
};

// The KV caches of a model: a layout per group (groups[g].group == g) and each layer's place.
struct HistoryLayout {
  std::vector<KvCacheLayout> groups;
  std::vector<LayerHistory> layers;  // [n_layers]
};

// A model's KV caches, one per history group (KvCache::group == its index), and each layer's place.
struct HistoryCaches {
  std::vector<KvCache> groups;
  std::vector<LayerHistory> layers;  // [n_layers]

  KvCache& cache_of(std::int32_t layer) { return groups[std::size_t(layers[std::size_t(layer)].group)]; }
  std::int32_t slot_of(std::int32_t layer) const { return layers[std::size_t(layer)].slot; }
  std::vector<const KvCache*> pointers() const;
  HistoryLayout layout() const;
  std::size_t size_bytes() const;  // address space of every group
};

// Backs every page of every group at once (preparation, benchmarks, tests).
HistoryCaches history_allocate(Backend& backend, const HistoryLayout& layout);
// Runs copy-on-write page copies: each in its group's cache, or, with shared_page_ids (every group
// follows group 0's page ids: one scheduler pool, tests), group 0's copies in every cache.
void history_copy_pages(Backend& backend, HistoryCaches& caches, std::span<const PageCopy> copies,
                        bool shared_page_ids);

// The kinds of history the layers keep, as the manifest records them: "attention",
// "attention+sliding-window attention" (both kinds of layer), ...
std::string history_kinds(const std::vector<HistorySpec>& layers);

// Bytes one token costs across every layer, with pages of `kv_dtype`.
std::size_t history_bytes_per_token(const std::vector<HistorySpec>& layers, DType kv_dtype);

// Bytes one token costs in the layers of groups whose history grows with the sequence (no window),
// and bytes one page costs in group `group`.
std::size_t history_full_bytes_per_token(const std::vector<HistorySpec>& layers, DType kv_dtype);
std::size_t history_group_page_bytes(const HistoryGroup& group, std::int32_t page_size_tokens, DType kv_dtype);

// Pages a sequence holds at most at once in a group of window `window` (> 0) when a step computes
// up to step_tokens of it: the window behind the step's first token, the step's own tokens, and a
// page of partial overlap at each end.
std::int32_t history_window_pages(std::int32_t window, std::int32_t step_tokens, std::int32_t page_size_tokens);
// The pages of a sliding-window group's pool for `concurrency` request slots. Between steps a
// sequence holds the pages of its window (ceil(window / page) + 1, and one more where a page
// straddles its end); a step adds its own tokens' pages (step_tokens over every row, and a partial
// page a row). The pool holds two windows a slot (room for prefix checkpoints) and one step.
std::int32_t history_window_pool_pages(std::int32_t window, std::int64_t concurrency, std::int32_t step_tokens,
                                       std::int32_t page_size_tokens);
// The bytes of every sliding-window pool of a model whose group 0 keeps a full history (0 when
// every layer slides: then each group is sized by tokens), scratch pages included.
std::uint64_t history_window_pool_bytes(const std::vector<HistorySpec>& layers, std::int64_t concurrency,
                                        std::int32_t step_tokens, std::int32_t page_size_tokens, DType kv_dtype);
// What a cached token costs in the groups sized by tokens (every layer when every layer slides).
std::uint64_t history_token_bytes(const std::vector<HistorySpec>& layers, DType kv_dtype);

// The KV caches of a model whose layers are `layers`, with n_pages[g] pages in group g (one count:
// every group has that many).
HistoryLayout history_kv_layout(const std::vector<HistorySpec>& layers, std::span<const std::int32_t> n_pages,
                                std::int32_t page_size_tokens, DType kv_dtype);
HistoryLayout history_kv_layout(const std::vector<HistorySpec>& layers, std::int32_t n_pages,
                                std::int32_t page_size_tokens, DType kv_dtype);

}  // namespace flare::helios
