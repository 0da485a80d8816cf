// The kernel catalog against the CUDA backend on every tiny fixture model (and the demo model):
// after warm-up forwards of every cataloged step shape (the prefill chunk with and without logits,
// each decode bucket, on BF16 and FP8 pages), verify steps of 2, 3 and 8 tokens a row (the decode
// kernel's QTOK 2, 4 and 8 modules), a mixed step, graph captures of the same shapes and
// device sampling, the modules the backend loaded are exactly the catalog's (nothing beyond it:
// the enumeration is complete; nothing short of it: it lists no module serving never loads). A
// backend built from the catalog's images serves the same steps; one built from images lacking a
// module is refused before anything loads.
#ifdef FLARE_HAVE_CUDA

#include <algorithm>
#include <cctype>
#include <cmath>
#include <iterator>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "../support/demo_reference.h"
#include "common/error.h"
#include "gpu_support.h"
#include "helios/cuda/kernel_catalog.h"
#include "helios/serving_catalog.h"
#include "model/kernel_needs.h"
#include "model/model.h"

namespace flare::model {
namespace {

using namespace helios::gpu_testing;
using helios::DType;
using helios::ServingCatalog;
using helios::StepShape;

constexpr std::int32_t k_page_size = 16, k_chunk = 48, k_pages = 96;

// BF16 and FP8 KV pages, FP8 where the head size has the fast kernels (the plain one is BF16 only).
ServingSettings serving(const ModelSpec& spec) {
  std::vector<DType> kv = {DType::bf16};
  if (helios::cuda::fast_attention_covers(spec.head_dim)) kv.push_back(DType::f8_e4m3);
  return {.decode_buckets = {1, 2, 4}, .prefill_chunk_tokens = k_chunk, .page_size_tokens = k_page_size,
          .kv_dtypes = kv};
}

std::vector<std::string> fixture_names() {
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(test_data_dir() / "models", ec)) {
    if (fs::exists(entry.path() / "config.json")) out.push_back(entry.path().filename().string());
  }
  std::sort(out.begin(), out.end());
  out.push_back("demo");
  return out;
}

fs::path model_dir(const std::string& name) {
  return name == "demo" ? testing_support::demo_model_dir(FLARE_SOURCE_DIR) : test_data_dir() / "models" / name;
}

// A step of rows of `tokens_per_row` tokens each wanting `logits_per_row` logits, every row
// starting at `start` on pages of its own from `first_page` on (never the last, the scratch page).
helios::Step make_step(std::int32_t n_rows, std::int32_t tokens_per_row, std::int32_t logits_per_row,
                       std::int32_t start, std::int32_t vocab, std::int32_t first_page = 0) {
  helios::Step step;
  std::int32_t page = first_page;
  for (std::int32_t r = 0; r < n_rows; ++r) {
    helios::StepRow row;
    row.n_tokens = tokens_per_row;
    row.start_position = start;
    row.n_logits = logits_per_row;
    row.first_block = std::int32_t(step.block_tables.size());
    row.n_blocks = (start + tokens_per_row + k_page_size - 1) / k_page_size;
    for (std::int32_t b = 0; b < row.n_blocks; ++b) step.block_tables.push_back(page++ % (k_pages - 1));
    for (std::int32_t t = 0; t < tokens_per_row; ++t) step.tokens.push_back((t * 7919 + start + r) % vocab);
    step.rows.push_back(row);
  }
  return step;
}

// Every step serving reaches on `cache`'s dtype: the catalog's shapes eagerly, a mixed step, the
// same shapes captured as graphs, and device sampling greedy and filtered.
void warm_up(Model& model, helios::cuda::CudaBackend& backend, helios::HistoryCaches& cache, const ServingCatalog& catalog) {
  const std::int32_t vocab = model.spec().vocab_size;
  model.reserve(k_chunk + 8, 8, 8, 64);
  for (const StepShape& shape : catalog.graphs) {
    if (shape.kv_dtype != cache.groups.front().layout.dtype) continue;
    const std::int32_t start = shape.is_decode() ? 2 * k_page_size + 3 : 0;
    const std::vector<float> logits =
        model.forward(make_step(shape.n_rows, shape.tokens_per_row, shape.logits_per_row, start, vocab), cache);
    ASSERT_EQ(logits.size(), std::size_t(shape.n_logit_rows()) * std::size_t(vocab)) << shape.describe();
    for (const float v : logits) ASSERT_TRUE(std::isfinite(v)) << shape.describe();
  }
  // Verify rows (a pending token and drafts, every logits row wanted): the smallest QTOK holding the
  // step's longest row, 2, 4 (3 tokens) and 8.
  for (const std::int32_t width : {2, 3, 8}) {
    const std::vector<float> logits = model.forward(make_step(2, width, width, k_page_size - 1, vocab), cache);
    ASSERT_EQ(logits.size(), std::size_t(2 * width) * std::size_t(vocab));
    for (const float v : logits) ASSERT_TRUE(std::isfinite(v)) << "verify rows of " << width;
  }
  helios::Step mixed = make_step(1, k_chunk / 2, 1, k_page_size + 1, vocab);
  for (std::int32_t i = 0; i < 3; ++i) {
    helios::Step decode = make_step(1, 1, 1, 40 + i, vocab, 8 + 4 * i);
    helios::StepRow row = decode.rows[0];
    row.first_block = std::int32_t(mixed.block_tables.size());
    mixed.block_tables.insert(mixed.block_tables.end(), decode.block_tables.begin(), decode.block_tables.end());
    mixed.tokens.push_back(decode.tokens[0]);
    mixed.rows.push_back(row);
  }
  model.forward(mixed, cache);
  const std::int32_t scratch_page = k_pages - 1;
  for (const StepShape& shape : catalog.graphs) {
    if (shape.kv_dtype != cache.groups.front().layout.dtype) continue;
    EXPECT_TRUE(model.capture_graph(shape, cache, {scratch_page})) << shape.describe();
  }
  model.forward(make_step(3, 1, 1, 20, vocab), cache);  // padded to the 4-row graph
  model.drop_graphs();
  const helios::Tensor logits = model.forward_logits(make_step(2, 1, 1, 5, vocab), cache);
  helios::SamplingParams greedy;
  greedy.temperature = 0.0f;
  greedy.n_top_logprobs = 5;
  helios::SamplingParams filtered;
  filtered.temperature = 0.8f;
  filtered.top_k = 40;
  filtered.top_p = 0.95f;
  filtered.repetition_penalty = 1.1f;
  filtered.seed = 7;
  const std::vector<std::int32_t> prompt{1, 2, 3};
  std::vector<helios::SampleRequest> requests(2);
  requests[0].params = &greedy;
  requests[1].params = &filtered;
  for (auto& r : requests) r.history.prompt = prompt;
  for (const auto& token : backend.sample(logits, requests)) ASSERT_GE(token.token, 0);
  backend.synchronize();
}

void warm_up_every_kv_dtype(Model& model, helios::cuda::CudaBackend& backend, const ServingCatalog& catalog) {
  for (const DType kv : catalog.needs.kv_dtypes) {
    helios::HistoryCaches cache = helios::history_allocate(backend, model.kv_cache_layout(k_pages, k_page_size, kv));
    // Zero pages, so that decode rows attending to positions no step wrote read finite values.
    for (helios::KvCache& group : cache.groups) {
      const std::vector<std::byte> zeros(group.layout.size_bytes());
      backend.upload(*group.storage, 0, zeros.data(), zeros.size());
    }
    warm_up(model, backend, cache, catalog);
    model.drop_graphs();
  }
}

std::vector<std::string> keys_of(const std::map<std::string, std::string>& images) {
  std::vector<std::string> keys;
  for (const auto& [key, image] : images) keys.push_back(key);
  return keys;
}

class CudaKernelCatalog : public testing::TestWithParam<std::string> {};

TEST_P(CudaKernelCatalog, WarmUpLoadsExactlyTheCatalog) {
  std::string reason;
  auto backend = try_cuda_backend(&reason);
  if (!backend) GTEST_SKIP() << "no CUDA backend: " << reason;
  const fs::path dir = model_dir(GetParam());
  if (dir.empty()) GTEST_SKIP() << "the demo model's assets are not restored";
  auto model = Model::load(dir, *backend);
  const ServingCatalog catalog = helios::cuda::kernel_catalog(backend->platform(), kernel_needs(model->spec(), serving(model->spec())));
  warm_up_every_kv_dtype(*model, *backend, catalog);
  const std::vector<std::string> loaded = keys_of(backend->loaded_images());
  std::vector<std::string> beyond, unused;
  std::ranges::set_difference(loaded, catalog.modules, std::back_inserter(beyond));
  std::ranges::set_difference(catalog.modules, loaded, std::back_inserter(unused));
  EXPECT_TRUE(beyond.empty()) << "loaded beyond the catalog: " << fmt::format("{}", fmt::join(beyond, "; "));
  // FP8 GEMM tiles are listed where cuBLASLt may keep FP8 weights; these checkpoints are BF16.
  EXPECT_TRUE(unused.empty()) << "listed but never loaded: " << fmt::format("{}", fmt::join(unused, "; "));
  std::printf("[ catalog  ] %s: %zu kernel modules, %zu graphs on %s\n", GetParam().c_str(), catalog.modules.size(),
              catalog.graphs.size(), catalog.platform.arch().c_str());
}

TEST_P(CudaKernelCatalog, PackagedImagesServeAndAMissingModuleIsRefused) {
  std::string reason;
  auto compiler = try_cuda_backend(&reason);
  if (!compiler) GTEST_SKIP() << "no CUDA backend: " << reason;
  const fs::path dir = model_dir(GetParam());
  if (dir.empty()) GTEST_SKIP() << "the demo model's assets are not restored";
  const ModelSpec spec = model_spec_load(dir);
  const helios::KernelNeeds needs = kernel_needs(spec, serving(spec));
  const ServingCatalog catalog = helios::cuda::kernel_catalog(compiler->platform(), needs);
  compiler->precompile(helios::cuda::kernel_catalog_modules(catalog.platform, needs));
  std::map<std::string, std::string> images;
  for (const std::string& key : catalog.modules) images.emplace(key, compiler->loaded_images().at(key));
  compiler.reset();

  // Without one attention module (decode attention, or the plain kernel for other head sizes):
  // refused at construction, naming it.
  const auto decode = std::ranges::find_if(catalog.modules, [](const std::string& k) { return k.starts_with("attention"); });
  ASSERT_NE(decode, catalog.modules.end());
  helios::cuda::PackageKernels lacking{.images = images, .needs = needs, .origin = "package under test",
                                       .recorded = catalog};
  lacking.images.erase(*decode);
  try {
    helios::cuda::CudaBackend refused(0, kernel_cache_dir(), std::move(lacking));
    FAIL() << "a backend was built from images lacking " << *decode;
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ExitCode::usage) << e.what();
    EXPECT_NE(std::string(e.what()).find("package under test lacks 1 of"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(*decode), std::string::npos) << e.what();
  }

  // With all of them: every step serving reaches runs, and nothing loads beyond the catalog.
  helios::cuda::PackageKernels complete{.images = images, .needs = needs, .origin = "package under test",
                                        .recorded = catalog};
  helios::cuda::CudaBackend packaged(0, kernel_cache_dir(), std::move(complete));
  EXPECT_EQ(packaged.n_compiled(), 0);
  EXPECT_EQ(packaged.load_prebuilt_modules(), catalog.modules.size());
  auto model = Model::load(dir, packaged);
  warm_up_every_kv_dtype(*model, packaged, catalog);
  EXPECT_EQ(keys_of(packaged.loaded_images()), catalog.modules);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, CudaKernelCatalog, testing::ValuesIn(fixture_names()), [](const auto& info) {
  std::string name = info.param;
  for (char& c : name) {
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  }
  return name;
});
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(CudaKernelCatalog);

}  // namespace
}  // namespace flare::model

#endif  // FLARE_HAVE_CUDA
