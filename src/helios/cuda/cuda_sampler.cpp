// CudaBackend::sample: one kernel (kernels/sample.cu) samples every logits row where the logits
// are. Per call: one upload (per-row parameters, then the histories the penalties need and the
// logit biases), one launch (a cluster of 8 CTAs per row on sm_90+, one CTA elsewhere), one
// download of the small results (token, logprob, top logprobs); the logits never leave the device.
// Each CTA holds its slice of the row in shared memory when it fits (on an H200, vocabularies up
// to about 440k), else reads it from global memory.
//
// For tests, CudaBackendOptions::sampler_one_cta samples with one CTA per row where clusters
// exist, and sampler_global_slices keeps the slices in global memory.
//
// Rows the kernel does not handle are sampled on the host (the Backend default, which downloads
// only those rows): more than k_device_max_top_logprobs top logprobs, or a logit bias of +inf
// (the host then walks NaN probabilities, which the kernel does not imitate).
#include "helios/cuda/cuda_sampler.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>

#include "common/error.h"
#include "helios/cuda/cuda_backend.h"

namespace flare::helios::cuda {
namespace {

constexpr int k_device_max_top_logprobs = 20;  // FLARE_SAMPLE_MAX_TOP in sample.cu
constexpr unsigned k_sample_block = 512;       // FLARE_BLOCK's default in sample.cu
constexpr int k_sample_static_smem = 16 * 1024;  // above the kernel's FlareShared, with room to spare

// The kernel's FlareSampleRow.
struct SampleRowParams {
  float temperature;
  std::int32_t top_k;
  float top_p;
  float min_p;
  float presence_penalty;
  float frequency_penalty;
  float repetition_penalty;
  std::int32_t n_top_logprobs;
  std::uint64_t seed;
  std::uint64_t output_index;
  std::int32_t prompt_offset, n_prompt;
  std::int32_t output_offset, n_output;
  std::int32_t bias_offset, n_bias;
  std::int32_t skip;
  std::int32_t pad;
};
static_assert(sizeof(SampleRowParams) == 80);

// The kernel's FlareSampleResult.
struct SampleRowResult {
  std::int32_t token;
  float logprob;
  std::int32_t n_top;
  std::int32_t pad;
  std::int32_t top_ids[k_device_max_top_logprobs];
  float top_logprobs[k_device_max_top_logprobs];
};
static_assert(sizeof(SampleRowResult) == 176);

bool device_can_sample(const SamplingParams& p) {
  if (p.n_top_logprobs > k_device_max_top_logprobs) return false;
  return std::none_of(p.logit_bias.begin(), p.logit_bias.end(),
                      [](const auto& bias) { return bias.second == std::numeric_limits<float>::infinity(); });
}

// Appends the row's histories and biases to `tokens` and fills their offsets in `row`.
void pack_row(const SampleRequest& request, SampleRowParams& row, std::vector<std::int32_t>& tokens) {
  const SamplingParams& p = *request.params;
  const bool repetition = p.repetition_penalty != 1.0f;
  const bool counted = p.presence_penalty != 0.0f || p.frequency_penalty != 0.0f;
  auto append = [&](std::span<const std::int32_t> ids, std::int32_t& offset, std::int32_t& n) {
    offset = std::int32_t(tokens.size());
    n = std::int32_t(ids.size());
    tokens.insert(tokens.end(), ids.begin(), ids.end());
  };
  append(repetition ? request.history.prompt : std::span<const std::int32_t>{}, row.prompt_offset, row.n_prompt);
  append(repetition || counted ? request.history.output : std::span<const std::int32_t>{}, row.output_offset,
         row.n_output);
  // Stably by id: the kernel adds each id's biases in request order with one thread.
  std::vector<std::pair<std::int32_t, float>> bias = p.logit_bias;
  std::stable_sort(bias.begin(), bias.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  row.bias_offset = std::int32_t(tokens.size());
  row.n_bias = std::int32_t(bias.size());
  for (const auto& [id, value] : bias) {
    std::int32_t bits;
    std::memcpy(&bits, &value, sizeof bits);
    tokens.push_back(id);
    tokens.push_back(bits);
  }
}

SampleRowParams row_params(const SampleRequest& request, std::vector<std::int32_t>& tokens) {
  const SamplingParams& p = *request.params;
  SampleRowParams row{};
  row.temperature = p.temperature;
  row.top_k = p.top_k;
  row.top_p = p.top_p;
  row.min_p = p.min_p;
  row.presence_penalty = p.presence_penalty;
  row.frequency_penalty = p.frequency_penalty;
  row.repetition_penalty = p.repetition_penalty;
  row.n_top_logprobs = p.n_top_logprobs;
  row.seed = p.seed;
  row.output_index = request.output_index;
  row.skip = device_can_sample(p) ? 0 : 1;
  if (!row.skip) pack_row(request, row, tokens);
  return row;
}

}  // namespace

// CTAs a row: a cluster of 8 where the device has clusters (sm_90+) and options.sampler_one_cta is
// off, one CTA elsewhere (the count is the module's FLARE_CLUSTER define, so it picks the module).
// Each CTA holds its slice (a multiple of 4 ids, for 16-byte copies) in shared memory when it fits
// and options.sampler_global_slices is off.
SamplerLayout sampler_layout(const DeviceInfo& device, std::int32_t vocab, const CudaBackendOptions& options) {
  SamplerLayout layout;
  layout.ctas = device.compute_major >= 9 && !options.sampler_one_cta ? 8 : 1;
  const std::int64_t per_cta = (std::int64_t(vocab) + layout.ctas - 1) / layout.ctas;
  layout.slice = std::int32_t((per_cta + 3) / 4 * 4);
  layout.in_shared = std::int64_t(layout.slice) * 4 <= device.max_shared_bytes_per_block - k_sample_static_smem &&
                     !options.sampler_global_slices;
  return layout;
}

std::vector<std::pair<std::string, std::string>> sampler_defines(const SamplerLayout& layout) {
  return {{"FLARE_CLUSTER", std::to_string(layout.ctas)}};
}

bool sampler_reserve(std::unique_ptr<DeviceMemory>& memory, std::size_t size_bytes) {
  if (memory && memory->size_bytes() >= size_bytes) return false;
  memory.reset();  // cuMemFree waits for work that may still read it
  memory = std::make_unique<DeviceMemory>(std::max<std::size_t>(size_bytes, 4096));
  return true;
}

// Everything sample() sizes by the batch, at its largest: per cell (row x vocabulary entry) 4
// bytes (marks int32), plus 4 (processed logits f32) where the kernel's slices stay in global
// memory; 39 or 78 MB at 64 rows of Qwen's 152k vocabulary. Only the per-row parameters, histories
// and biases grow later (a few KB). The memory plan must count it beside the logits [max rows,
// vocab] f32 themselves (ignition's scratch estimate counts only those); flare run reserves it
// before it measures the free memory it sizes the KV pool from, so the pool leaves room for it.
void CudaBackend::reserve_sampling(std::int32_t max_rows, std::int32_t vocab_size) {
  if (max_rows < 1 || vocab_size < 1) return;
  if (!sampler_) sampler_ = std::make_unique<SamplerScratch>();
  SamplerScratch& scratch = *sampler_;
  const std::size_t n_rows = std::size_t(max_rows), cells = n_rows * std::size_t(vocab_size);
  sampler_reserve(scratch.device_out, n_rows * sizeof(SampleRowResult));
  if (!sampler_layout(context_.device(), vocab_size, options_).in_shared) {
    sampler_reserve(scratch.processed, cells * sizeof(float));
  }
  if (sampler_reserve(scratch.marks, cells * sizeof(std::int32_t))) {
    check(driver().memset_d8_async(scratch.marks->address(), 0, scratch.marks->size_bytes(), stream_.handle()),
          "cuMemsetD8Async");
  }
}

std::vector<SampledToken> CudaBackend::sample(const Tensor& logits, std::span<const SampleRequest> requests) {
  if (logits.dtype != DType::f32 || std::int64_t(requests.size()) != logits.rows) {
    fail(ExitCode::failure, "internal: sampling {} requests from {} {} logits rows", requests.size(), logits.rows,
         dtype_name(logits.dtype));
  }
  if (requests.empty()) return {};
  if (logits.cols < 1 || logits.cols > std::numeric_limits<std::int32_t>::max()) {
    fail(ExitCode::failure, "internal: sampling from a vocabulary of {}", logits.cols);
  }
  const auto vocab = std::int32_t(logits.cols);
  const std::size_t n_rows = requests.size();
  if (!sampler_) sampler_ = std::make_unique<SamplerScratch>();
  SamplerScratch& scratch = *sampler_;

  std::vector<SampleRowParams> rows;
  rows.reserve(n_rows);
  std::vector<std::int32_t> tokens;
  bool any_penalized = false, any_device = false;
  for (const SampleRequest& request : requests) {
    sampling_params_validate(*request.params, vocab);  // the host's errors, before anything runs
    const SampleRowParams& row = rows.emplace_back(row_params(request, tokens));
    any_device |= row.skip == 0;
    any_penalized |= row.skip == 0 && (row.n_bias > 0 || row.repetition_penalty != 1.0f ||
                                       row.presence_penalty != 0.0f || row.frequency_penalty != 0.0f);
  }
  if (tokens.size() > std::size_t(std::numeric_limits<std::int32_t>::max())) {
    fail_input("sampling histories of {} tokens exceed the device sampler's 2^31", tokens.size());
  }

  std::vector<SampleRowResult> results(n_rows);
  if (any_device) {
    const std::size_t params_bytes = n_rows * sizeof(SampleRowParams);
    scratch.host_in.resize(params_bytes + std::max<std::size_t>(tokens.size(), 1) * sizeof(std::int32_t));
    std::memcpy(scratch.host_in.data(), rows.data(), params_bytes);
    std::memcpy(scratch.host_in.data() + params_bytes, tokens.data(), tokens.size() * sizeof(std::int32_t));
    sampler_reserve(scratch.device_in, scratch.host_in.size());
    sampler_reserve(scratch.device_out, n_rows * sizeof(SampleRowResult));
    const std::size_t cells = n_rows * std::size_t(vocab);
    const SamplerLayout layout = sampler_layout(context_.device(), vocab, options_);
    // Penalties rewrite a shared slice in place; only slices in global memory need the scratch row.
    const bool needs_processed = any_penalized && !layout.in_shared;
    if (needs_processed) sampler_reserve(scratch.processed, cells * sizeof(float));
    if (any_penalized) {
      if (sampler_reserve(scratch.marks, cells * sizeof(std::int32_t))) {
        check(driver().memset_d8_async(scratch.marks->address(), 0, scratch.marks->size_bytes(), stream_.handle()),
              "cuMemsetD8Async");
      }
    }
    copy_to_device(scratch.device_in->address(), scratch.host_in.data(), scratch.host_in.size(), stream_);

    CUdeviceptr logits_ptr = reinterpret_cast<CUdeviceptr>(logits.data), rows_ptr = scratch.device_in->address();
    CUdeviceptr tokens_ptr = rows_ptr + params_bytes, out_ptr = scratch.device_out->address();
    CUdeviceptr processed_ptr = needs_processed ? scratch.processed->address() : 0;
    CUdeviceptr marks_ptr = any_penalized ? scratch.marks->address() : 0;
    long long logits_stride = logits.stride, processed_stride = vocab;
    int vocab_i = vocab, slice = layout.slice, in_shared = layout.in_shared ? 1 : 0;
    const unsigned smem = layout.in_shared ? unsigned(layout.slice) * 4u : 0u;
    const CUfunction f = function(sampler_module(context_.device(), vocab, options_), "flare_sample");
    if (smem > 0 && sampler_smem_set_.insert(f).second) {  // once per function: the most any layout takes
      const int most = context_.device().max_shared_bytes_per_block - k_sample_static_smem;
      check(driver().func_set_attribute(f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, most),
            "cuFuncSetAttribute (sampler shared memory)");
    }
    launch(f,
           {.grid_x = unsigned(n_rows) * unsigned(layout.ctas), .block_x = k_sample_block, .shared_bytes = smem},
           {&logits_ptr, &logits_stride, &vocab_i, &slice, &in_shared, &rows_ptr, &tokens_ptr, &processed_ptr,
            &processed_stride, &marks_ptr, &out_ptr},
           "sample");
    copy_to_host(results.data(), out_ptr, n_rows * sizeof(SampleRowResult), stream_);
    stream_.synchronize();
  }

  std::vector<SampledToken> out(n_rows);
  for (std::size_t r = 0; r < n_rows; ++r) {
    if (rows[r].skip) {
      out[r] = std::move(Backend::sample(logits.slice_rows(std::int64_t(r), 1), requests.subspan(r, 1)).front());
      continue;
    }
    const SampleRowResult& result = results[r];
    if (result.token < 0 || result.token >= vocab || result.n_top != std::min(rows[r].n_top_logprobs, vocab)) {
      fail(ExitCode::failure, "internal: the device sampler returned token {} with {} top logprobs for row {}",
           result.token, result.n_top, r);
    }
    out[r].token = result.token;
    out[r].logprob = result.logprob;
    for (std::int32_t i = 0; i < result.n_top; ++i) out[r].top_logprobs.emplace_back(result.top_ids[i], result.top_logprobs[i]);
  }
  return out;
}

}  // namespace flare::helios::cuda
