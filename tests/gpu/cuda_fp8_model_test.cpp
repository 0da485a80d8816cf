// Whole models with FP8 weights on the CUDA backend. A tiny fixture's prepared weights have their
// projection matrices quantized to E4M3 with one scale per row (a package's FP8 layout:
// <name>, <name>.scales, <name>.scale_block); weights_from_prepared keeps them FP8 on the GPU and
// dequantizes them to BF16 on the CPU, so both backends run the same weight values. Compared:
// - a prefill (16 tokens: cuBLASLt's FP8 GEMM, activations quantized per row) to the CPU within
//   what FP8 activations cost;
// - decode steps (one token: whichever of the FP8 skinny kernel, BF16 activations, and cuBLASLt
//   won the race for these tiny shapes) to the CPU's logits, and their top-1 token.
// H200 figures over two runs: prefill 4.7-8.3e-2, decode 2.4-5.1e-2 of the largest logit, 11-12 of 12
// top-1 tokens agree.
#ifdef FLARE_HAVE_CUDA

#include <cstring>
#include <map>

#include <gtest/gtest.h>

#include "gpu_support.h"
#include "helios/cpu/cpu_backend.h"
#include "helios/page_pool.h"
#include "model/model.h"
#include "model/prepared_weights.h"
#include "model/spec.h"

namespace flare::model {
namespace {

using namespace helios::gpu_testing;
using helios::DType;

bool is_projection(const PreparedTensor& t) {
  const auto ends_with = [&](std::string_view suffix) {
    return t.name.size() > suffix.size() && t.name.compare(t.name.size() - suffix.size(), suffix.size(), suffix) == 0;
  };
  return t.dtype == DType::bf16 && t.shape.size() == 2 &&
         (ends_with(".qkv") || ends_with(".o") || ends_with(".gate_up") || ends_with(".down"));
}

template <typename T>
std::vector<std::byte> bytes_of(const std::vector<T>& v) {
  std::vector<std::byte> out(v.size() * sizeof(T));
  std::memcpy(out.data(), v.data(), out.size());
  return out;
}

// The fixture's prepared tensors by name, projections as FP8 with per-row scales.
std::map<std::string, PreparedTensor> fp8_prepared(const ModelSpec& spec, const fs::path& dir) {
  std::map<std::string, PreparedTensor> tensors;
  prepare_weights(spec, dir, [&](PreparedGroup&& group) {
    for (PreparedTensor& t : group.tensors) {
      if (!is_projection(t)) {
        tensors[t.name] = std::move(t);
        continue;
      }
      const std::int64_t rows = t.shape[0], cols = t.shape[1];
      std::vector<std::uint16_t> bf16(std::size_t(rows * cols));
      std::memcpy(bf16.data(), t.bytes.data(), t.bytes.size());
      std::vector<std::uint8_t> values(bf16.size());
      std::vector<float> scales(static_cast<std::size_t>(rows));
      for (std::int64_t r = 0; r < rows; ++r) {
        float amax = 0.0f;
        for (std::int64_t c = 0; c < cols; ++c) amax = std::max(amax, std::fabs(helios::bf16_to_f32(bf16[std::size_t(r * cols + c)])));
        const float scale = amax > 0.0f ? amax / 448.0f : 1.0f;
        scales[std::size_t(r)] = scale;
        for (std::int64_t c = 0; c < cols; ++c) {
          values[std::size_t(r * cols + c)] = helios::f32_to_f8_e4m3(helios::bf16_to_f32(bf16[std::size_t(r * cols + c)]) / scale);
        }
      }
      tensors[t.name + ".scales"] = {t.name + ".scales", DType::f32, {rows, 1}, bytes_of(scales)};
      tensors[t.name + ".scale_block"] = {t.name + ".scale_block", DType::i32, {2},
                                          bytes_of(std::vector<std::int32_t>{1, std::int32_t(cols)})};
      tensors[t.name] = {t.name, DType::f8_e4m3, {rows, cols}, bytes_of(values)};
    }
  });
  return tensors;
}

// A model on a backend from prepared tensors, with its KV cache and pages; logits to the host.
struct Fp8Runner {
  std::unique_ptr<Model> model;
  helios::HistoryCaches cache;
  std::unique_ptr<helios::PagePool> pool;
  std::unique_ptr<helios::SequencePages> seq;
  DType qkv_dtype = DType::bf16;  // what the loader made of the first layer's qkv

  Fp8Runner(const ModelSpec& spec, const std::map<std::string, PreparedTensor>& tensors, helios::Backend& backend) {
    const PreparedLookup lookup = [&](const std::string& name, PreparedTensorRef& out) {
      const auto it = tensors.find(name);
      if (it == tensors.end()) return false;
      out = {it->second.dtype, it->second.shape, it->second.bytes};
      return true;
    };
    LoadedWeights weights = weights_from_prepared(spec, lookup, backend);
    qkv_dtype = weights.at("layers.0.qkv").values.dtype;
    model = std::make_unique<Model>(spec, backend, std::move(weights));
    cache = helios::history_allocate(backend, model->kv_cache_layout(64, 4, DType::bf16));
    pool = std::make_unique<helios::PagePool>(64);
    seq = std::make_unique<helios::SequencePages>(*pool, 4);
  }

  std::vector<float> step(const std::vector<std::int32_t>& tokens, bool all_logits) {
    helios::Step step;
    std::vector<helios::PageCopy> copies;
    helios::StepRow row;
    row.start_position = seq->n_tokens();
    row.n_tokens = std::int32_t(tokens.size());
    row.n_logits = all_logits ? row.n_tokens : 1;
    if (!seq->append(row.n_tokens, copies)) throw std::runtime_error("page pool exhausted");
    row.first_block = 0;
    row.n_blocks = std::int32_t(seq->pages().size());
    step.block_tables = seq->pages();
    step.tokens = tokens;
    step.rows.push_back(row);
    return model->forward(step, cache);
  }
};

// max |a - b| / max |b|
double max_relative_error(const std::vector<float>& a, const std::vector<float>& b) {
  double diff = a.size() == b.size() ? 0.0 : INFINITY, scale = 0.0;
  for (std::size_t i = 0; i < a.size() && i < b.size(); ++i) {
    diff = std::max(diff, std::fabs(double(a[i]) - b[i]));
    scale = std::max(scale, std::fabs(double(b[i])));
  }
  return scale > 0 ? diff / scale : diff;
}

std::int32_t argmax(const std::vector<float>& v) { return std::int32_t(std::max_element(v.begin(), v.end()) - v.begin()); }

class CudaFp8Model : public testing::TestWithParam<std::string> {};

TEST_P(CudaFp8Model, MatchesTheCpuOnTheSameWeights) {
  std::string reason;
  auto gpu = try_cuda_backend(&reason);
  if (!gpu) GTEST_SKIP() << "no CUDA backend: " << reason;
  const fs::path dir = test_data_dir() / "models" / GetParam();
  const ModelSpec spec = model_spec_load(dir);
  const std::int64_t h = spec.hidden_size;
  if (!gpu->supports_fp8_weights(spec.q_width() + 2 * spec.kv_width(), h, 1, std::int32_t(h))) {
    GTEST_SKIP() << "no FP8 GEMM for per-row scales on this GPU";
  }
  const std::map<std::string, PreparedTensor> tensors = fp8_prepared(spec, dir);
  helios::cpu::CpuBackend cpu;
  Fp8Runner on_gpu(spec, tensors, *gpu), on_cpu(spec, tensors, cpu);
  ASSERT_EQ(on_gpu.qkv_dtype, DType::f8_e4m3) << "the GPU keeps FP8 weights";
  ASSERT_EQ(on_cpu.qkv_dtype, DType::bf16) << "the CPU gets them dequantized";

  std::vector<std::int32_t> prompt;
  for (std::int32_t i = 0; i < 16; ++i) prompt.push_back((i * 37 + 11) % spec.vocab_size);
  const std::vector<float> gpu_prefill = on_gpu.step(prompt, true), cpu_prefill = on_cpu.step(prompt, true);
  const double prefill_error = max_relative_error(gpu_prefill, cpu_prefill);
  std::printf("[ fp8 model] %s: prefill of 16 (FP8 activations) max relative error %.3e\n", GetParam().c_str(),
              prefill_error);
  EXPECT_LT(prefill_error, 0.15) << "per-row FP8 activations cost a few percent per projection";

  // Decode from the CPU's greedy path, so both score the same tokens.
  std::int32_t token = argmax(std::vector<float>(cpu_prefill.end() - spec.vocab_size, cpu_prefill.end()));
  double decode_error = 0.0;
  int agree = 0;
  const int n_steps = 12;
  for (int i = 0; i < n_steps; ++i) {
    const std::vector<float> g = on_gpu.step({token}, false), c = on_cpu.step({token}, false);
    decode_error = std::max(decode_error, max_relative_error(g, c));
    agree += argmax(g) == argmax(c);
    token = argmax(c);
  }
  std::printf("[ fp8 model] %s: %d decode steps max relative error %.3e, %d/%d top-1 agree\n",
              GetParam().c_str(), n_steps, decode_error, agree, n_steps);
  EXPECT_LT(decode_error, 0.1);
  EXPECT_GE(agree, n_steps - 1);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, CudaFp8Model,
                         testing::Values("qwen2-gqa2-hd64-bias", "llama-gqa2-hd64-untied-sharded",
                                         "qwen3-gqa2-hd128-tied"),
                         [](const testing::TestParamInfo<std::string>& info) {
                           std::string name;
                           for (const char c : info.param) name += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
                           return name;
                         });

}  // namespace
}  // namespace flare::model

#endif  // FLARE_HAVE_CUDA
