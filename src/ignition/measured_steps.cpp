// Measured step times in the manifest (see measured_steps.h).
#include "ignition/measured_steps.h"

#include <fmt/format.h>

namespace flare::ignition {

void record_measured_steps(proto::Manifest& manifest, std::span<const MeasuredStepTime> times,
                           const std::string& device_name) {
  if (times.empty()) return;
  proto::Speculation* s = manifest.mutable_speculation();
  s->clear_measured_steps();
  for (const MeasuredStepTime& t : times) {
    proto::MeasuredStep* step = s->add_measured_steps();
    step->set_rows(static_cast<std::uint32_t>(t.rows));
    step->set_tokens_per_row(static_cast<std::uint32_t>(t.tokens_per_row));
    step->set_milliseconds(t.milliseconds);
  }
  s->set_steps_measured_on(device_name);
}

std::string measured_steps_summary(std::span<const MeasuredStepTime> times) {
  // The fewest rows that have both a decode and a verify time, and the widest verify there.
  const MeasuredStepTime* decode = nullptr;
  const MeasuredStepTime* widest = nullptr;
  for (const MeasuredStepTime& t : times) {
    if (t.tokens_per_row == 1 && (!decode || t.rows < decode->rows)) decode = &t;
  }
  if (!decode) return "";
  for (const MeasuredStepTime& t : times) {
    if (t.rows == decode->rows && t.tokens_per_row > 1 && (!widest || t.tokens_per_row > widest->tokens_per_row))
      widest = &t;
  }
  if (!widest || !(decode->milliseconds > 0.0)) return "";
  return fmt::format("; a verify round of {} row{} x {} tokens costs {:.2f}x a decode step ({:.3f} ms)", widest->rows,
                     widest->rows == 1 ? "" : "s", widest->tokens_per_row, widest->milliseconds / decode->milliseconds,
                     decode->milliseconds);
}

}  // namespace flare::ignition
