// The CUDA backend's KV cache in a VMM reservation backed on demand: growth in chunks, kv_store and
// attention into pages of a newly mapped chunk against the CPU backend, growth past a commit cap
// and past the device's real memory answered as "no more pages" (never thrown), and every byte
// given back on destruction (cuMemGetInfo before and after). Skips without a GPU or NVRTC.
#ifdef FLARE_HAVE_CUDA

#include <numeric>
#include <random>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "common/sizes.h"
#include "gpu_support.h"
#include "helios/cpu/cpu_backend.h"
#include "helios/kv_backing.h"

namespace flare::helios {
namespace {

using namespace gpu_testing;

std::size_t device_free_bytes() {
  std::size_t free = 0, total = 0;
  cuda::check(cuda::driver().mem_get_info(&free, &total), "cuMemGetInfo");
  return free;
}

class CudaKvGrowth : public testing::Test {
 protected:
  void SetUp() override {
    std::string reason;
    gpu_ = try_cuda_backend(&reason);
    if (!gpu_) GTEST_SKIP() << "no CUDA backend: " << reason;
    rng_.seed(1234);
  }

  std::vector<std::uint16_t> random_bf16(std::size_t n) {
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::vector<std::uint16_t> v(n);
    for (auto& x : v) x = f32_to_bf16(normal(rng_));
    return v;
  }

  std::unique_ptr<cuda::CudaBackend> gpu_;
  cpu::CpuBackend cpu_{2};
  std::mt19937 rng_;
};

TEST_F(CudaKvGrowth, GrowsInChunksAndKernelsUseNewlyMappedPages) {
  const std::int32_t n_heads = 8, n_kv = 2, head_dim = 128, page = 16;
  const std::int32_t n_pages = 65536;  // 1 GiB of address space per layer; the last page is kept backed
  const KvCacheLayout layout{4, n_pages, page, n_kv, head_dim, DType::bf16};
  const std::size_t free_before = device_free_bytes();
  std::size_t free_at_end = 0, backed_at_end = 0;
  {
    KvCache cache = gpu_->reserve_kv_cache(layout, n_pages - 1);
    const void* base = cache.storage->data();
    EXPECT_LT(kv_backed_bytes(cache), std::size_t(64) << 20);  // the scratch page's granules only
    const std::int32_t first = gpu_->kv_grow(cache, 1);
    ASSERT_GE(first, 1);
    ASSERT_LT(first, n_pages - 1);
    const std::int32_t second = gpu_->kv_grow(cache, first + 1);
    ASSERT_GT(second, first);
    EXPECT_EQ(cache.storage->data(), base);  // the base address never moves
    std::printf("[ growth   ] chunks of %d pages; %s backed of %s reserved\n", first,
                format_bytes(kv_backed_bytes(cache)).c_str(), format_bytes(cache.storage->size_bytes()).c_str());
    EXPECT_LE(device_free_bytes() + kv_backed_bytes(cache), free_before + (std::size_t(8) << 20));

    // One prefill row over pages of the second chunk (out of order) and the kept last page,
    // against the CPU on a small cache holding the same data in pages 0..3.
    const std::vector<std::int32_t> gpu_pages = {second - 1, first, n_pages - 1, first + 7};
    const std::vector<std::int32_t> cpu_pages = {0, 1, 2, 3};
    KvCache cpu_kv = cpu_.allocate_kv_cache({4, 4, page, n_kv, head_dim, DType::bf16});
    const std::int32_t n_tokens = 4 * page - 5;
    auto step_over = [&](const std::vector<std::int32_t>& pages) {
      Step step;
      step.tokens.assign(std::size_t(n_tokens), 1);
      step.rows.push_back(StepRow{n_tokens, 0, 1, 0, std::int32_t(pages.size())});
      step.block_tables = pages;
      return step;
    };
    gpu_->begin_step(step_over(gpu_pages), cache);
    cpu_.begin_step(step_over(cpu_pages), cpu_kv);
    const std::int64_t kv_width = n_kv * head_dim, q_width = n_heads * head_dim;
    for (std::int32_t layer = 0; layer < layout.n_layers; ++layer) {
      const auto k = random_bf16(std::size_t(n_tokens * kv_width)), v = random_bf16(std::size_t(n_tokens * kv_width));
      const auto q = random_bf16(std::size_t(n_tokens * q_width));
      Matrix ck = host_f32(cpu_, k, n_tokens, kv_width), cv = host_f32(cpu_, v, n_tokens, kv_width);
      Matrix gk = device_bf16(*gpu_, k, n_tokens, kv_width, kv_width), gv = device_bf16(*gpu_, v, n_tokens, kv_width, kv_width);
      cpu_.kv_store(cpu_kv, layer, ck.t, cv.t);
      gpu_->kv_store(cache, layer, gk.t, gv.t);
      Matrix cq = host_f32(cpu_, q, n_tokens, q_width), cout = host_f32(cpu_, {}, n_tokens, q_width);
      Matrix gq = device_bf16(*gpu_, q, n_tokens, q_width, q_width), gout = device_bf16(*gpu_, {}, n_tokens, q_width, q_width);
      const AttentionParams p{layer, n_heads, n_kv, head_dim, 1.0f / std::sqrt(float(head_dim)), 0};
      cpu_.attention(cpu_kv, cq.t, p, cout.t);
      gpu_->attention(cache, gq.t, p, gout.t);
      expect_close(fmt::format("attention over new pages, layer {}", layer), device_values(*gpu_, gout),
                   host_values(cout), 1e-2f, 2e-2f);
      // The stored pages hold the CPU's bytes.
      for (std::size_t i = 0; i < gpu_pages.size(); ++i) {
        const std::size_t page_bytes = layout.page_bytes();
        std::vector<std::uint16_t> got(page_bytes / 2);
        gpu_->download(*cache.storage, (std::size_t(layer) * n_pages + std::size_t(gpu_pages[i])) * page_bytes,
                       got.data(), page_bytes);
        const auto* want = static_cast<const std::uint16_t*>(cpu_kv.storage->data()) +
                           (std::size_t(layer) * 4 + std::size_t(cpu_pages[i])) * page_bytes / 2;
        EXPECT_TRUE(std::equal(got.begin(), got.end(), want)) << "layer " << layer << " page " << gpu_pages[i];
      }
    }
    const std::vector<PageCopy> copies = {{first, second - 2}};  // into the new chunk, every layer
    gpu_->kv_copy_pages(cache, copies);
    gpu_->synchronize();
    free_at_end = device_free_bytes();
    backed_at_end = kv_backed_bytes(cache);
  }
  // Destruction gives back every backed byte (kernels loaded meanwhile keep theirs).
  EXPECT_GE(device_free_bytes() + (std::size_t(2) << 20), free_at_end + backed_at_end);
}

TEST_F(CudaKvGrowth, GrowthPastACapIsAFullPoolNotAnError) {
  const KvCacheLayout layout{2, 4097, 16, 2, 64, DType::bf16};  // 8 KiB pages
  gpu_->set_kv_commit_limit_bytes(std::size_t(40) << 20);  // less than the 66 MiB of the whole cache
  KvCache cache = gpu_->reserve_kv_cache(layout, 4096);
  std::int32_t backed = 0;
  for (std::int32_t want = 1; want <= 4096; want += 64) {
    std::int32_t now = 0;
    ASSERT_NO_THROW(now = gpu_->kv_grow(cache, want));
    ASSERT_GE(now, backed);
    backed = now;
  }
  EXPECT_LT(backed, 4096);
  EXPECT_GT(backed, 0);
  EXPECT_LE(kv_backed_bytes(cache), std::size_t(40) << 20);
  EXPECT_EQ(gpu_->kv_grow(cache, 4096), backed);  // asked again: the same answer
  // The backed pages work: a copy into the last backed page, synchronized without an error.
  const std::vector<PageCopy> copies = {{0, backed - 1}};
  gpu_->kv_copy_pages(cache, copies);
  EXPECT_NO_THROW(gpu_->synchronize());
  gpu_->set_kv_commit_limit_bytes(0);
}

TEST_F(CudaKvGrowth, RunningOutOfDeviceMemoryIsAFullPool) {
  const std::size_t free_before = device_free_bytes();
  const std::size_t page_bytes = std::size_t(1) << 20;  // 256 tokens x 8 heads x 128 x bf16 x (k, v)
  const auto n_pages = std::int32_t(free_before * 5 / 4 / (2 * page_bytes) + 2);  // more than the device holds
  const KvCacheLayout layout{2, n_pages, 256, 8, 128, DType::bf16};
  ASSERT_EQ(layout.page_bytes(), page_bytes);
  std::size_t free_at_end = 0, backed_at_end = 0;
  {
    KvCache cache = gpu_->reserve_kv_cache(layout, n_pages - 1);
    std::int32_t backed = 0;
    for (std::int32_t stride = 8192; stride >= 1;) {
      std::int32_t now = 0;
      ASSERT_NO_THROW(now = gpu_->kv_grow(cache, std::min(backed + stride, n_pages - 1)));
      if (now == backed) stride /= 2;
      backed = now;
    }
    std::printf("[ memory   ] %s free before; %d of %d pages backed (%s) when the device ran out, %s free\n",
                format_bytes(free_before).c_str(), backed, n_pages - 1, format_bytes(kv_backed_bytes(cache)).c_str(),
                format_bytes(device_free_bytes()).c_str());
    EXPECT_LT(backed, n_pages - 1);
    EXPECT_GT(kv_backed_bytes(cache), free_before / 2);
    EXPECT_EQ(gpu_->kv_grow(cache, n_pages - 1), backed);
    free_at_end = device_free_bytes();
    backed_at_end = kv_backed_bytes(cache);
  }
  EXPECT_GE(device_free_bytes() + (std::size_t(2) << 20), free_at_end + backed_at_end) << "destruction gave it back";
  EXPECT_GE(device_free_bytes() + (std::size_t(64) << 20), free_before);
}

TEST_F(CudaKvGrowth, WholeAllocationsStayAsTheyWere) {
  KvCache cache = gpu_->allocate_kv_cache({2, 8, 16, 2, 64, DType::bf16});
  EXPECT_EQ(cache.backed_pages, 8);
  EXPECT_EQ(cache.granule_bytes, 0u);
  EXPECT_EQ(gpu_->kv_grow(cache, 8), 8);
  EXPECT_EQ(kv_backed_bytes(cache), cache.layout.size_bytes());
}

}  // namespace
}  // namespace flare::helios

#endif  // FLARE_HAVE_CUDA
