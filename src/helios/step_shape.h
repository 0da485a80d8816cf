// The shape of a step, the key a captured step graph is kept under: how many rows, how many tokens
// each computes and how many logits each wants, and the KV dtype its kernels were built for. Only
// uniform steps (every row alike) have a shape; a step whose rows differ runs eagerly.
//   decode:          {rows, 1, 1}
//   prefill chunk:   {1, chunk, 0 or 1}
//   verify:          {rows, 1 + k, 1 + k} (k >= 1 drafts a row)
// A uniform decode or verify step of fewer rows than a captured shape runs that shape's graph after
// dummy rows pad it: a dummy row computes token 0 from position 0 with every block on a scratch page that no
// sequence owns, so it writes its K and V there (only there) and produces logits nobody reads.
// Real rows keep their order, so their logits rows come first.
#pragma once

#include <compare>
#include <cstdint>
#include <optional>
#include <span>
#include <string>

#include "helios/dtype.h"
#include "helios/step.h"

namespace flare::helios {

struct StepShape {
  std::int32_t n_rows = 0;
  std::int32_t tokens_per_row = 0;
  std::int32_t logits_per_row = 0;
  DType kv_dtype = DType::bf16;

  std::int32_t n_tokens() const { return n_rows * tokens_per_row; }
  std::int32_t n_logit_rows() const { return n_rows * logits_per_row; }
  bool is_decode() const { return tokens_per_row == 1 && logits_per_row == 1; }
  bool is_verify() const { return tokens_per_row >= 2 && logits_per_row == tokens_per_row; }
  std::string describe() const;  // "8 rows x 1 token, 1 logits row each"
  auto operator<=>(const StepShape&) const = default;
};

// The shape of `step` over a cache of `kv_dtype`, when every row computes as many tokens and wants
// as many logits as the first; nullopt for an empty or mixed step.
std::optional<StepShape> step_shape_of(const Step& step, DType kv_dtype);

// A step of `shape` made only of dummy rows (see above), for a cache of pages of page_size_tokens.
// With several history groups, scratch_pages[g] is group g's scratch page (and the step carries a
// block table per group).
Step step_dummy(const StepShape& shape, std::int32_t page_size_tokens, std::int32_t scratch_page);
Step step_dummy(const StepShape& shape, std::int32_t page_size_tokens, std::span<const std::int32_t> scratch_pages);

// `step` (uniform, of shape `from`) with dummy rows appended up to to.n_rows rows; `to` differs
// from `from` in its row count only, which is >= the step's.
Step step_pad_rows(const Step& step, const StepShape& to, std::int32_t page_size_tokens, std::int32_t scratch_page);
// The group tables the step carries are padded with scratch_pages[g] each.
Step step_pad_rows(const Step& step, const StepShape& to, std::int32_t page_size_tokens,
                   std::span<const std::int32_t> scratch_pages);

}  // namespace flare::helios
