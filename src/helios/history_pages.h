// The page bookkeeping of a model whose layers keep several kinds of history (history.h): one page
// pool per history group, and for each sequence its pages in every group. All groups cover the
// same positions with pages of the same size, so a sequence's block tables in every group have the
// same length and one row offset serves them all (Step::group_block_tables). A group of
// sliding-window layers gives its pages back as the window leaves them behind (release_behind):
// its pool then needs about a window of pages per sequence, not a context.
// A model with one group (every dense model) has one pool and behaves exactly as one SequencePages.
// Owned by the engine thread; not thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "helios/page_pool.h"

namespace flare::helios {

class HistoryPools {
 public:
  struct Group {
    std::int32_t n_pages = 0;
    std::int32_t window_tokens = 0;  // > 0: pages behind the window go back to the pool
  };
  explicit HistoryPools(const std::vector<Group>& groups);

  std::int32_t n_groups() const { return std::int32_t(pools_.size()); }
  PagePool& pool(std::int32_t group) { return *pools_[std::size_t(group)]; }
  const PagePool& pool(std::int32_t group) const { return *pools_[std::size_t(group)]; }
  std::int32_t window(std::int32_t group) const { return windows_[std::size_t(group)]; }
  // The page id block tables carry for a released page of the group: one past the pool's pages,
  // the scratch page the runner keeps in each group's cache (nothing reads it for a real row).
  std::int32_t released_page_id(std::int32_t group) const { return pool(group).n_pages(); }
  // Stops a group from giving pages back (a draft model reads group 0's pages with full attention).
  void keep_full_history(std::int32_t group) { windows_[std::size_t(group)] = 0; }

 private:
  std::vector<std::unique_ptr<PagePool>> pools_;  // fixed addresses: SequencePages point at them
  std::vector<std::int32_t> windows_;
};

class HistoryPages {
 public:
  HistoryPages(HistoryPools& pools, std::int32_t page_size_tokens);

  std::int32_t n_tokens() const { return groups_.front().n_tokens(); }
  std::int32_t n_groups() const { return std::int32_t(groups_.size()); }
  // Group 0's page ids (its block table).
  const std::vector<std::int32_t>& pages() const { return groups_.front().pages(); }
  const SequencePages& group(std::int32_t g) const { return groups_[std::size_t(g)]; }
  // Group g's block table: its page ids, the group's released_page_id where a page was given back.
  void append_table(std::int32_t g, std::vector<std::int32_t>& table) const;
  // Pages held over every group.
  std::int32_t n_held() const;

  // Makes room for n more tokens in every group. Returns -1 when done; else the first group whose
  // pool lacks the pages, with nothing changed.
  std::int32_t append(std::int32_t n, std::vector<PageCopy>& copies);
  // Pages append(n) takes from group g's pool.
  std::int32_t pages_to_append(std::int32_t g, std::int32_t n) const { return group(g).pages_to_append(n); }
  void truncate(std::int32_t n_tokens);
  HistoryPages fork() const;
  void free();
  // In every group with a window: gives back the pages no query at `first_query` or later reads
  // (those wholly before first_query - window + 1).
  void release_behind(std::int32_t first_query);
  // Whether a sequence cut at n_tokens could go on from here: every windowed group still holds the
  // pages the next query (at n_tokens) reads.
  bool holds_window_at(std::int32_t n_tokens) const;

 private:
  HistoryPools* pools_;
  std::vector<SequencePages> groups_;
};

}  // namespace flare::helios
