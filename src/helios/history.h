// What each layer keeps of a sequence's past, declared by the architecture (one spec per layer):
// today paged K/V, the kind every attention layer has. A latent kind (MLA: one vector per token, no
// V) and a recurrent-state kind (a fixed-size slot per sequence, with snapshots for prefix reuse)
// join the variant when their architectures arrive. Layers whose specs need the same storage
// (equal heads and dims; a sliding window only limits what a layer reads) form one group over one
// KV cache, so a model of full and sliding layers keeps one page table per sequence.
// Admission, KV sizing, the export memory plan and `flare inspect` count memory from these specs.
#pragma once

#include <compare>
#include <cstddef>
#include <cstdint>
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
  PagedKvSpec storage;  // sliding_window 0: the group's storage, whatever its layers read
  std::vector<std::int32_t> layers;
};

// Groups layers of equal storage, in order of their first layer.
std::vector<HistoryGroup> history_groups(const std::vector<HistorySpec>& layers);

// The kinds of history the layers keep, as the manifest records them: "attention",
// "attention+sliding-window attention" (both kinds of layer), ...
std::string history_kinds(const std::vector<HistorySpec>& layers);

// Bytes one token costs across every layer, with pages of `kv_dtype`.
std::size_t history_bytes_per_token(const std::vector<HistorySpec>& layers, DType kv_dtype);

// The KV cache layout of a model whose layers are `layers`: every layer in one group today (the
// runtime keeps one cache per model); a model that needs several groups is a clear error.
KvCacheLayout history_kv_layout(const std::vector<HistorySpec>& layers, std::int32_t n_pages,
                                std::int32_t page_size_tokens, DType kv_dtype);

}  // namespace flare::helios
