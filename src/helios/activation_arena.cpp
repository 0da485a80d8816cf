// The activation arena (see activation_arena.h).
#include "helios/activation_arena.h"

#include <algorithm>

#include "common/error.h"

namespace flare::helios {
namespace {

std::size_t arena_buffer_bytes(const ArenaBufferSpec& spec, const ArenaCapacity& capacity) {
  std::int32_t rows = 0;
  switch (spec.rows) {
    case ArenaRows::tokens: rows = capacity.tokens; break;
    case ArenaRows::logit_rows: rows = capacity.logit_rows; break;
    case ArenaRows::rows: rows = capacity.rows; break;
  }
  return std::size_t(rows) * std::size_t(spec.cols) * dtype_size_bytes(spec.dtype);
}

}  // namespace

std::int32_t ArenaPlan::add(std::string name, ArenaRows rows, std::int64_t cols, DType dtype) {
  if (cols < 1) fail(ExitCode::failure, "internal: activation buffer '{}' of {} columns", name, cols);
  buffers_.push_back({std::move(name), rows, cols, dtype});
  return std::int32_t(buffers_.size() - 1);
}

std::int32_t ArenaPlan::slot(std::string_view name) const {
  for (std::size_t i = 0; i < buffers_.size(); ++i) {
    if (buffers_[i].name == name) return std::int32_t(i);
  }
  fail(ExitCode::failure, "internal: no activation buffer '{}'", name);
}

std::size_t ArenaPlan::bytes(const ArenaCapacity& capacity) const {
  std::size_t total = 0;
  for (const ArenaBufferSpec& spec : buffers_) total += arena_buffer_bytes(spec, capacity);
  return total;
}

ActivationArena::ActivationArena(Backend& backend, ArenaPlan plan)
    : backend_(backend), specs_(plan.buffers()), buffers_(specs_.size()) {}

void ActivationArena::reserve(const ArenaCapacity& wanted) {
  const ArenaCapacity next{std::max(wanted.tokens, capacity_.tokens), std::max(wanted.logit_rows, capacity_.logit_rows),
                           std::max(wanted.rows, capacity_.rows)};
  for (std::size_t i = 0; i < specs_.size(); ++i) {
    const std::size_t bytes = arena_buffer_bytes(specs_[i], next);
    if (buffers_[i] && buffers_[i]->size_bytes() >= bytes) continue;
    if (bytes == 0) continue;
    buffers_[i] = backend_.allocate(bytes);
    ++generation_;
  }
  capacity_ = next;
}

Tensor ActivationArena::view(std::int32_t slot, std::int64_t n_rows) const {
  if (slot < 0 || std::size_t(slot) >= specs_.size() || !buffers_[std::size_t(slot)]) {
    fail(ExitCode::failure, "internal: activation slot {} has no buffer", slot);
  }
  const ArenaBufferSpec& spec = specs_[std::size_t(slot)];
  return Tensor::of(*buffers_[std::size_t(slot)], spec.dtype, n_rows, spec.cols);
}

Buffer& ActivationArena::buffer(std::int32_t slot) {
  if (slot < 0 || std::size_t(slot) >= specs_.size() || !buffers_[std::size_t(slot)]) {
    fail(ExitCode::failure, "internal: activation slot {} has no buffer", slot);
  }
  return *buffers_[std::size_t(slot)];
}

std::int32_t ActivationArena::find(std::string_view name) const {
  for (std::size_t i = 0; i < specs_.size(); ++i) {
    if (specs_[i].name == name) return std::int32_t(i);
  }
  return -1;
}

}  // namespace flare::helios
