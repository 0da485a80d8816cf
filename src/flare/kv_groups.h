// The KV pools of a model whose layers keep several kinds of history (helios/history.h), as
// `flare run` sizes them. Group 0 keeps a full history whenever any layer does, and is sized by
// tokens like a single-group model (kv_sizing.h). A group of sliding-window layers after it holds
// about a window of pages per request: its pool is two windows per concurrency slot (one for the
// running sequence, one for prefix checkpoints), set aside before the token-sized pool.
// A model whose every layer slides (group 0 has a window) keeps one page count for every group.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/engine_options.h"
#include "model/model.h"

namespace flare::cli {

struct WindowPools {
  std::vector<std::int32_t> windows;     // [n_groups] each group's window (0: full history)
  std::vector<std::int32_t> pages;       // [n_groups] pages of each window group; 0 for token-sized ones
  std::uint64_t bytes = 0;               // every window group's pages (and scratch page) together
  std::uint64_t full_bytes_per_token = 0;  // what a cached token costs in the token-sized groups
};

WindowPools window_pools(const model::Model& model, std::int64_t concurrency, std::int64_t step_tokens,
                         std::int64_t page_tokens);
// The engine's groups: token-sized groups get n_pages, window groups their own counts.
std::vector<engine::EngineOptions::KvGroup> kv_groups(const WindowPools& pools, std::int32_t n_pages);
// ", and 2,048 pages for sliding-window layers (64 MiB)" when the model has window pools, else "".
std::string window_pools_text(const WindowPools& pools);

}  // namespace flare::cli
