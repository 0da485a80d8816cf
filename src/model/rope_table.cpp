// Rotary frequency tables (see rope_table.h).
#include "model/rope_table.h"

#include <vector>

#include "model/rope.h"

namespace flare::model {

using helios::DType;
using helios::Tensor;

RopeTable::RopeTable(const RopeSpec& rope, std::int32_t head_dim, std::int32_t max_position, helios::Backend& backend)
    : rope_(rope), head_dim_(head_dim), max_position_(max_position) {
  if (rope_depends_on_length(rope_)) return;
  const RopeFrequencies freq = rope_frequencies(rope_, head_dim_, max_position_, 0);
  fixed_ = backend.allocate(freq.inv_freq.size() * sizeof(float));
  backend.upload(*fixed_, 0, freq.inv_freq.data(), freq.inv_freq.size() * sizeof(float));
  fixed_attention_factor_ = freq.attention_factor;
}

void RopeTable::plan(const RopeSpec& rope, std::int32_t head_dim, const char* name, helios::ArenaPlan& plan) {
  if (rope_depends_on_length(rope)) plan.add(name, helios::ArenaRows::rows, head_dim / 2, DType::f32);
}

void RopeTable::bind(const helios::ArenaPlan& plan, const char* name) {
  if (!fixed_) slot_ = plan.slot(name);
}

float RopeTable::upload(const helios::Step& step, helios::ActivationArena& arena, helios::Backend& backend) const {
  if (fixed_) return fixed_attention_factor_;
  // Dynamic NTK: each row's frequencies follow its length after this step (as transformers does
  // when it generates: the length is the last position + 1).
  std::vector<float> table;
  float attention_factor = 1.0f;
  for (const auto& row : step.rows) {
    const RopeFrequencies f =
        rope_frequencies(rope_, head_dim_, max_position_, std::int64_t(row.start_position) + row.n_tokens);
    table.insert(table.end(), f.inv_freq.begin(), f.inv_freq.end());
    attention_factor = f.attention_factor;
  }
  backend.upload_step_input(arena.buffer(slot_), 0, table.data(), table.size() * sizeof(float));
  return attention_factor;
}

helios::RotaryParams RopeTable::params(const helios::ActivationArena& arena, std::int32_t n_rows,
                                       float attention_factor) const {
  if (fixed_) return {Tensor::of(*fixed_, DType::f32, 1, head_dim_ / 2), attention_factor};
  return {arena.view(slot_, n_rows), attention_factor};
}

}  // namespace flare::model
