// The CUDA attention kernels against the CPU backend (the reference) on fresh random pages and
// queries: split-KV decode (pure decode steps; verify steps of up to 8 tokens a row, the row's tokens
// folded into the decode kernel's columns) and the tensor-core prefill kernel (other mixed steps),
// GQA 32/8, 16/8, 4/4 and wider groups, head sizes 64, 128 and 256 (Gemma 3: GQA 2:1, 4:1 and 8:1),
// sliding windows, BF16 and FP8 E4M3 pages. Both backends read the same page bytes; every byte
// neither may read (pages outside the tables, slots past a row's length or before its window, the
// other layer) holds NaN, and outputs and their row padding are poisoned, so stray reads and
// unwritten outputs show. FP8 KV stores are compared bit for bit with the CPU's. Attention sinks
// (gpt-oss) on every path. Also prints decode and prefill timings (informational). Skips without a
// GPU or NVRTC.
#ifdef FLARE_HAVE_CUDA

#include <algorithm>
#include <cstring>
#include <functional>
#include <numeric>
#include <random>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "gpu_support.h"
#include "helios/cpu/cpu_backend.h"

namespace flare::helios {
namespace {

using namespace gpu_testing;

struct Heads {
  int n_heads, n_kv_heads, head_dim;
};

// A step's rows as (n_tokens, start_position).
using Rows = std::vector<std::pair<int, int>>;

constexpr std::uint16_t k_nan_bf16 = 0x7fc1;
constexpr std::uint8_t k_nan_e4m3 = 0x7f;
constexpr std::int32_t k_layer = 1;  // the layer attended; layer 0 is all NaN

class CudaAttention : public BackendVersusCpuTest {
 protected:

  // A step over pages drawn from a shuffled pool; `n_pages` is set to the pages used plus spares.
  Step make_step(const Rows& rows, std::int32_t page_size, std::int32_t* n_pages) {
    std::int32_t used = 0;
    for (const auto& [n_tokens, start] : rows) used += (start + n_tokens + page_size - 1) / page_size;
    *n_pages = used + 5;
    std::vector<std::int32_t> pages(static_cast<std::size_t>(*n_pages));
    std::iota(pages.begin(), pages.end(), 0);
    std::shuffle(pages.begin(), pages.end(), rng_);
    Step step;
    std::size_t next_page = 0;
    for (const auto& [n_tokens, start] : rows) {
      StepRow row;
      row.n_tokens = n_tokens;
      row.start_position = start;
      row.n_logits = 1;
      row.first_block = std::int32_t(step.block_tables.size());
      row.n_blocks = (start + n_tokens + page_size - 1) / page_size;
      for (std::int32_t b = 0; b < row.n_blocks; ++b) step.block_tables.push_back(pages.at(next_page++));
      for (int i = 0; i < n_tokens; ++i) step.tokens.push_back(1);
      step.rows.push_back(row);
    }
    return step;
  }

  // Page bytes of `layout`: NaN everywhere except, in layer k_layer, the slots some row may read
  // ([first position its window lets any of its tokens see, its length)), which get random values.
  std::vector<std::uint8_t> make_pages(const KvCacheLayout& l, const Step& step, int window) {
    const std::size_t element = dtype_size_bytes(l.dtype);
    std::vector<std::uint8_t> bytes(l.size_bytes());
    for (std::size_t i = 0; i < bytes.size(); i += element) {
      if (element == 2) {
        std::memcpy(&bytes[i], &k_nan_bf16, 2);
      } else {
        bytes[i] = k_nan_e4m3;
      }
    }
    std::uniform_int_distribution<std::uint32_t> bits;
    std::normal_distribution<float> normal(0.0f, 1.0f);
    const std::size_t slot_elems = std::size_t(l.n_kv_heads) * std::size_t(l.head_dim);
    const std::size_t half_bytes = std::size_t(l.page_size_tokens) * slot_elems * element;
    for (const StepRow& row : step.rows) {
      const int length = row.start_position + row.n_tokens;
      const int first = window > 0 ? std::max(0, row.start_position - window + 1) : 0;
      for (int position = first; position < length; ++position) {
        const std::int32_t page = step.block_tables[std::size_t(row.first_block + position / l.page_size_tokens)];
        const std::size_t slot_offset =
            (std::size_t(k_layer) * std::size_t(l.n_pages) + std::size_t(page)) * l.page_bytes() +
            std::size_t(position % l.page_size_tokens) * slot_elems * element;
        for (std::size_t half = 0; half < 2; ++half) {
          std::uint8_t* p = &bytes[slot_offset + half * half_bytes];
          for (std::size_t i = 0; i < slot_elems; ++i) {
            if (element == 2) {
              const std::uint16_t v = f32_to_bf16(normal(rng_));
              std::memcpy(p + 2 * i, &v, 2);
            } else {
              p[i] = std::uint8_t(bits(rng_) & 0xbfu);  // exponent field <= 7: |x| < 2, never NaN
            }
          }
        }
      }
    }
    return bytes;
  }

  // One attention call on both backends over the same pages; compares the outputs. q's rows are
  // q_pad elements longer than its width on the GPU (8 keeps them 16-byte aligned).
  // With `sinks`, each head gets a random attention sink (gpt-oss), a few far above its scores.
  void check(const std::string& what, const Heads& h, DType kv_dtype, const Rows& rows, int window, int page_size,
             float q_scale, float atol, float rtol, int q_pad = 8, bool sinks = false) {
    std::int32_t n_pages = 0;
    const Step step = make_step(rows, page_size, &n_pages);
    const KvCacheLayout layout{2, n_pages, page_size, h.n_kv_heads, h.head_dim, kv_dtype};
    const std::vector<std::uint8_t> pages = make_pages(layout, step, window);
    KvCache cpu_kv = cpu_.allocate_kv_cache(layout), gpu_kv = gpu_->allocate_kv_cache(layout);
    std::memcpy(cpu_kv.storage->data(), pages.data(), pages.size());
    gpu_->upload(*gpu_kv.storage, 0, pages.data(), pages.size());

    const std::int64_t n = step.n_tokens(), width = std::int64_t(h.n_heads) * h.head_dim;
    const auto q = random_bf16(std::size_t(n * width), q_scale);
    Matrix cq = host_f32(cpu_, q, n, width), cout = host_f32(cpu_, {}, n, width);
    Matrix gq = device_bf16(*gpu_, q, n, width, width + q_pad), gout = device_bf16(*gpu_, {}, n, width, width + 6);
    AttentionParams cp{k_layer, h.n_heads, h.n_kv_heads, h.head_dim, 1.0f / std::sqrt(float(h.head_dim)), window};
    AttentionParams gp = cp;
    Matrix c_sinks, g_sinks;
    if (sinks) {
      std::vector<float> values = random_f32(std::size_t(h.n_heads), -3.0f, 3.0f);
      values[0] = 9.0f;  // a sink that outweighs every key
      values[values.size() - 1] = -30.0f;  // and one that counts for nothing
      c_sinks = host_f32_values(values, 1, h.n_heads);
      g_sinks = device_f32(*gpu_, values, 1, h.n_heads);
      cp.sinks = c_sinks.t;
      gp.sinks = g_sinks.t;
    }
    cpu_.begin_step(step, cpu_kv);
    gpu_->begin_step(step, gpu_kv);
    cpu_.attention(cpu_kv, cq.t, cp, cout.t);
    gpu_->attention(gpu_kv, gq.t, gp, gout.t);
    const std::string label = fmt::format("{} {}/{}x{} {} w={} pg={} rows={}{}{}", what, h.n_heads, h.n_kv_heads,
                                          h.head_dim, dtype_name(kv_dtype), window, page_size, rows.size(),
                                          q_pad % 8 != 0 ? " q unaligned" : "", sinks ? " sinks" : "");
    expect_close(label, device_values(*gpu_, gout), host_values(cout), atol, rtol);
  }

};

// Decode rows (one token each) whose lengths cycle through the edge cases around a page of 16.
Rows decode_rows(int n_rows, std::mt19937& rng) {
  static const int lengths[] = {1, 15, 16, 17, 1000, 5000, 0};
  std::uniform_int_distribution<int> any(1, 3000);
  Rows rows;
  for (int r = 0; r < n_rows; ++r) {
    const int length = lengths[r % 7] > 0 ? lengths[r % 7] : any(rng);
    rows.emplace_back(1, length - 1);
  }
  return rows;
}

TEST_F(CudaAttention, DecodeMatchesTheCpu) {
  for (const DType kv : {DType::bf16, DType::f8_e4m3}) {
    for (const Heads h : {Heads{32, 8, 128}, Heads{16, 8, 64}, Heads{4, 4, 128}, Heads{32, 8, 64}, Heads{16, 8, 128},
                          Heads{4, 4, 64}}) {
      for (const int n_rows : {1, 2, 7, 20, 33}) {  // 7 and 20: CTAs taking several split items
        check("decode", h, kv, decode_rows(n_rows, rng_), 0, 16, 1.0f, 4e-3f, 1e-2f);
      }
    }
    // Sliding windows (shorter and longer than rows), sharper softmax, other page sizes, GQA groups
    // of 7 (one CTA per group) and 16 (two CTAs of 8 heads per group).
    check("decode", Heads{32, 8, 128}, kv, decode_rows(15, rng_), 100, 16, 1.0f, 4e-3f, 1e-2f);
    check("decode", Heads{16, 8, 64}, kv, decode_rows(9, rng_), 4096, 16, 1.0f, 4e-3f, 1e-2f);
    check("decode", Heads{32, 8, 128}, kv, decode_rows(8, rng_), 0, 16, 4.0f, 4e-3f, 1e-2f);
    check("decode", Heads{32, 8, 128}, kv, decode_rows(8, rng_), 17, 7, 1.0f, 4e-3f, 1e-2f);
    check("decode", Heads{28, 4, 128}, kv, decode_rows(7, rng_), 0, 16, 1.0f, 4e-3f, 1e-2f);
    check("decode", Heads{64, 4, 128}, kv, decode_rows(7, rng_), 0, 32, 1.0f, 4e-3f, 1e-2f);
    // Batches of more items (row, head group, split) than resident CTAs, so that each CTA works
    // through several, mixing live, dead and one-split items; with and without a window.
    check("decode", Heads{32, 8, 128}, kv, decode_rows(150, rng_), 0, 16, 1.0f, 4e-3f, 1e-2f);
    check("decode", Heads{16, 8, 64}, kv, decode_rows(150, rng_), 0, 16, 1.0f, 4e-3f, 1e-2f);
    check("decode", Heads{32, 8, 128}, kv, decode_rows(150, rng_), 300, 16, 1.0f, 4e-3f, 1e-2f);
    // More items than the resident CTAs' item tables hold (128 each; four CTAs an SM at head dim 64:
    // 67,584 on an H200's 132 SMs), so the grid grows past the resident CTAs.
    Rows many;
    for (int r = 0; r < 4400; ++r) many.emplace_back(1, r % 16);
    check("decode", Heads{16, 16, 64}, kv, many, 0, 16, 1.0f, 4e-3f, 1e-2f);
  }
}

// Verify rows (a pending token and up to 7 drafts: 1..8 tokens) whose new tokens start and end around
// page boundaries of 16, beside decode rows, long contexts split many ways and short ones.
Rows verify_rows(int n_rows, int max_tokens, std::mt19937& rng) {
  static const int starts[] = {0, 14, 15, 16, 17, 1000, 4990, -1};
  std::uniform_int_distribution<int> any_start(1, 3000), any_tokens(1, max_tokens);
  Rows rows;
  for (int r = 0; r < n_rows; ++r) {
    const int start = starts[r % 8] >= 0 ? starts[r % 8] : any_start(rng);
    const int n_tokens = r == 0 ? max_tokens : any_tokens(rng);  // one row of the widest, so QTOK is max_tokens's
    rows.emplace_back(n_tokens, start);
  }
  return rows;
}

TEST_F(CudaAttention, VerifyMatchesTheCpu) {
  for (const DType kv : {DType::bf16, DType::f8_e4m3}) {
    // GQA 4:1 (Llama-3.1-8B: 2 heads x 8 tokens an item at 1 + 7), 2:1, 1:1, 8:1 and 7:1 (an odd group).
    for (const Heads h : {Heads{32, 8, 128}, Heads{16, 8, 64}, Heads{4, 4, 128}, Heads{64, 8, 128}, Heads{28, 4, 64}}) {
      for (const int max_tokens : {2, 3, 4, 5, 8}) {
        for (const int n_rows : {1, 2, 9, 33}) {
          check("verify", h, kv, verify_rows(n_rows, max_tokens, rng_), 0, 16, 1.0f, 4e-3f, 1e-2f);
        }
      }
      // Windows shorter than a row's new tokens (5), than its context (100) and longer (4096); a
      // sharper softmax; pages of 7 (blocks straddle pages); many rows (CTAs take several items).
      for (const int window : {5, 100, 4096}) {
        check("verify", h, kv, verify_rows(9, 8, rng_), window, 16, 1.0f, 4e-3f, 1e-2f);
      }
      check("verify", h, kv, verify_rows(9, 8, rng_), 0, 16, 4.0f, 4e-3f, 1e-2f);
      check("verify", h, kv, verify_rows(9, 6, rng_), 17, 7, 1.0f, 4e-3f, 1e-2f);
      check("verify", h, kv, verify_rows(150, 4, rng_), 0, 16, 1.0f, 4e-3f, 1e-2f);
    }
    // Head dim 256 (one n-tile of columns: Gemma 3 GQA 2:1 at 1 + 3, 1 head x 8 tokens at 1 + 7).
    for (const Heads h : {Heads{8, 4, 256}, Heads{8, 1, 256}}) {
      for (const int max_tokens : {2, 4, 8}) {
        check("verify", h, kv, verify_rows(9, max_tokens, rng_), 0, 16, 1.0f, 4e-3f, 1e-2f);
        check("verify", h, kv, verify_rows(9, max_tokens, rng_), 1024, 16, 1.0f, 4e-3f, 1e-2f);
      }
    }
    // Attention sinks (gpt-oss: 64/8 x 64, sliding over 128) in the single split and the merge.
    for (const int window : {0, 128}) {
      check("verify", Heads{64, 8, 64}, kv, verify_rows(9, 8, rng_), window, 16, 1.0f, 4e-3f, 1e-2f, 8, true);
      check("verify", Heads{64, 8, 64}, kv, verify_rows(2, 4, rng_), window, 16, 4.0f, 4e-3f, 1e-2f, 8, true);
    }
  }
}

TEST_F(CudaAttention, PrefillMatchesTheCpu) {
  // Fresh prompts of several lengths, chunks continuing cached tokens, and decode rows in one step.
  const Rows mixed = {{200, 0}, {1, 500}, {77, 1000}, {1, 0}, {64, 64}, {130, 3}, {1, 4999}, {65, 0}, {16, 31}};
  const Rows one_prompt = {{700, 0}};
  const Rows chunks = {{129, 2000}, {3, 5}, {64, 0}};
  for (const DType kv : {DType::bf16, DType::f8_e4m3}) {
    for (const Heads h : {Heads{32, 8, 128}, Heads{16, 8, 64}, Heads{4, 4, 128}, Heads{4, 4, 64}}) {
      for (const int window : {0, 100}) {
        check("prefill", h, kv, mixed, window, 16, 1.0f, 1e-2f, 2e-2f);
        check("prefill", h, kv, one_prompt, window, 16, 1.0f, 1e-2f, 2e-2f);
      }
      check("prefill", h, kv, chunks, 0, 7, 3.0f, 1e-2f, 2e-2f);
      check("prefill", h, kv, chunks, 50, 16, 1.0f, 1e-2f, 2e-2f);
    }
  }
}

// Head dim 256 (Gemma 3), through the same kernels' 256 variants: GQA 2:1 (Gemma-3-4B 8/4, 12B 16/8,
// 27B 32/16), 4:1 (1B 4/1) and 8:1 (8/1, 32/4), BF16 and FP8 pages, without a window and with
// sliding windows shorter than most rows' contexts (1024: Gemma's local layers; 100; 17 on pages of
// 7, whose blocks straddle pages). Decode rows reach 5000 positions (decode_rows), so the windowed
// ones split only their last 1024 or 100 keys.
TEST_F(CudaAttention, HeadDim256DecodeMatchesTheCpu) {
  struct Case {
    Heads h;
    int n_rows, window;
  };
  for (const DType kv : {DType::bf16, DType::f8_e4m3}) {
    for (const Case& c : {Case{{8, 4, 256}, 1, 0},     Case{{8, 4, 256}, 7, 0},     Case{{8, 4, 256}, 33, 0},
                          Case{{8, 4, 256}, 1, 1024},  Case{{8, 4, 256}, 7, 1024},  Case{{8, 4, 256}, 20, 100},
                          Case{{16, 8, 256}, 7, 0},    Case{{16, 8, 256}, 7, 1024}, Case{{32, 16, 256}, 2, 0},
                          Case{{32, 16, 256}, 7, 1024}, Case{{4, 1, 256}, 7, 0},    Case{{4, 1, 256}, 7, 512},
                          Case{{8, 1, 256}, 1, 0},     Case{{8, 1, 256}, 7, 0},     Case{{8, 1, 256}, 33, 0},
                          Case{{8, 1, 256}, 7, 1024},  Case{{8, 1, 256}, 20, 100},  Case{{32, 4, 256}, 7, 0},
                          Case{{32, 4, 256}, 7, 1024}, Case{{16, 1, 256}, 7, 0}}) {
      check("decode", c.h, kv, decode_rows(c.n_rows, rng_), c.window, 16, 1.0f, 4e-3f, 1e-2f);
    }
    // Pages of 7 (a key block straddles pages: per-key table reads), a sharper softmax, a window
    // longer than every row.
    check("decode", Heads{8, 4, 256}, kv, decode_rows(8, rng_), 17, 7, 1.0f, 4e-3f, 1e-2f);
    check("decode", Heads{8, 1, 256}, kv, decode_rows(8, rng_), 0, 7, 1.0f, 4e-3f, 1e-2f);
    check("decode", Heads{16, 8, 256}, kv, decode_rows(8, rng_), 0, 16, 4.0f, 4e-3f, 1e-2f);
    check("decode", Heads{8, 4, 256}, kv, decode_rows(9, rng_), 8192, 16, 1.0f, 4e-3f, 1e-2f);
    // More items than resident CTAs (one or two an SM at head dim 256), with and without a window,
    // and more than their item tables hold (8 heads x 4400 rows = 35,200 items against 128 per CTA
    // of 132 or 264 resident), so the grid grows past the resident CTAs.
    check("decode", Heads{8, 4, 256}, kv, decode_rows(150, rng_), 0, 16, 1.0f, 4e-3f, 1e-2f);
    check("decode", Heads{8, 1, 256}, kv, decode_rows(150, rng_), 1024, 16, 1.0f, 4e-3f, 1e-2f);
    Rows many;
    for (int r = 0; r < 4400; ++r) many.emplace_back(1, r % 4);
    check("decode", Heads{8, 8, 256}, kv, many, 0, 4, 1.0f, 4e-3f, 1e-2f);
  }
}

// Head dim 256 prefill (four warps a CTA, Q in shared memory): fresh prompts, chunks continuing
// cached tokens and decode rows in one step, GQA 2:1, 4:1 and 8:1, windows shorter than the
// prompts (100, Gemma's 1024 against prompts and chunks up to 2000 + 129 positions) and none, BF16
// and FP8 pages; and q rows that are not 16-byte aligned (the kernel's element-load path for Q).
TEST_F(CudaAttention, HeadDim256PrefillMatchesTheCpu) {
  const Rows mixed = {{200, 0}, {1, 500}, {77, 1000}, {1, 0}, {64, 64}, {130, 3}, {1, 4999}, {65, 0}, {16, 31}};
  const Rows one_prompt = {{1500, 0}};
  const Rows chunks = {{129, 2000}, {3, 5}, {64, 0}};
  for (const DType kv : {DType::bf16, DType::f8_e4m3}) {
    for (const Heads h : {Heads{8, 4, 256}, Heads{16, 8, 256}, Heads{4, 1, 256}, Heads{8, 1, 256}}) {
      for (const int window : {0, 100, 1024}) {
        check("prefill", h, kv, mixed, window, 16, 1.0f, 1e-2f, 2e-2f);
        check("prefill", h, kv, one_prompt, window, 16, 1.0f, 1e-2f, 2e-2f);
        check("prefill", h, kv, chunks, window, 16, 1.0f, 1e-2f, 2e-2f);
      }
      check("prefill", h, kv, chunks, 0, 7, 3.0f, 1e-2f, 2e-2f);
      check("prefill", h, kv, chunks, 50, 16, 1.0f, 1e-2f, 2e-2f);
    }
    check("prefill", Heads{8, 4, 256}, kv, mixed, 0, 16, 1.0f, 1e-2f, 2e-2f, /*q_pad=*/1);
    check("prefill", Heads{8, 1, 256}, kv, chunks, 100, 16, 1.0f, 1e-2f, 2e-2f, /*q_pad=*/3);
  }
}

// gpt-oss's attention (64 query heads over 8 KV heads of 64, alternate layers sliding over 128
// positions) with attention sinks: the sink joins each head's denominator once, in the single split's
// normalization or in the merge of several (rows up to 5000 keys split many ways), never per split;
// decode, prefill and mixed steps, BF16 and FP8 pages; sinks off on the same shapes; and the plain
// kernel (head size 96) with sinks.
TEST_F(CudaAttention, SinksMatchTheCpu) {
  const Rows mixed = {{200, 0}, {1, 500}, {77, 1000}, {1, 0}, {64, 64}, {130, 3}, {1, 4999}, {65, 0}, {16, 31}};
  for (const DType kv : {DType::bf16, DType::f8_e4m3}) {
    for (const bool sinks : {true, false}) {
      for (const Heads h : {Heads{64, 8, 64}, Heads{8, 1, 64}, Heads{16, 8, 128}}) {
        if (!sinks && h.n_heads != 64) continue;  // the other shapes run without sinks above
        for (const int window : {0, 128}) {
          for (const int n_rows : {1, 2, 7, 33, 150}) {
            check("decode", h, kv, decode_rows(n_rows, rng_), window, 16, 1.0f, 4e-3f, 1e-2f, 8, sinks);
          }
          check("prefill", h, kv, mixed, window, 16, 1.0f, 1e-2f, 2e-2f, 8, sinks);
          check("prefill", h, kv, {{700, 0}}, window, 16, 1.0f, 1e-2f, 2e-2f, 8, sinks);
        }
      }
      // A sharper softmax (q x 4), where the row maximum moves across splits.
      check("decode", Heads{64, 8, 64}, kv, decode_rows(20, rng_), 0, 16, 4.0f, 4e-3f, 1e-2f, 8, sinks);
    }
  }
  for (const int window : {0, 128}) {
    check("decode", Heads{8, 4, 96}, DType::bf16, decode_rows(9, rng_), window, 16, 1.0f, 4e-3f, 1e-2f, 8, true);
    check("prefill", Heads{8, 4, 96}, DType::bf16, mixed, window, 16, 1.0f, 1e-2f, 2e-2f, 8, true);
  }
}

TEST_F(CudaAttention, Fp8KvStoreMatchesTheCpuBitForBit) {
  for (const Heads h : {Heads{8, 4, 128}, Heads{8, 4, 256}}) {
    const Rows rows = {{37, 0}, {1, 20}, {5, 3}};
    std::int32_t n_pages = 0;
    const Step step = make_step(rows, 16, &n_pages);
    const KvCacheLayout layout{2, n_pages, 16, h.n_kv_heads, h.head_dim, DType::f8_e4m3};
    KvCache cpu_kv = cpu_.allocate_kv_cache(layout), gpu_kv = gpu_->allocate_kv_cache(layout);
    const std::vector<std::uint8_t> zeros(layout.size_bytes(), 0);
    std::memcpy(cpu_kv.storage->data(), zeros.data(), zeros.size());
    gpu_->upload(*gpu_kv.storage, 0, zeros.data(), zeros.size());
    cpu_.begin_step(step, cpu_kv);
    gpu_->begin_step(step, gpu_kv);
    const std::int64_t n = step.n_tokens(), width = std::int64_t(h.n_kv_heads) * h.head_dim;
    for (std::int32_t layer = 0; layer < 2; ++layer) {
      // Wide magnitudes: saturation past 448, subnormals below 2^-6, ties of the 3-bit mantissa.
      auto k = random_bf16(std::size_t(n * width), 1.0f), v = random_bf16(std::size_t(n * width), 200.0f);
      for (std::size_t i = 0; i < k.size(); i += 3) k[i] = f32_to_bf16(bf16_to_f32(k[i]) * 0.01f);
      Matrix ck = host_f32(cpu_, k, n, width), cv = host_f32(cpu_, v, n, width);
      Matrix gk = device_bf16(*gpu_, k, n, width, width + 8), gv = device_bf16(*gpu_, v, n, width, width);
      cpu_.kv_store(cpu_kv, layer, ck.t, cv.t);
      gpu_->kv_store(gpu_kv, layer, gk.t, gv.t);
    }
    std::vector<std::uint8_t> gpu_bytes(layout.size_bytes());
    gpu_->download(*gpu_kv.storage, 0, gpu_bytes.data(), gpu_bytes.size());
    const auto* cpu_bytes = static_cast<const std::uint8_t*>(cpu_kv.storage->data());
    std::size_t n_diff = 0, first = 0, n_saturated = 0;
    for (std::size_t i = 0; i < gpu_bytes.size(); ++i) {
      if (gpu_bytes[i] != cpu_bytes[i] && n_diff++ == 0) first = i;
      n_saturated += (cpu_bytes[i] & 0x7fu) == 0x7eu;
    }
    EXPECT_GT(n_saturated, 0u) << "the test should reach saturation";
    EXPECT_EQ(n_diff, 0u) << "FP8 pages of head dim " << h.head_dim << " differ from the CPU's, first at byte "
                          << first << ": gpu " << int(gpu_bytes[first]) << " vs cpu " << int(cpu_bytes[first]);
  }
}

// Informational: decode attention for 32 rows x 8k context, 32 query / 8 kv heads of 128 (and Gemma-3-
// 12B's 16 / 8 of 256), as achieved bandwidth over the K/V bytes read; and a 4k-token prompt's causal
// prefill in TFLOP/s.
TEST_F(CudaAttention, Timings) {
  for (const Heads h : {Heads{32, 8, 128}, Heads{16, 8, 256}}) {
    for (const DType kv : {DType::bf16, DType::f8_e4m3}) {
      for (const int context : {8192, 1024}) {
        const int n_rows = 32, page_size = 16;
        Rows rows(std::size_t(n_rows), {1, context - 1});
        std::int32_t n_pages = 0;
        const Step step = make_step(rows, page_size, &n_pages);
        const KvCacheLayout layout{1, n_pages, page_size, h.n_kv_heads, h.head_dim, kv};
        KvCache kv_cache = gpu_->allocate_kv_cache(layout);
        std::vector<std::uint8_t> bytes(layout.size_bytes());
        for (std::size_t i = 0; i < bytes.size(); ++i) bytes[i] = std::uint8_t((i * 2654435761u) >> 13) & 0x3bu;
        gpu_->upload(*kv_cache.storage, 0, bytes.data(), bytes.size());
        const std::int64_t width = std::int64_t(h.n_heads) * h.head_dim;
        Matrix q = device_bf16(*gpu_, random_bf16(std::size_t(n_rows * width), 1.0f), n_rows, width, width);
        Matrix out = device_bf16(*gpu_, {}, n_rows, width, width);
        const AttentionParams p{0, h.n_heads, h.n_kv_heads, h.head_dim, 0.088f, 0};
        gpu_->begin_step(step, kv_cache);
        const float ms = stream_time_ms(*gpu_, [&] { gpu_->attention(kv_cache, q.t, p, out.t); }, 20);
        const double kv_bytes = double(n_rows) * context * h.n_kv_heads * h.head_dim * 2 * dtype_size_bytes(kv);
        std::printf("[ timing   ] decode %d rows x %d ctx, %d/%d heads x %d, %s KV: %.1f us, %.0f GB/s of KV\n", n_rows,
                    context, h.n_heads, h.n_kv_heads, h.head_dim, std::string(dtype_name(kv)).c_str(), ms * 1e3,
                    kv_bytes / (ms * 1e-3) / 1e9);
      }
      {
        const int n_tokens = 4096;
        std::int32_t n_pages = 0;
        const Step step = make_step({{n_tokens, 0}}, 16, &n_pages);
        const KvCacheLayout layout{1, n_pages, 16, h.n_kv_heads, h.head_dim, kv};
        KvCache kv_cache = gpu_->allocate_kv_cache(layout);
        std::vector<std::uint8_t> bytes(layout.size_bytes());
        for (std::size_t i = 0; i < bytes.size(); ++i) bytes[i] = std::uint8_t((i * 2654435761u) >> 13) & 0x3bu;
        gpu_->upload(*kv_cache.storage, 0, bytes.data(), bytes.size());
        const std::int64_t width = std::int64_t(h.n_heads) * h.head_dim;
        Matrix q = device_bf16(*gpu_, random_bf16(std::size_t(n_tokens * width), 1.0f), n_tokens, width, width);
        Matrix out = device_bf16(*gpu_, {}, n_tokens, width, width);
        const AttentionParams p{0, h.n_heads, h.n_kv_heads, h.head_dim, 0.088f, 0};
        gpu_->begin_step(step, kv_cache);
        const float ms = stream_time_ms(*gpu_, [&] { gpu_->attention(kv_cache, q.t, p, out.t); }, 10);
        const double flops = 4.0 * double(n_tokens) * (n_tokens + 1) / 2 * h.head_dim * h.n_heads;
        std::printf("[ timing   ] prefill %d tokens causal, %d/%d heads x %d, %s KV: %.1f us, %.0f TFLOP/s\n", n_tokens,
                    h.n_heads, h.n_kv_heads, h.head_dim, std::string(dtype_name(kv)).c_str(), ms * 1e3,
                    flops / (ms * 1e-3) / 1e12);
      }
    }
  }
}

}  // namespace
}  // namespace flare::helios

#endif  // FLARE_HAVE_CUDA
