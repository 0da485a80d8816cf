// KV caches backed on demand, on the CPU: the granule arithmetic of kv_backing.h against a
// byte-by-byte oracle over many layouts and granule sizes, and Backend::reserve_kv_cache /
// kv_grow on a CPU backend that emulates a device's commits (granules, a memory limit, and 0xff in
// bytes never committed) -- growth in chunks, a refused growth that leaves nothing half-backed,
// and kv_store + attention into pages of a newly grown chunk matching a fully allocated cache.
#include "helios/kv_backing.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "helios/cpu/cpu_backend.h"

namespace flare::helios {
namespace {

// Which bytes of a layout `state` asks to be backed: pages [0, backed) of every layer and, with the
// tail, every page from n_growable on.
std::vector<bool> wanted_bytes(const KvCacheLayout& layout, std::int32_t n_growable, KvBackingState state) {
  const std::size_t page = layout.page_bytes(), layer = page * std::size_t(layout.n_pages);
  std::vector<bool> out(layout.size_bytes(), false);
  for (std::int32_t l = 0; l < layout.n_layers; ++l) {
    for (std::int32_t p = 0; p < layout.n_pages; ++p) {
      const bool want = p < std::min(state.backed_pages, n_growable) || (state.tail && p >= n_growable);
      if (!want) continue;
      std::fill_n(out.begin() + std::ptrdiff_t(std::size_t(l) * layer + std::size_t(p) * page), page, true);
    }
  }
  return out;
}

// The granules touching any wanted byte.
std::vector<bool> granules_of(const std::vector<bool>& bytes, std::size_t granule, std::size_t n_granules) {
  std::vector<bool> out(n_granules, false);
  for (std::size_t b = 0; b < bytes.size(); ++b) {
    if (bytes[b]) out[b / granule] = true;
  }
  return out;
}

// The most pages [0, k) of every layer lying wholly in committed granules.
std::int32_t oracle_pages(const KvCacheLayout& layout, std::int32_t n_growable, const std::vector<bool>& committed,
                          std::size_t granule) {
  const std::size_t page = layout.page_bytes(), layer = page * std::size_t(layout.n_pages);
  std::int32_t k = 0;
  for (; k < n_growable; ++k) {
    bool backed = true;
    for (std::int32_t l = 0; l < layout.n_layers && backed; ++l) {
      const std::size_t begin = std::size_t(l) * layer + std::size_t(k) * page;
      for (std::size_t b = begin; b < begin + page && backed; b += 1) backed = committed[b / granule];
    }
    if (!backed) break;
  }
  return k;
}

TEST(KvGranules, MatchesAByteOracle) {
  std::mt19937 rng(11);
  for (int trial = 0; trial < 2000; ++trial) {
    KvCacheLayout layout;
    layout.n_layers = 1 + int(rng() % 4);
    layout.n_pages = 1 + int(rng() % 9);
    layout.page_size_tokens = 1 + int(rng() % 3);
    layout.n_kv_heads = 1 + int(rng() % 2);
    layout.head_dim = 1 + int(rng() % 5);
    layout.dtype = rng() % 2 ? DType::f32 : DType::bf16;
    const std::size_t granules[] = {1, 4, 16, 24, 64, 100, 256};
    const std::size_t granule = granules[rng() % 7];
    const std::int32_t n_growable = std::int32_t(rng() % std::uint32_t(layout.n_pages + 1));
    const KvGranules g(layout, n_growable, granule);
    const std::size_t n_granules = g.reservation_bytes() / granule;
    ASSERT_EQ(g.reservation_bytes() % granule, 0u);
    ASSERT_GE(g.reservation_bytes(), layout.size_bytes());
    SCOPED_TRACE(testing::Message() << "trial " << trial << " granule " << granule << " layers " << layout.n_layers
                                    << " pages " << layout.n_pages << " growable " << n_growable << " page bytes "
                                    << layout.page_bytes());

    std::vector<bool> committed(n_granules, false);
    KvBackingState state{};
    std::vector<KvBackingState> steps = {{0, true}};
    for (std::int32_t k = 0; k <= n_growable; k += 1 + std::int32_t(rng() % 3)) steps.push_back({k, true});
    steps.push_back({n_growable, true});
    for (const KvBackingState next : steps) {
      if (next.backed_pages < state.backed_pages) continue;
      for (const ByteRange& run : g.runs_between(state, next)) {
        ASSERT_GT(run.size_bytes, 0u);
        ASSERT_EQ(run.offset_bytes % granule, 0u);
        ASSERT_EQ(run.size_bytes % granule, 0u);
        ASSERT_LE(run.end_bytes(), g.reservation_bytes());
        for (std::size_t i = run.offset_bytes / granule; i < run.end_bytes() / granule; ++i) {
          ASSERT_FALSE(committed[i]) << "granule " << i << " committed twice";
          committed[i] = true;
        }
      }
      state = next;
      // Exactly the granules touching what the state backs, no more.
      const std::vector<bool> expected = granules_of(wanted_bytes(layout, n_growable, state), granule, n_granules);
      ASSERT_EQ(committed, expected) << "backed " << state.backed_pages;
      const std::int32_t pages = g.pages_backed(state);
      ASSERT_EQ(pages, oracle_pages(layout, n_growable, committed, granule)) << "backed " << state.backed_pages;
      ASSERT_GE(pages, state.backed_pages);
      ASSERT_EQ(g.committed_bytes(state),
                std::size_t(std::count(committed.begin(), committed.end(), true)) * granule);
      // The rounded-up count commits nothing more.
      ASSERT_TRUE(g.runs_between(state, {pages, true}).empty());
    }
  }
}

TEST(KvGranules, ChunksFillWholeGranulesInEveryLayer) {
  const KvCacheLayout layout{3, 100000, 16, 2, 48, DType::bf16};  // 6 KiB pages
  const KvGranules g(layout, 99999, std::size_t(2) << 20);
  const std::int32_t chunk = g.chunk_pages(std::size_t(64) << 20);
  EXPECT_EQ(std::size_t(chunk) * layout.page_bytes() % (std::size_t(2) << 20), 0u);
  EXPECT_GE(std::size_t(chunk) * layout.page_bytes() * 3, std::size_t(64) << 20);
  EXPECT_LT(std::size_t(chunk) * layout.page_bytes() * 3, std::size_t(64 + 6 * 3 * 2) << 20);  // the least such
  EXPECT_EQ(g.chunk_pages(std::size_t(1) << 40), 100000);  // never more than the cache
}

std::vector<float> random_floats(std::size_t n, std::mt19937& rng) {
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> out(n);
  for (auto& x : out) x = u(rng);
  return out;
}

TEST(KvGrow, GrowsInChunksAndStopsCleanlyAtTheLimit) {
  cpu::CpuBackend backend(1);
  const KvCacheLayout layout{2, 65, 4, 1, 8, DType::f32};  // 256-byte pages, 16,640-byte layers
  backend.emulate_kv_commits(4096, 6 * 4096);
  KvCache cache = backend.reserve_kv_cache(layout, 64);  // page 64: kept backed (a scratch page)
  EXPECT_EQ(cache.n_growable_pages, 64);
  EXPECT_EQ(kv_backed_bytes(cache), backend.emulated_committed_bytes());
  const std::size_t after_tail = backend.emulated_committed_bytes();
  EXPECT_GT(after_tail, 0u);

  // A chunk is at least k_kv_chunk_bytes, more than the whole cache here: growth asks for every
  // page, which the limit refuses, then for the pages wanted.
  const std::int32_t backed = backend.kv_grow(cache, 10);
  EXPECT_GE(backed, 10);
  EXPECT_LT(backed, 64);
  EXPECT_EQ(cache.backed_pages, backed);
  EXPECT_EQ(kv_backed_bytes(cache), backend.emulated_committed_bytes());
  EXPECT_EQ(backend.kv_grow(cache, 5), backed);  // already there: nothing to do

  // Past the limit: fewer than asked, nothing half-committed, nothing thrown.
  const std::size_t before = backend.emulated_committed_bytes();
  std::int32_t last = backed;
  for (std::int32_t want = backed + 1; want <= 64; ++want) {
    const std::int32_t now = backend.kv_grow(cache, want);
    EXPECT_GE(now, last);
    EXPECT_EQ(kv_backed_bytes(cache), backend.emulated_committed_bytes());
    EXPECT_LE(backend.emulated_committed_bytes(), std::size_t(6 * 4096));
    last = now;
  }
  EXPECT_LT(last, 64);
  EXPECT_GE(backend.emulated_committed_bytes(), before);

  // Bytes of pages past the backed ones were never written (0xff), backed ones were zeroed.
  const auto* bytes = static_cast<const unsigned char*>(cache.storage->data());
  const std::size_t layer = layout.page_bytes() * 65;
  for (std::int32_t l = 0; l < 2; ++l) {
    for (std::int32_t p = 0; p < last; ++p) EXPECT_EQ(bytes[std::size_t(l) * layer + std::size_t(p) * 256], 0);
    EXPECT_EQ(bytes[std::size_t(l) * layer + 64 * 256], 0);  // the tail page
  }
  EXPECT_EQ(bytes[std::size_t(64 - 1) * 256 + 255], 0xff);  // layer 0's last growable page: never backed
}

TEST(KvGrow, CpuBackendWithoutEmulationBacksEverything) {
  cpu::CpuBackend backend(1);
  const KvCacheLayout layout{2, 9, 4, 1, 8, DType::f32};
  KvCache cache = backend.reserve_kv_cache(layout, 8);
  EXPECT_EQ(cache.granule_bytes, 0u);
  EXPECT_EQ(cache.backed_pages, 9);
  EXPECT_EQ(backend.kv_grow(cache, 9), 9);
  EXPECT_EQ(kv_backed_bytes(cache), layout.size_bytes());
}

// One prefill row of n_tokens through kv_store + attention on `cache` over `pages`.
std::vector<float> attend(cpu::CpuBackend& backend, KvCache& cache, const std::vector<std::int32_t>& pages,
                          std::int32_t n_tokens, const std::vector<float>& q, const std::vector<float>& k,
                          const std::vector<float>& v, std::int32_t layer) {
  const std::int32_t n_heads = 2, n_kv = 1, d = 8;
  Step step;
  step.tokens.assign(std::size_t(n_tokens), 0);
  step.rows.push_back({n_tokens, 0, 1, 0, std::int32_t(pages.size())});
  step.block_tables = pages;
  backend.begin_step(step, cache);
  std::vector<float> out(q.size());
  Tensor qt{const_cast<float*>(q.data()), DType::f32, n_tokens, n_heads * d, n_heads * d};
  Tensor kt{const_cast<float*>(k.data()), DType::f32, n_tokens, n_kv * d, n_kv * d};
  Tensor vt{const_cast<float*>(v.data()), DType::f32, n_tokens, n_kv * d, n_kv * d};
  Tensor ot{out.data(), DType::f32, n_tokens, n_heads * d, n_heads * d};
  backend.kv_store(cache, layer, kt, vt);
  backend.attention(cache, qt, AttentionParams{layer, n_heads, n_kv, d, 0.3f, 0}, ot);
  return out;
}

TEST(KvGrow, KernelsInANewlyBackedChunkMatchAWholeAllocation) {
  std::mt19937 rng(5);
  const KvCacheLayout layout{2, 40, 4, 1, 8, DType::f32};  // 256-byte pages
  cpu::CpuBackend reference(1), grown(1);
  KvCache whole = reference.allocate_kv_cache(layout);
  grown.emulate_kv_commits(1024, 4096);  // the last page of each layer, then 4 pages of each
  KvCache cache = grown.reserve_kv_cache(layout, 39);
  const std::int32_t first = grown.kv_grow(cache, 4);
  ASSERT_EQ(first, 4);
  grown.emulate_kv_commits(1024, 0);  // room for a whole chunk: the rest of the cache
  const std::int32_t second = grown.kv_grow(cache, first + 3);
  ASSERT_GE(second, first + 3);
  // Pages only the second growth backed, out of order.
  const std::vector<std::int32_t> pages = {first + 2, first, first + 1};
  const std::int32_t n_tokens = 11;
  const auto q = random_floats(std::size_t(n_tokens) * 16, rng);
  const auto k = random_floats(std::size_t(n_tokens) * 8, rng);
  const auto v = random_floats(std::size_t(n_tokens) * 8, rng);
  for (std::int32_t layer = 0; layer < 2; ++layer) {
    const auto expected = attend(reference, whole, pages, n_tokens, q, k, v, layer);
    const auto got = attend(grown, cache, pages, n_tokens, q, k, v, layer);
    for (std::size_t i = 0; i < got.size(); ++i) {
      ASSERT_TRUE(std::isfinite(got[i])) << "read an unbacked byte at " << i;
      ASSERT_EQ(got[i], expected[i]) << "layer " << layer << " element " << i;
    }
  }
}

}  // namespace
}  // namespace flare::helios
