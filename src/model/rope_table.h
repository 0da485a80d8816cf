// The rotary frequencies a forward program hands to rotary_kv_store: one row on the device shared
// by every step when they do not change, else a row per step row (dynamic NTK scaling follows each
// row's length), uploaded with the step into an arena buffer so a replayed graph reads them there.
#pragma once

#include <cstdint>
#include <memory>

#include "helios/activation_arena.h"
#include "helios/backend.h"
#include "helios/step.h"
#include "model/spec.h"

namespace flare::model {

class RopeTable {
 public:
  RopeTable(const RopeSpec& rope, std::int32_t head_dim, std::int32_t max_position, helios::Backend& backend);

  // Declares the per-row buffer `name` when the frequencies vary; call from plan_arena.
  static void plan(const RopeSpec& rope, std::int32_t head_dim, const char* name, helios::ArenaPlan& plan);
  // Binds the per-row buffer's slot (when planned).
  void bind(const helios::ArenaPlan& plan, const char* name);
  // Uploads the step's rows' frequencies (when they vary); returns the attention factor (YaRN).
  float upload(const helios::Step& step, helios::ActivationArena& arena, helios::Backend& backend) const;
  helios::RotaryParams params(const helios::ActivationArena& arena, std::int32_t n_rows, float attention_factor) const;

 private:
  RopeSpec rope_;
  std::int32_t head_dim_ = 0, max_position_ = 0;
  std::unique_ptr<helios::Buffer> fixed_;  // [1, head_dim / 2] f32, when the frequencies do not vary
  float fixed_attention_factor_ = 1.0f;
  std::int32_t slot_ = -1;
};

}  // namespace flare::model
