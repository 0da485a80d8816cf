// Rotary embedding frequencies for every supported scaling type, computed as Hugging Face
// transformers computes them (modeling_rope_utils): inverse frequencies in F32 and an attention
// factor that scales cos and sin (YaRN). Dynamic NTK scaling depends on the sequence length, so
// the forward pass asks per row with that row's length.
#pragma once

#include <cstdint>
#include <vector>

#include "model/spec.h"

namespace flare::model {

struct RopeFrequencies {
  std::vector<float> inv_freq;  // [head_dim / 2]
  float attention_factor = 1.0f;
};

// `seq_len`: the row's length after this step (position of its last token + 1); only dynamic uses it.
RopeFrequencies rope_frequencies(const ModelSpec& spec, std::int64_t seq_len);
// The same for any rope (a model's second rope: Gemma 3's local layers), over head_dim / 2 pairs.
RopeFrequencies rope_frequencies(const RopeSpec& rope, std::int32_t head_dim, std::int32_t max_position,
                                 std::int64_t seq_len);
// True when the frequencies change with the sequence length (dynamic NTK).
bool rope_depends_on_length(const RopeSpec& rope);

}  // namespace flare::model
