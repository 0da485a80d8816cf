// The CUDA backend (see cuda_backend.h): memory, copies, the step descriptor and each operation's
// launch. Shapes and dtypes are checked on the host before a launch; kernels trust them.
#include "helios/cuda/cuda_backend.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <exception>
#include <initializer_list>
#include <memory>
#include <thread>

#include "common/error.h"
#include "helios/cuda/graph.h"
#include "helios/cuda/tensor_checks.h"
#include "helios/step_pack.h"

namespace flare::helios::cuda {
namespace {

class DeviceBuffer final : public Buffer {
 public:
  explicit DeviceBuffer(std::size_t size_bytes) : memory_(size_bytes) {}
  void* data() const override { return memory_.data(); }
  std::size_t size_bytes() const override { return memory_.size_bytes(); }

 private:
  DeviceMemory memory_;
};

unsigned blocks_for(std::int64_t n, std::int64_t per_block) { return unsigned((n + per_block - 1) / per_block); }

bool aligned_16(const void* p) { return reinterpret_cast<std::uintptr_t>(p) % 16 == 0; }

// flare_rms_norm_vec (rms_norm.cu) holds up to this many 16-byte chunks per thread, in blocks of
// up to this many threads.
constexpr std::int64_t k_rms_vec_chunks = 4;
constexpr std::int64_t k_rms_vec_threads = 512;

}  // namespace

CudaBackend::CudaBackend(int device_index, const std::filesystem::path& kernel_cache_dir,
                         const std::filesystem::path& cuda_root, const CudaBackendOptions& options)
    : CudaBackend(device_index, kernel_cache_dir, static_cast<PackageKernels*>(nullptr), cuda_root, options) {}

CudaBackend::CudaBackend(int device_index, const std::filesystem::path& kernel_cache_dir, PackageKernels kernels,
                         const std::filesystem::path& cuda_root, const CudaBackendOptions& options)
    : CudaBackend(device_index, kernel_cache_dir, &kernels, cuda_root, options) {}

CudaBackend::CudaBackend(int device_index, const std::filesystem::path& kernel_cache_dir, PackageKernels* kernels,
                         const std::filesystem::path& cuda_root, const CudaBackendOptions& options)
    : options_(options),
      context_(device_index),
      nvrtc_(kernels ? nullptr : std::make_unique<Nvrtc>(cuda_root)),
      cache_(kernel_cache_dir),
      prebuilt_(kernels ? std::move(kernels->images) : std::map<std::string, std::string>{}) {
  std::string reason;
  cublaslt_ = CublasLt::try_load(cuda_root, &reason);  // null: the NVRTC GEMM serves
  if (kernels) {  // before anything loads: a missing module is the package's fault, named as such
    package_catalog_ = kernel_catalog(platform(), kernels->needs);
    serving_catalog_require(package_catalog_, prebuilt_, kernels->origin,
                            kernels->recorded ? &*kernels->recorded : nullptr);
  }
  // The shape-independent kernels, compiled in parallel, so a broken toolchain shows at construction.
  precompile(fixed_modules(device(), options_, cublaslt_ != nullptr, stream_gemm_wanted()));
  function("embedding", "flare_embedding");
  function("rms_norm", "flare_rms_norm");
  function("rms_norm", "flare_rms_norm_vec");
  function("rms_norm", "flare_rms_norm_partials");
  function("swiglu", "flare_swiglu");
  function("swiglu", "flare_swiglu_vec");
  function("linear", "flare_linear_bf16");
  function("linear", "flare_linear_f32");
  function("gather_rows", "flare_gather_rows");
  function(sampler_module(device(), 1, options_), "flare_sample");
  init_gemm(kernel_cache_dir);
}

CudaBackend::~CudaBackend() {
  try {
    stream_.synchronize();
  } catch (const Error&) {  // a failed stream has nothing left to wait for
  }
}

void CudaBackend::precompile(const std::vector<KernelModule>& modules) {
  if (!nvrtc_) return;
  std::vector<std::pair<std::string, const KernelModule*>> missing;  // module key, module
  for (const KernelModule& module : modules) {
    std::string key = module.key();
    if (!modules_.contains(key) && std::ranges::none_of(missing, [&](const auto& m) { return m.first == key; })) {
      missing.emplace_back(std::move(key), &module);
    }
  }
  std::vector<std::string> cubins(missing.size());
  std::vector<std::exception_ptr> errors(missing.size());
  {
    std::vector<std::jthread> threads;
    for (std::size_t i = 0; i < missing.size(); ++i) {
      threads.emplace_back([&, i] {
        try {
          CompileOptions options;
          options.arch = compile_arch(missing[i].second->defines);
          options.defines = missing[i].second->defines;
          cubins[i] = nvrtc_->compile_cached(cache_, embedded_kernel(missing[i].second->source), options);
        } catch (...) {
          errors[i] = std::current_exception();
        }
      });
    }
  }  // joined
  for (const std::exception_ptr& error : errors) {
    if (error) std::rethrow_exception(error);
  }
  for (std::size_t i = 0; i < missing.size(); ++i) {
    modules_.emplace(missing[i].first, std::make_unique<Module>(missing[i].second->source, cubins[i]));
    images_.emplace(missing[i].first, std::move(cubins[i]));
  }
}

KernelPlatform CudaBackend::platform() const {
  return kernel_platform(device(), options_, cublaslt_ != nullptr, stream_gemm_wanted());
}

bool CudaBackend::stream_gemm_wanted() const {
  if (!options_.stream_gemm || !StreamGemm::available(context_.device())) return false;
  // A package exported without it (another GPU, or the option off) has no images of its modules.
  return nvrtc_ || std::ranges::all_of(StreamGemm::k_tiles, [&](int tile) {
           return prebuilt_.contains(module_key(k_stream_gemm_source, stream_tile_defines(tile)));
         });
}

std::string CudaBackend::compile_arch(const Defines& defines) const {
  const bool specific = std::ranges::any_of(defines, [](const auto& d) { return d.first == k_arch_specific_define; });
  return context_.device().arch() + (specific ? "a" : "");
}

CUfunction CudaBackend::function(const std::string& source, const std::string& entry, const Defines& defines) {
  const std::string module_key = cuda::module_key(source, defines);
  const std::string function_key = module_key + " " + entry;
  if (auto it = functions_.find(function_key); it != functions_.end()) return it->second;
  auto module_it = modules_.find(module_key);
  if (module_it == modules_.end()) {
    std::string cubin;
    if (!nvrtc_) {
      const auto image = prebuilt_.find(module_key);
      // The constructor checked the package against its catalog: a module beyond it is a launch
      // the catalog does not enumerate (kernel_catalog.h).
      if (image == prebuilt_.end())
        fail(ExitCode::failure, "internal: kernel module '{}' is not in the kernel catalog the package was checked "
             "against on {}", module_key, context_.device().arch());
      cubin = image->second;
    } else {
      CompileOptions options;
      options.arch = compile_arch(defines);
      options.defines = defines;
      cubin = nvrtc_->compile_cached(cache_, embedded_kernel(source), options);
    }
    module_it = modules_.emplace(module_key, std::make_unique<Module>(source, cubin)).first;
    images_.emplace(module_key, std::move(cubin));
  }
  const CUfunction f = module_it->second->function(entry.c_str());
  functions_.emplace(function_key, f);
  return f;
}

std::size_t CudaBackend::load_prebuilt_modules() {
  for (const std::string& key : package_catalog_.modules) {
    if (modules_.contains(key)) continue;
    const std::string& cubin = prebuilt_.at(key);  // there: the constructor checked
    modules_.emplace(key, std::make_unique<Module>(key.substr(0, key.find(' ')), cubin));
    images_.emplace(key, cubin);
  }
  return modules_.size();
}

void CudaBackend::launch(CUfunction f, const LaunchShape& shape, std::vector<void*> args, std::string_view name,
                         bool early_work) {
  if (shape.grid_x == 0 || shape.grid_y == 0 || shape.grid_z == 0) return;  // nothing to compute
  LaunchShape s = shape;
  s.overlap_previous = early_work ? early_work_programmatic_launch(device(), options_.dependent_launch)
                                  : programmatic_launch(device(), options_.dependent_launch);
  cuda::launch(f, s, stream_, std::move(args), name);
}

std::unique_ptr<Buffer> CudaBackend::allocate(std::size_t size_bytes) { return std::make_unique<DeviceBuffer>(size_bytes); }

void CudaBackend::upload(Buffer& dst, std::size_t offset, const void* src, std::size_t size) {
  if (offset > dst.size_bytes() || size > dst.size_bytes() - offset) fail(ExitCode::failure, "internal: upload out of bounds");
  // From pageable memory the driver stages the bytes before returning, so `src` may go right after.
  copy_to_device(address(dst.data()) + offset, src, size, stream_);
}

void CudaBackend::download(const Buffer& src, std::size_t offset, void* dst, std::size_t size) {
  if (offset > src.size_bytes() || size > src.size_bytes() - offset) fail(ExitCode::failure, "internal: download out of bounds");
  copy_to_host(dst, address(src.data()) + offset, size, stream_);
  stream_.synchronize();
}

void CudaBackend::synchronize() { stream_.synchronize(); }

void CudaBackend::kv_copy_pages(KvCache& cache, std::span<const PageCopy> copies) {
  const KvCacheLayout& l = cache.layout;
  for (const PageCopy& c : copies) {
    if (c.src_page < 0 || c.src_page >= l.n_pages || c.dst_page < 0 || c.dst_page >= l.n_pages) {
      fail(ExitCode::failure, "internal: page copy {} -> {} outside 0..{}", c.src_page, c.dst_page, l.n_pages - 1);
    }
  }
  const CUdeviceptr base = address(cache.storage->data());
  const std::size_t page_bytes = l.page_bytes();
  for (std::int32_t layer = 0; layer < l.n_layers; ++layer) {
    const CUdeviceptr layer_base = base + std::size_t(layer) * std::size_t(l.n_pages) * page_bytes;
    for (const PageCopy& c : copies) {
      check(driver().memcpy_dtod_async(layer_base + std::size_t(c.dst_page) * page_bytes,
                                       layer_base + std::size_t(c.src_page) * page_bytes, page_bytes, stream_.handle()),
            "cuMemcpyDtoDAsync");
    }
  }
}

void CudaBackend::reserve_step_values(std::size_t n_values) {
  const std::size_t bytes = std::max<std::size_t>(n_values, 1024) * sizeof(std::int32_t);
  if (step_device_ && step_device_->size_bytes() >= bytes) return;
  stream_.synchronize();  // queued kernels may still read the old arrays
  step_device_ = std::make_unique<DeviceMemory>(bytes);
  ++graph_generation_;
}

void CudaBackend::reserve_step(std::int32_t max_tokens, std::int32_t max_rows, std::int32_t max_blocks,
                               std::int32_t n_groups) {
  if (std::size_t(std::max(max_blocks, 0)) > step_capacity_blocks_) {
    step_capacity_blocks_ = std::size_t(max_blocks);
    ++graph_generation_;  // the group tables' stride changed
  }
  reserve_step_values(StepPackLayout::capacity(max_tokens, max_rows, std::int32_t(step_capacity_blocks_), n_groups));
  step_capacity_tokens_ = std::max<std::int64_t>(step_capacity_tokens_, max_tokens);
  reserve_fp8_scratch(step_capacity_tokens_);
}

void CudaBackend::begin_step(const Step& step, std::span<const KvCache* const> caches) {
  std::vector<std::int32_t> n_pages;
  for (const KvCache* cache : caches) n_pages.push_back(cache->layout.n_pages);
  step_validate(step, n_pages, caches.front()->layout.page_size_tokens);
  step_ = step;
  n_logit_rows_ = step.n_logit_rows();
  if (step.block_tables.size() > step_capacity_blocks_) {
    step_capacity_blocks_ = step.block_tables.size();
    ++graph_generation_;  // the group tables' stride changed
  }
  const StepPackLayout layout = StepPackLayout::of(step, std::int32_t(caches.size()), step_capacity_blocks_);
  reserve_step_values(layout.size);
  // Pinned staging and one asynchronous copy: a replayed graph needs nothing else from the host.
  staging_.next_step();
  auto* packed = static_cast<std::int32_t*>(staging_.stage(layout.size * sizeof(std::int32_t)));
  step_pack(step, layout, std::span<std::int32_t>(packed, layout.size));
  staging_.copy(step_device_->address(), packed, layout.size * sizeof(std::int32_t));
  const CUdeviceptr base = step_device_->address();
  const auto at = [&](std::size_t index) { return base + index * sizeof(std::int32_t); };
  arrays_.tokens = at(layout.tokens);
  arrays_.positions = at(layout.positions);
  arrays_.token_rows = at(layout.token_rows);
  arrays_.row_first_block = at(layout.row_first_block);
  arrays_.row_first_token = at(layout.row_first_token);
  arrays_.block_tables = at(layout.block_tables);
  arrays_.group_tables.resize(caches.size());
  for (std::size_t g = 0; g < caches.size(); ++g) arrays_.group_tables[g] = at(layout.group_tables(std::int32_t(g)));
  arrays_.logit_tokens = at(layout.logit_tokens);
}

CUdeviceptr CudaBackend::block_tables_of(const KvCache& cache) const {
  if (cache.group < 0 || std::size_t(cache.group) >= arrays_.group_tables.size()) {
    fail(ExitCode::failure, "internal: a KV cache of history group {} in a step of {} groups", cache.group,
         arrays_.group_tables.size());
  }
  return arrays_.group_tables[std::size_t(cache.group)];
}

void CudaBackend::upload_step_input(Buffer& dst, std::size_t offset, const void* src, std::size_t size) {
  if (offset > dst.size_bytes() || size > dst.size_bytes() - offset) {
    fail(ExitCode::failure, "internal: step input upload out of bounds");
  }
  void* staged = staging_.stage(size);
  std::memcpy(staged, src, size);
  staging_.copy(address(dst.data()) + offset, staged, size);
}

namespace {

class CudaStepGraph final : public StepGraph {
 public:
  CudaStepGraph(std::unique_ptr<GraphExec> exec, std::uint64_t graph_generation)
      : exec_(std::move(exec)), graph_generation_(graph_generation) {}
  std::size_t n_nodes() const override { return exec_->n_nodes(); }
  const GraphExec& exec() const { return *exec_; }
  std::uint64_t graph_generation() const { return graph_generation_; }

 private:
  std::unique_ptr<GraphExec> exec_;
  std::uint64_t graph_generation_;  // the backend memory the recording names
};

}  // namespace

std::unique_ptr<StepGraph> CudaBackend::capture(const std::function<void()>& enqueue) {
  StreamCapture capture(stream_);
  enqueue();
  return std::make_unique<CudaStepGraph>(capture.finish(), graph_generation_);
}

void CudaBackend::replay(const StepGraph& graph) {
  const auto* g = dynamic_cast<const CudaStepGraph*>(&graph);
  if (!g) fail(ExitCode::failure, "internal: replaying a step graph another backend captured");
  if (g->graph_generation() != graph_generation_) {
    fail(ExitCode::failure, "internal: replaying a step graph whose device buffers have since moved (capture it again)");
  }
  g->exec().launch(stream_);
}

void CudaBackend::embedding(const Tensor& table, Tensor out) {
  expect_dtype(table, DType::bf16, "embedding table");
  expect_dtype(out, DType::bf16, "embedding output");
  expect_shape(out, step_.n_tokens(), table.cols, "embedding output");
  for (const std::int32_t token : step_.tokens) {
    if (token < 0 || token >= table.rows) fail_input("token id {} outside the vocabulary 0..{}", token, table.rows - 1);
  }
  CUdeviceptr table_ptr = address(table), tokens_ptr = arrays_.tokens, out_ptr = address(out);
  long long table_stride = table.stride, out_stride = out.stride;
  int vocab = int(table.rows), cols = int(table.cols);
  launch(function("embedding", "flare_embedding"), {.grid_x = unsigned(out.rows), .block_x = 256},
         {&table_ptr, &table_stride, &vocab, &tokens_ptr, &out_ptr, &out_stride, &cols}, "embedding");
}

namespace {

// Whether flare_rms_norm_vec (and flare_rms_norm_partials) take rows of `cols` at these addresses.
bool rms_vec_takes(std::int64_t cols, std::initializer_list<const Tensor*> tensors, const Tensor& weight) {
  if (cols % 8 != 0 || cols / 8 > k_rms_vec_chunks * k_rms_vec_threads || !aligned_16(weight.data)) return false;
  return std::ranges::all_of(tensors, [](const Tensor* t) { return !t || (t->stride % 8 == 0 && aligned_16(t->data)); });
}

// About two chunks per thread: a decode step's one row takes a whole CTA (hidden 4096: 256
// threads). The block depends on cols only, so every row is reduced in the same order whatever
// the batch.
unsigned rms_vec_threads(std::int64_t cols) {
  const std::int64_t n_chunks = cols / 8;
  return unsigned(std::clamp<std::int64_t>(((n_chunks + 1) / 2 + 31) / 32 * 32, 32, k_rms_vec_threads));
}

}  // namespace

void CudaBackend::rms_norm(const Tensor& x, Tensor* residual, const Tensor& weight, float eps, Tensor out) {
  expect_dtype(x, DType::bf16, "rms_norm input");
  expect_dtype(out, DType::bf16, "rms_norm output");
  expect_dtype(weight, DType::f32, "rms_norm weight");
  expect_shape(out, x.rows, x.cols, "rms_norm output");
  if (weight.rows * weight.cols != x.cols) fail(ExitCode::failure, "internal: rms_norm weight width {}", weight.cols);
  CUdeviceptr x_ptr = address(x), res_ptr = 0, w_ptr = address(weight), out_ptr = address(out);
  long long x_stride = x.stride, res_stride = 0, out_stride = out.stride;
  if (residual) {
    expect_dtype(*residual, DType::bf16, "rms_norm residual");
    expect_shape(*residual, x.rows, x.cols, "rms_norm residual");
    res_ptr = address(*residual);
    res_stride = residual->stride;
  }
  int cols = int(x.cols);
  float eps_v = eps;
  std::vector<void*> args = {&x_ptr, &x_stride, &res_ptr, &res_stride, &w_ptr, &eps_v, &out_ptr, &out_stride, &cols};
  // The row in registers, read and written once in 16-byte chunks, when its shape allows.
  if (rms_vec_takes(x.cols, {&x, &out, residual}, weight)) {
    launch(function("rms_norm", "flare_rms_norm_vec"), {.grid_x = unsigned(x.rows), .block_x = rms_vec_threads(x.cols)},
           std::move(args), "rms_norm");
    return;
  }
  launch(function("rms_norm", "flare_rms_norm"), {.grid_x = unsigned(x.rows), .block_x = 256}, std::move(args), "rms_norm");
}

void CudaBackend::linear_residual_rms_norm(const Tensor& x, const Tensor& weight, Tensor delta, Tensor residual,
                                           const Tensor& norm_weight, float eps, Tensor out) {
  const GemmOperands op = gemm_operands(x, weight, delta);
  const bool fusable = gemm_ && x.rows > 0 && x.dtype == DType::bf16 && GemmRunner::split_takes(op) &&
                       residual.dtype == DType::bf16 && out.dtype == DType::bf16 && norm_weight.dtype == DType::f32 &&
                       x.cols == weight.cols && norm_weight.rows * norm_weight.cols == weight.rows &&
                       delta.rows == x.rows && delta.cols == weight.rows && residual.rows == x.rows &&
                       residual.cols == weight.rows && out.rows == x.rows && out.cols == weight.rows &&
                       rms_vec_takes(weight.rows, {&residual, &out}, norm_weight);
  if (!fusable) {
    Backend::linear_residual_rms_norm(x, weight, delta, residual, norm_weight, eps, out);
    return;
  }
  reserve_split_partials(op);
  // The race runs each entrant's norm on rows of its own, so the residual is added once.
  std::unique_ptr<DeviceMemory> race_rows;
  const auto norm_for_race = [&](int parts) {
    const std::size_t row_bytes = std::size_t(out.rows * out.cols) * 2;
    if (!race_rows) {
      race_rows = std::make_unique<DeviceMemory>(2 * row_bytes);
      check(driver().memset_d8_async(race_rows->address(), 0, 2 * row_bytes, stream_.handle()), "cuMemsetD8Async");
    }
    const Tensor race_residual{race_rows->data(), DType::bf16, out.rows, out.cols, out.cols};
    const Tensor race_out{static_cast<char*>(race_rows->data()) + row_bytes, DType::bf16, out.rows, out.cols, out.cols};
    residual_rms_norm(parts, delta, race_residual, norm_weight, eps, race_out);
  };
  const int parts = split_partials_ ? gemm_->run_split(op, gemm_tuning_, split_partials_->address(),
                                                       split_partials_->size_bytes(), norm_for_race)
                                    : -1;
  if (parts < 0) {
    Backend::linear_residual_rms_norm(x, weight, delta, residual, norm_weight, eps, out);
    return;
  }
  residual_rms_norm(parts, delta, residual, norm_weight, eps, out);
}

void CudaBackend::residual_rms_norm(int parts, const Tensor& delta, Tensor residual, const Tensor& norm_weight, float eps,
                                    Tensor out) {
  if (parts == 0) {
    rms_norm(delta, &residual, norm_weight, eps, out);
    return;
  }
  CUdeviceptr partials = split_partials_->address(), res_ptr = address(residual), w_ptr = address(norm_weight);
  CUdeviceptr out_ptr = address(out);
  long long part_stride = delta.rows * delta.cols, res_stride = residual.stride, out_stride = out.stride;
  int n_parts = parts, cols = int(delta.cols);
  float eps_v = eps;
  launch(function("rms_norm", "flare_rms_norm_partials"),
         {.grid_x = unsigned(delta.rows), .block_x = rms_vec_threads(delta.cols)},
         {&partials, &part_stride, &n_parts, &res_ptr, &res_stride, &w_ptr, &eps_v, &out_ptr, &out_stride, &cols},
         "rms_norm_partials");
}

void CudaBackend::reserve_split_partials(const GemmOperands& op) {
  // Rows for every decode bucket the step capacity allows, so that growing buckets do not move it.
  GemmOperands largest = op;
  largest.m = std::max(op.m, std::min(step_capacity_tokens_, k_split_partials_max_m));
  const std::size_t want = GemmRunner::partials_bytes(largest, k_split_partials_parts.back());
  if (split_partials_ && split_partials_->size_bytes() >= want) return;
  if (stream_.capturing()) return;  // the plain GEMM serves what does not fit
  stream_.synchronize();  // queued kernels may still use the old buffer
  split_partials_.reset();
  split_partials_ = std::make_unique<DeviceMemory>(want);
  ++graph_generation_;
}

void CudaBackend::head_rms_norm(Tensor x, std::int32_t head_dim, const Tensor& weight, float eps) {
  expect_dtype(x, DType::bf16, "head_rms_norm input");
  expect_dtype(weight, DType::f32, "head_rms_norm weight");
  if (head_dim < 1 || x.cols % head_dim != 0 || weight.rows * weight.cols != head_dim) {
    fail(ExitCode::failure, "internal: head_rms_norm width {} by head dim {}", x.cols, head_dim);
  }
  CUdeviceptr x_ptr = address(x), w_ptr = address(weight);
  long long stride = x.stride;
  int rows = int(x.rows), n_heads = int(x.cols / head_dim);
  float eps_v = eps;
  const CUfunction f = function(head_rms_norm_module(head_dim), "flare_head_rms_norm");
  launch(f, {.grid_x = blocks_for(x.rows * n_heads * 32, 256), .block_x = 256},
         {&x_ptr, &stride, &rows, &n_heads, &w_ptr, &eps_v}, "head_rms_norm");
}

void CudaBackend::linear(const Tensor& x, const Tensor& weight, const Tensor* bias, Tensor out) {
  expect_dtype(x, DType::bf16, "linear input");
  expect_dtype(weight, DType::bf16, "linear weight");
  if (out.dtype != DType::bf16 && out.dtype != DType::f32) expect_dtype(out, DType::bf16, "linear output");
  if (x.cols != weight.cols || out.cols != weight.rows || out.rows != x.rows) {
    fail(ExitCode::failure, "internal: linear shapes [{}, {}] x [{}, {}]^T -> [{}, {}]", x.rows, x.cols, weight.rows,
         weight.cols, out.rows, out.cols);
  }
  CUdeviceptr x_ptr = address(x), w_ptr = address(weight), b_ptr = 0, out_ptr = address(out);
  if (bias) {
    expect_dtype(*bias, DType::f32, "linear bias");
    if (bias->rows * bias->cols != weight.rows) fail(ExitCode::failure, "internal: linear bias width {}", bias->cols);
    b_ptr = address(*bias);
  }
  if (linear_cublaslt(x, weight, bias, out)) return;
  long long x_stride = x.stride, w_stride = weight.stride, out_stride = out.stride;
  int m = int(x.rows), n = int(weight.rows), k = int(weight.cols);
  const bool to_f32 = out.dtype == DType::f32;
  launch(function("linear", to_f32 ? "flare_linear_f32" : "flare_linear_bf16"),
         {.grid_x = blocks_for(n, 64), .grid_y = blocks_for(m, 64), .block_x = 256},
         {&x_ptr, &x_stride, &w_ptr, &w_stride, &b_ptr, &out_ptr, &out_stride, &m, &n, &k}, "linear");
}

void CudaBackend::rotary(Tensor q, Tensor k, std::int32_t head_dim, const RotaryParams& rope) {
  expect_dtype(q, DType::bf16, "rotary q");
  expect_dtype(k, DType::bf16, "rotary k");
  expect_dtype(rope.inv_freq, DType::f32, "rotary frequencies");
  const std::int64_t half = rope.inv_freq.cols;
  if (half < 1 || 2 * half > head_dim) fail(ExitCode::failure, "internal: rotary dim {} > head dim {}", 2 * half, head_dim);
  if (q.rows != step_.n_tokens() || k.rows != q.rows || q.cols % head_dim != 0 || k.cols % head_dim != 0) {
    fail(ExitCode::failure, "internal: rotary shapes [{}, {}] and [{}, {}]", q.rows, q.cols, k.rows, k.cols);
  }
  if (rope.inv_freq.rows != 1 && rope.inv_freq.rows != step_.n_rows()) {
    fail(ExitCode::failure, "internal: rotary frequencies for {} rows in a step of {}", rope.inv_freq.rows, step_.n_rows());
  }
  CUdeviceptr q_ptr = address(q), k_ptr = address(k), f_ptr = address(rope.inv_freq), p_ptr = arrays_.positions,
              r_ptr = arrays_.token_rows;
  long long q_stride = q.stride, k_stride = k.stride, f_stride = rope.inv_freq.stride;
  int n_q = int(q.cols / head_dim), n_k = int(k.cols / head_dim), f_rows = int(rope.inv_freq.rows);
  float factor = rope.attention_factor;
  const CUfunction f = function(rotary_module(head_dim, half), "flare_rotary");
  launch(f, {.grid_x = unsigned(q.rows), .block_x = 256},
         {&q_ptr, &q_stride, &n_q, &k_ptr, &k_stride, &n_k, &f_ptr, &f_stride, &f_rows, &factor, &p_ptr, &r_ptr},
         "rotary");
}

// kv_store and attention: cuda_attention.cpp.

void CudaBackend::swiglu(const Tensor& gate_up, Tensor out) { gated_activation(gate_up, out, "swiglu"); }

void CudaBackend::geglu(const Tensor& gate_up, Tensor out) { gated_activation(gate_up, out, "geglu"); }

void CudaBackend::gated_activation(const Tensor& gate_up, Tensor out, const std::string& op) {
  const std::string input = op + " input", output = op + " output", entry = "flare_" + op;
  expect_dtype(gate_up, DType::bf16, input.c_str());
  expect_dtype(out, DType::bf16, output.c_str());
  expect_shape(gate_up, out.rows, 2 * out.cols, input.c_str());
  CUdeviceptr gu_ptr = address(gate_up), out_ptr = address(out);
  long long gu_stride = gate_up.stride, out_stride = out.stride;
  int inter = int(out.cols);
  if (inter % 8 == 0 && gate_up.stride % 8 == 0 && out.stride % 8 == 0 && aligned_16(gate_up.data) &&
      aligned_16(out.data)) {
    // A thread per 16-byte chunk of out; blocks small enough that a decode step's few rows still
    // cover every SM (one row of 14336: 56 blocks of 32 on 132 SMs), up to 256 threads.
    long long n_chunks = out.rows * inter / 8;
    const std::int64_t n_sms = std::max(context_.device().n_multiprocessors, 1);
    const std::int64_t threads = std::clamp<std::int64_t>(((n_chunks + n_sms - 1) / n_sms + 31) / 32 * 32, 32, 256);
    launch(function("swiglu", entry + "_vec"), {.grid_x = blocks_for(n_chunks, threads), .block_x = unsigned(threads)},
           {&gu_ptr, &gu_stride, &out_ptr, &out_stride, &inter, &n_chunks}, op);
    return;
  }
  launch(function("swiglu", entry),
         {.grid_x = std::min(blocks_for(inter, 256), 64u), .grid_y = unsigned(out.rows), .block_x = 256},
         {&gu_ptr, &gu_stride, &out_ptr, &out_stride, &inter}, op);
}

void CudaBackend::linear_swiglu(const Tensor& x, const Tensor& weight, Tensor gate_up, Tensor out) {
  const GemmOperands op = gemm_operands(x, weight, gate_up);
  const bool fusable = gemm_ && x.rows > 0 && x.dtype == DType::bf16 &&
                       GemmRunner::swiglu_takes(op) && out.dtype == DType::bf16 && x.cols == weight.cols &&
                       gate_up.rows == x.rows && gate_up.cols == weight.rows && out.rows == x.rows &&
                       2 * out.cols == weight.rows;
  const int fused = fusable ? gemm_->run_swiglu(op, gemm_tuning_, address(out), out.stride,
                                                [&] { swiglu(gate_up, out); })
                            : -1;
  if (fused < 0) {
    Backend::linear_swiglu(x, weight, gate_up, out);
  } else if (fused == 0) {
    swiglu(gate_up, out);
  }
}

void CudaBackend::gather_logit_rows(const Tensor& x, Tensor out) {
  expect_dtype(x, DType::bf16, "gather input");
  expect_dtype(out, DType::bf16, "gather output");
  expect_shape(out, n_logit_rows_, x.cols, "gather output");
  if (x.rows != step_.n_tokens()) fail(ExitCode::failure, "internal: gather from {} rows, step has {}", x.rows, step_.n_tokens());
  CUdeviceptr x_ptr = address(x), rows_ptr = arrays_.logit_tokens, out_ptr = address(out);
  long long x_stride = x.stride, out_stride = out.stride;
  int cols = int(x.cols);
  launch(function("gather_rows", "flare_gather_rows"), {.grid_x = unsigned(out.rows), .block_x = 256},
         {&x_ptr, &x_stride, &rows_ptr, &out_ptr, &out_stride, &cols}, "gather_rows");
}

void CudaBackend::soft_cap(Tensor x, float cap) {
  expect_dtype(x, DType::f32, "soft_cap input");
  if (!(cap > 0.0f)) fail(ExitCode::failure, "internal: soft cap {}", cap);
  scale_rows(x, cap, "flare_soft_cap_f32");
}

void CudaBackend::scale(Tensor x, float factor) {
  if (x.dtype != DType::bf16 && x.dtype != DType::f32) expect_dtype(x, DType::bf16, "scale input");
  scale_rows(x, factor, x.dtype == DType::bf16 ? "flare_scale_bf16" : "flare_scale_f32");
}

void CudaBackend::scale_rows(Tensor x, float value, const char* entry) {
  const CUfunction f = function("scale", entry);
  constexpr std::int64_t k_max_grid_rows = 65535;  // gridDim.y
  for (std::int64_t first = 0; first < x.rows; first += k_max_grid_rows) {
    const Tensor rows = x.slice_rows(first, std::min(k_max_grid_rows, x.rows - first));
    CUdeviceptr x_ptr = address(rows);
    long long stride = rows.stride;
    int cols = int(rows.cols);
    float value_arg = value;
    launch(f, {.grid_x = std::min(blocks_for(cols, 256), 64u), .grid_y = unsigned(rows.rows), .block_x = 256},
           {&x_ptr, &stride, &cols, &value_arg}, entry);
  }
}

}  // namespace flare::helios::cuda
