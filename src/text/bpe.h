// The BPE model of tokenizer.json ("model": {"type": "BPE"}): vocabulary, merges with ranks,
// byte fallback, unk/fuse_unk, ignore_merges, and a word cache. A word is merged by repeatedly
// applying the lowest-ranked adjacent pair (leftmost on ties), exactly as the tokenizers library.
//
// Symbols: for a byte-level tokenizer the vocabulary is converted at load from the GPT-2
// alphabet to raw bytes, and a word's initial symbols are its bytes; otherwise the initial
// symbols are the word's UTF-8 characters. Built once; encode() is const and thread-safe (the
// cache is sharded behind mutexes).
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "text/bpe_string_table.h"

namespace flare::text {

// The bulky parts of a BPE model, read by a streaming parser instead of a JSON document.
struct BpeData {
  std::vector<std::pair<std::string, int64_t>> vocab;          // token -> id, file order
  std::vector<std::pair<std::string, std::string>> merges;     // rank order
  bool has_vocab = false;
  bool has_merges = false;
};

class BpeModel {
 public:
  // `model`: the "model" object (its vocab and merges already moved into `data`).
  // `byte_level`: the pre-tokenizer hands raw bytes and the vocabulary uses the GPT-2 alphabet.
  BpeModel(const nlohmann::json& model, BpeData data, bool byte_level);
  ~BpeModel();

  // Appends the ids of one pre-tokenized piece to `out`.
  void encode(std::string_view piece, std::vector<int32_t>& out) const;

  // The id of a token written as in tokenizer.json.
  std::optional<int32_t> token_to_id(std::string_view token) const;
  // The vocabulary in its tokenizer.json form (index = id; empty for ids the model lacks).
  const std::vector<std::string>& tokens() const { return tokens_; }
  std::optional<int32_t> unk_id() const { return unk_id_; }
  bool byte_level() const { return byte_level_; }
  // The raw bytes a token stands for in a byte-level vocabulary (empty when not byte-level).
  const std::string& token_bytes(int32_t id) const { return token_bytes_[static_cast<size_t>(id)]; }

 private:
  struct MergeTable;
  class Cache;
  void build_merges(const std::vector<std::pair<std::string, std::string>>& merges);
  void merge_word(std::string_view word, std::vector<int32_t>& out) const;
  void merge_symbols(std::vector<int32_t>& ids, std::vector<uint32_t>& ends) const;
  void merge_symbols_heap(std::vector<int32_t>& ids, std::vector<uint32_t>& ends) const;
  void emit_unknown(std::string_view bytes, std::vector<int32_t>& out) const;

  bool byte_level_ = false;
  bool ignore_merges_ = false;
  bool byte_fallback_ = false;
  bool fuse_unk_ = false;
  std::optional<int32_t> unk_id_;
  std::vector<std::string> tokens_;       // id -> token as written in tokenizer.json
  std::vector<std::string> token_bytes_;  // id -> raw bytes (byte-level only)
  StringTable symbol_ids_;                // token in the model's symbol domain -> id
  std::array<int32_t, 256> byte_ids_{};   // byte-level: id of each single byte (-1 if none)
  std::array<int32_t, 256> fallback_ids_{};  // byte_fallback: id of "<0xNN>" (-1 if none)
  std::unique_ptr<MergeTable> merges_;
  std::unique_ptr<Cache> cache_;
};

}  // namespace flare::text
