// A compact, read-mostly hash table from byte strings to token ids, for vocabularies of a few
// hundred thousand entries: keys live in one arena, slots are open-addressed. Much faster to
// build and probe than std::unordered_map<std::string, int>. Not thread-safe for insert; const
// lookups are.
#pragma once

#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace flare::text {

inline uint64_t bpe_hash_bytes(std::string_view s) {
  // 64-bit FNV-1a over 8-byte words, then a final mix: fast for short tokens.
  uint64_t h = 0xcbf29ce484222325ULL ^ s.size();
  size_t i = 0;
  for (; i + 8 <= s.size(); i += 8) {
    uint64_t w;
    std::memcpy(&w, s.data() + i, 8);
    h = (h ^ w) * 0x100000001b3ULL;
    h ^= h >> 29;
  }
  uint64_t tail = 0;
  if (i < s.size()) std::memcpy(&tail, s.data() + i, s.size() - i);
  h = (h ^ tail) * 0x100000001b3ULL;
  h ^= h >> 32;
  h *= 0xff51afd7ed558ccdULL;
  h ^= h >> 33;
  return h;
}

class StringTable {
 public:
  void reserve(size_t n_keys, size_t n_bytes) {
    size_t capacity = 16;
    while (capacity < n_keys * 2) capacity <<= 1;
    rehash(capacity);
    arena_.reserve(n_bytes);
  }
  // Inserts or overwrites.
  void insert_or_assign(std::string_view key, int32_t id) { upsert(key, id, true); }
  // Inserts unless present; returns false when the key already existed.
  bool insert(std::string_view key, int32_t id) { return upsert(key, id, false); }
  std::optional<int32_t> find(std::string_view key) const {
    if (slots_.empty()) return std::nullopt;
    uint64_t h = bpe_hash_bytes(key);
    for (size_t i = h & mask_;; i = (i + 1) & mask_) {
      const Slot& slot = slots_[i];
      if (slot.id < 0) return std::nullopt;
      if (slot.hash == static_cast<uint32_t>(h) && key_of(slot) == key) return slot.id;
    }
  }
  size_t size() const { return size_; }

 private:
  // 32 bytes; keys up to kInline bytes are compared without touching the arena.
  static constexpr size_t kInline = 16;
  struct Slot {
    uint32_t offset = 0;
    uint32_t length = 0;
    int32_t id = -1;
    uint32_t hash = 0;
    char head[kInline] = {};
  };
  static Slot make_slot(std::string_view key, uint32_t offset, int32_t id, uint64_t h) {
    Slot slot{offset, static_cast<uint32_t>(key.size()), id, static_cast<uint32_t>(h), {}};
    if (key.size() <= kInline) std::memcpy(slot.head, key.data(), key.size());
    return slot;
  }
  bool upsert(std::string_view key, int32_t id, bool overwrite) {
    if ((size_ + 1) * 2 > slots_.size()) rehash(slots_.empty() ? 16 : slots_.size() * 2);
    uint64_t h = bpe_hash_bytes(key);
    for (size_t i = h & mask_;; i = (i + 1) & mask_) {
      Slot& slot = slots_[i];
      if (slot.id < 0) {
        slot = make_slot(key, static_cast<uint32_t>(arena_.size()), id, h);
        if (key.size() > kInline) arena_.append(key);
        ++size_;
        return true;
      }
      if (slot.hash == static_cast<uint32_t>(h) && key_of(slot) == key) {
        if (overwrite) slot.id = id;
        return false;
      }
    }
  }
  std::string_view key_of(const Slot& slot) const {
    if (slot.length <= kInline) return std::string_view(slot.head, slot.length);
    return std::string_view(arena_).substr(slot.offset, slot.length);
  }
  void rehash(size_t capacity) {
    std::vector<Slot> old = std::move(slots_);
    slots_.assign(capacity, Slot{});
    mask_ = capacity - 1;
    for (const Slot& slot : old) {
      if (slot.id < 0) continue;
      for (size_t i = bpe_hash_bytes(key_of(slot)) & mask_;; i = (i + 1) & mask_) {
        if (slots_[i].id < 0) {
          slots_[i] = slot;
          break;
        }
      }
    }
  }

  std::vector<Slot> slots_;
  std::string arena_;
  size_t mask_ = 0;
  size_t size_ = 0;
};

}  // namespace flare::text
