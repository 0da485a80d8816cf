// The activation arena: the named device buffers a forward program computes in, each sized per
// token, per logits row or per row of the largest step reserved, so that every smaller step reuses
// the same addresses (what a captured graph needs). Growing a buffer moves it, which bumps the
// generation that graphs check. Slot 0 is always the logits, [logits rows, vocab] F32, where every
// program leaves its result. Owned by the step executor; one engine thread uses it.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "helios/backend.h"

namespace flare::helios {

enum class ArenaRows : std::uint8_t { tokens, logit_rows, rows };

struct ArenaBufferSpec {
  std::string name;  // "x", "qkv", ... (for dumps and messages)
  ArenaRows rows = ArenaRows::tokens;
  std::int64_t cols = 0;
  DType dtype = DType::f32;
};

inline constexpr std::int32_t k_arena_logits = 0;

struct ArenaCapacity {
  std::int32_t tokens = 0;
  std::int32_t logit_rows = 0;
  std::int32_t rows = 0;
};


// What a program declares: add() returns the slot its views are taken by.
class ArenaPlan {
 public:
  explicit ArenaPlan(std::int64_t vocab_size) { add("logits", ArenaRows::logit_rows, vocab_size, DType::f32); }
  std::int32_t add(std::string name, ArenaRows rows, std::int64_t cols, DType dtype);
  // The slot of `name`; flare::Error when the plan has none.
  std::int32_t slot(std::string_view name) const;
  const std::vector<ArenaBufferSpec>& buffers() const { return buffers_; }
  std::size_t bytes(const ArenaCapacity& capacity) const;  // every buffer at that capacity

 private:
  std::vector<ArenaBufferSpec> buffers_;
};

class ActivationArena {
 public:
  ActivationArena(Backend& backend, ArenaPlan plan);

  // Grows every buffer whose capacity is below `wanted` (never shrinks).
  void reserve(const ArenaCapacity& wanted);
  const ArenaCapacity& capacity() const { return capacity_; }
  std::uint64_t generation() const { return generation_; }

  // [n_rows, cols] of the slot's buffer (n_rows within its capacity).
  Tensor view(std::int32_t slot, std::int64_t n_rows) const;
  Buffer& buffer(std::int32_t slot);
  // The slot of a buffer by name, or -1 (debug dumps, tests).
  std::int32_t find(std::string_view name) const;
  const std::vector<ArenaBufferSpec>& buffers() const { return specs_; }

 private:
  Backend& backend_;
  std::vector<ArenaBufferSpec> specs_;
  std::vector<std::unique_ptr<Buffer>> buffers_;
  ArenaCapacity capacity_;
  std::uint64_t generation_ = 0;
};

}  // namespace flare::helios
