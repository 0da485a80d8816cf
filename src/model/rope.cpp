// Rotary frequencies (see rope.h). Each branch follows the matching _compute_*_parameters of
// transformers' modeling_rope_utils, with the F32 arithmetic of the base frequencies kept.
#include "model/rope.h"

#include <algorithm>
#include <cmath>

namespace flare::model {
namespace {

std::vector<float> base_inv_freq(double theta, std::int32_t dim) {
  std::vector<float> out(std::size_t(dim / 2));
  for (std::int32_t i = 0; i < dim / 2; ++i) {
    const float exponent = float(2 * i) / float(dim);  // torch: arange(0, dim, 2).float() / dim
    out[std::size_t(i)] = float(1.0 / std::pow(double(float(theta)), double(exponent)));
  }
  return out;
}

void apply_llama3(const RopeSpec& r, std::vector<float>& inv_freq) {
  const double old_context = r.original_max_position;
  const double low_wavelen = old_context / r.low_freq_factor;
  const double high_wavelen = old_context / r.high_freq_factor;
  for (float& f : inv_freq) {
    const double wavelen = 2.0 * M_PI / f;
    if (wavelen < high_wavelen) continue;
    if (wavelen > low_wavelen) {
      f = float(f / r.factor);
      continue;
    }
    const double smooth = (old_context / wavelen - r.low_freq_factor) / (r.high_freq_factor - r.low_freq_factor);
    f = float((1.0 - smooth) * f / r.factor + smooth * f);
  }
}

double yarn_mscale(double scale, double mscale) { return scale <= 1.0 ? 1.0 : 0.1 * mscale * std::log(scale) + 1.0; }

RopeFrequencies yarn(const RopeSpec& r, std::int32_t dim, std::int32_t max_position) {
  const double original = r.original_max_position > 0 ? r.original_max_position : max_position;
  double factor = r.factor;
  RopeFrequencies out;
  double attention_factor;
  if (r.attention_factor) {
    attention_factor = *r.attention_factor;
  } else if (r.mscale && r.mscale_all_dim && *r.mscale != 0 && *r.mscale_all_dim != 0) {
    attention_factor = yarn_mscale(factor, *r.mscale) / yarn_mscale(factor, *r.mscale_all_dim);
  } else {
    attention_factor = yarn_mscale(factor, 1.0);
  }
  auto correction_dim = [&](double rotations) {
    return dim * std::log(original / (rotations * 2.0 * M_PI)) / (2.0 * std::log(r.theta));
  };
  double low = correction_dim(r.beta_fast), high = correction_dim(r.beta_slow);
  if (r.truncate) {
    low = std::floor(low);
    high = std::ceil(high);
  }
  low = std::max(low, 0.0);
  high = std::min(high, double(dim - 1));
  if (low == high) high += 0.001;
  const std::vector<float> extrapolation = base_inv_freq(r.theta, dim);
  out.inv_freq.resize(extrapolation.size());
  for (std::size_t i = 0; i < extrapolation.size(); ++i) {
    const float ramp = std::clamp(float((double(i) - low) / (high - low)), 0.0f, 1.0f);
    const float extrapolation_factor = 1.0f - ramp;
    const float interpolation = float(1.0 / (factor * (1.0 / double(extrapolation[i]))));
    out.inv_freq[i] = interpolation * (1.0f - extrapolation_factor) + extrapolation[i] * extrapolation_factor;
  }
  out.attention_factor = float(attention_factor);
  return out;
}

}  // namespace

bool rope_depends_on_length(const RopeSpec& rope) { return rope.type == RopeType::dynamic; }

RopeFrequencies rope_frequencies(const ModelSpec& spec, std::int64_t seq_len) {
  return rope_frequencies(spec.rope, spec.head_dim, spec.max_position_embeddings, seq_len);
}

RopeFrequencies rope_frequencies(const RopeSpec& r, std::int32_t head_dim, std::int32_t max_position,
                                 std::int64_t seq_len) {
  RopeFrequencies out;
  switch (r.type) {
    case RopeType::default_:
      out.inv_freq = base_inv_freq(r.theta, head_dim);
      break;
    case RopeType::linear:
      out.inv_freq = base_inv_freq(r.theta, head_dim);
      for (float& f : out.inv_freq) f = float(f / r.factor);
      break;
    case RopeType::dynamic: {
      const double max_positions = max_position;
      const double len = std::max<double>(double(seq_len), max_positions);
      const double dim = head_dim;
      const double base = r.theta * std::pow(r.factor * len / max_positions - (r.factor - 1.0), dim / (dim - 2.0));
      out.inv_freq = base_inv_freq(base, head_dim);
      break;
    }
    case RopeType::yarn:
      return yarn(r, head_dim, max_position);
    case RopeType::llama3:
      out.inv_freq = base_inv_freq(r.theta, head_dim);
      apply_llama3(r, out.inv_freq);
      break;
  }
  return out;
}

}  // namespace flare::model
