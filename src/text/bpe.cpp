// BPE model: vocabulary and merge table construction, word merging, cache (see bpe.h).
#include "text/bpe.h"

#include <algorithm>
#include <climits>
#include <mutex>
#include <queue>

#include <nlohmann/json.hpp>

#include "common/error.h"
#include "text/tokenizer_json.h"
#include "text/unicode.h"

namespace flare::text {

// Words of up to this many initial symbols are merged by rescanning an array (cheaper than a heap
// for the short words byte-level pre-tokenizers produce); longer ones use the heap.
constexpr size_t kSmallWordSymbols = 128;

// Open-addressing hash table: (left id, right id) -> (rank, merged id).
struct BpeModel::MergeTable {
  struct Slot {
    uint64_t key = ~0ULL;
    int32_t rank = 0;
    int32_t id = 0;
  };
  std::vector<Slot> slots;
  uint64_t mask = 0;

  explicit MergeTable(size_t n_merges) {
    size_t capacity = 16;
    while (capacity < n_merges * 2) capacity <<= 1;
    slots.resize(capacity);
    mask = capacity - 1;
  }
  static uint64_t key_of(int32_t left, int32_t right) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) | static_cast<uint32_t>(right);
  }
  static uint64_t hash(uint64_t key) {
    key ^= key >> 33;
    key *= 0xff51afd7ed558ccdULL;
    key ^= key >> 33;
    return key;
  }
  // Keeps the first (lowest) rank when a pair appears twice, like the reference.
  void insert(int32_t left, int32_t right, int32_t rank, int32_t id) {
    uint64_t key = key_of(left, right);
    for (uint64_t i = hash(key) & mask;; i = (i + 1) & mask) {
      if (slots[i].key == key) return;
      if (slots[i].key == ~0ULL) {
        slots[i] = {key, rank, id};
        return;
      }
    }
  }
  const Slot* find(int32_t left, int32_t right) const {
    if (left < 0 || right < 0) return nullptr;
    uint64_t key = key_of(left, right);
    for (uint64_t i = hash(key) & mask;; i = (i + 1) & mask) {
      if (slots[i].key == key) return &slots[i];
      if (slots[i].key == ~0ULL) return nullptr;
    }
  }
};

// Word -> ids: a direct-mapped cache (a colliding word replaces the previous one), sharded
// behind mutexes so that concurrent encoders rarely contend. Short results are stored inline.
class BpeModel::Cache {
 public:
  static constexpr size_t kShards = 16;
  static constexpr size_t kShardEntries = 4096;
  static constexpr size_t kMaxWordBytes = 256;
  static constexpr size_t kInlineIds = 6;

  Cache() {
    for (auto& shard : shards_) shard.entries.resize(kShardEntries);
  }
  bool get(std::string_view word, uint64_t hash, std::vector<int32_t>& out) {
    Shard& shard = shards_[hash % kShards];
    std::lock_guard lock(shard.mutex);
    const Entry& e = shard.entries[(hash / kShards) % kShardEntries];
    if (e.hash != hash || e.word != word) return false;
    if (e.n_ids <= kInlineIds) {
      out.insert(out.end(), e.ids.begin(), e.ids.begin() + e.n_ids);
    } else {
      out.insert(out.end(), e.more.begin(), e.more.end());
    }
    return true;
  }
  void put(std::string_view word, uint64_t hash, const int32_t* ids, size_t n_ids) {
    if (word.size() >= kMaxWordBytes) return;
    Shard& shard = shards_[hash % kShards];
    std::lock_guard lock(shard.mutex);
    Entry& e = shard.entries[(hash / kShards) % kShardEntries];
    e.hash = hash;
    e.word.assign(word);
    e.n_ids = static_cast<uint32_t>(n_ids);
    if (n_ids <= kInlineIds) {
      std::copy(ids, ids + n_ids, e.ids.begin());
      e.more.clear();
    } else {
      e.more.assign(ids, ids + n_ids);
    }
  }

 private:
  struct Entry {
    uint64_t hash = 0;
    uint32_t n_ids = 0;
    std::array<int32_t, kInlineIds> ids{};
    std::string word;
    std::vector<int32_t> more;
  };
  struct Shard {
    std::mutex mutex;
    std::vector<Entry> entries;
  };
  std::array<Shard, kShards> shards_;
};

BpeModel::BpeModel(const nlohmann::json& model, BpeData data, bool byte_level)
    : byte_level_(byte_level), cache_(std::make_unique<Cache>()) {
  if (auto it = model.find("dropout"); it != model.end() && it->is_number() && it->get<double>() != 0.0) {
    fail_input("tokenizer.json: BPE dropout is not supported");
  }
  if (!json_string(model, "continuing_subword_prefix", "").empty() ||
      !json_string(model, "end_of_word_suffix", "").empty()) {
    fail_input("tokenizer.json: BPE continuing_subword_prefix / end_of_word_suffix are not supported");
  }
  if (!data.has_vocab) fail_input("tokenizer.json: BPE model has no vocab object");
  if (!data.has_merges) fail_input("tokenizer.json: BPE model has no merges array");
  ignore_merges_ = json_bool(model, "ignore_merges", false);
  byte_fallback_ = json_bool(model, "byte_fallback", false);
  fuse_unk_ = json_bool(model, "fuse_unk", false);

  size_t n_bytes = 0;
  for (auto& [token, id] : data.vocab) {
    if (id < 0 || id > INT32_MAX / 2) fail_input("tokenizer.json: vocab id {} of {:?} is out of range", id, token);
    if (static_cast<size_t>(id) >= tokens_.size()) tokens_.resize(static_cast<size_t>(id) + 1);
    n_bytes += token.size();
    tokens_[static_cast<size_t>(id)] = std::move(token);
  }
  data.vocab = {};
  symbol_ids_.reserve(tokens_.size(), n_bytes);
  if (byte_level_) token_bytes_.resize(tokens_.size());
  for (size_t id = 0; id < tokens_.size(); ++id) {
    if (tokens_[id].empty()) continue;
    if (byte_level_) {
      // A token outside the byte alphabet cannot come out of a byte-level pre-tokenizer: it keeps
      // its id for decoding but is unreachable when encoding.
      if (!byte_level_decode(tokens_[id], token_bytes_[id])) {
        token_bytes_[id].clear();
        continue;
      }
      symbol_ids_.insert(token_bytes_[id], static_cast<int32_t>(id));
    } else {
      symbol_ids_.insert(tokens_[id], static_cast<int32_t>(id));
    }
  }

  byte_ids_.fill(-1);
  fallback_ids_.fill(-1);
  for (int b = 0; b < 256; ++b) {
    char c = static_cast<char>(b);
    if (byte_level_) byte_ids_[b] = symbol_ids_.find(std::string_view(&c, 1)).value_or(-1);
    if (byte_fallback_) fallback_ids_[b] = symbol_ids_.find(fmt::format("<0x{:02X}>", b)).value_or(-1);
  }
  std::string unk = json_string(model, "unk_token", "");
  if (!unk.empty()) {
    std::string key = unk;
    if (byte_level_) {
      key.clear();
      byte_level_decode(unk, key);
    }
    unk_id_ = symbol_ids_.find(key);
    if (!unk_id_) fail_input("tokenizer.json: unk_token {:?} is not in the vocabulary", unk);
  }

  build_merges(data.merges);
}

void BpeModel::build_merges(const std::vector<std::pair<std::string, std::string>>& merges) {
  merges_ = std::make_unique<MergeTable>(merges.size());
  std::string key;
  auto symbol_id = [&](std::string_view token, size_t rank) {
    std::string_view lookup = token;
    if (byte_level_) {
      key.clear();
      byte_level_decode(token, key);
      lookup = key;
    }
    auto id = symbol_ids_.find(lookup);
    if (!id) fail_input("tokenizer.json: merge {} uses {:?}, which is not in the vocabulary", rank, token);
    return *id;
  };
  std::string merged;
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    const auto& [left, right] = merges[rank];
    int32_t left_id = symbol_id(left, rank);
    int32_t right_id = symbol_id(right, rank);
    merged.assign(left).append(right);
    int32_t merged_id = symbol_id(merged, rank);
    merges_->insert(left_id, right_id, static_cast<int32_t>(rank), merged_id);
  }
}

BpeModel::~BpeModel() = default;

std::optional<int32_t> BpeModel::token_to_id(std::string_view token) const {
  std::optional<int32_t> id;
  if (byte_level_) {
    std::string bytes;
    if (byte_level_decode(token, bytes)) id = symbol_ids_.find(bytes);
  } else {
    id = symbol_ids_.find(token);
  }
  if (id && tokens_[static_cast<size_t>(*id)] == token) return id;
  // Tokens outside the byte alphabet are not in the symbol table: scan (rare, not a hot path).
  if (byte_level_) {
    for (size_t i = 0; i < tokens_.size(); ++i) {
      if (token_bytes_[i].empty() && !tokens_[i].empty() && tokens_[i] == token) return static_cast<int32_t>(i);
    }
  }
  return std::nullopt;
}

void BpeModel::encode(std::string_view piece, std::vector<int32_t>& out) const {
  if (piece.empty()) return;
  if (ignore_merges_) {
    if (auto id = symbol_ids_.find(piece)) {
      out.push_back(*id);
      return;
    }
  }
  if (piece.size() == 1 && byte_level_ && byte_ids_[static_cast<unsigned char>(piece[0])] >= 0) {
    out.push_back(byte_ids_[static_cast<unsigned char>(piece[0])]);
    return;
  }
  uint64_t hash = bpe_hash_bytes(piece);
  if (cache_->get(piece, hash, out)) return;
  size_t first = out.size();
  merge_word(piece, out);
  cache_->put(piece, hash, out.data() + first, out.size() - first);
}

void BpeModel::emit_unknown(std::string_view bytes, std::vector<int32_t>& out) const {
  if (byte_fallback_) {
    bool all = std::all_of(bytes.begin(), bytes.end(),
                           [&](char c) { return fallback_ids_[static_cast<unsigned char>(c)] >= 0; });
    if (all) {
      for (char c : bytes) out.push_back(fallback_ids_[static_cast<unsigned char>(c)]);
      return;
    }
  }
  if (!unk_id_) return;  // no unk token: the reference drops the piece
  if (fuse_unk_ && !out.empty() && out.back() == *unk_id_) return;
  out.push_back(*unk_id_);
}

void BpeModel::merge_word(std::string_view word, std::vector<int32_t>& out) const {
  // Initial symbols: [n_symbols] ids (-1 for a character outside the vocabulary) and byte ends.
  std::vector<int32_t> ids;
  std::vector<uint32_t> ends;
  ids.reserve(word.size());
  ends.reserve(word.size());
  if (byte_level_) {
    for (size_t i = 0; i < word.size(); ++i) {
      ids.push_back(byte_ids_[static_cast<unsigned char>(word[i])]);
      ends.push_back(static_cast<uint32_t>(i + 1));
    }
  } else {
    for (size_t pos = 0; pos < word.size();) {
      size_t start = pos;
      pos = std::min(word.size(), pos + utf8_sequence_bytes(static_cast<unsigned char>(word[pos])));
      ids.push_back(symbol_ids_.find(word.substr(start, pos - start)).value_or(-1));
      ends.push_back(static_cast<uint32_t>(pos));
    }
  }
  if (ids.size() > kSmallWordSymbols) {
    merge_symbols_heap(ids, ends);
  } else {
    merge_symbols(ids, ends);
  }
  uint32_t begin = 0;
  size_t first = out.size();
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] >= 0) {
      out.push_back(ids[i]);
    } else {
      // fuse_unk only fuses unknowns within this word
      size_t before = out.size();
      if (fuse_unk_ && before == first) out.push_back(-2);  // sentinel keeps the fuse local
      emit_unknown(word.substr(begin, ends[i] - begin), out);
      if (fuse_unk_ && before == first) out.erase(out.begin() + static_cast<std::ptrdiff_t>(before));
    }
    begin = ends[i];
  }
}

// Small words: rescan for the lowest-ranked pair after each merge (no allocation beyond ranks).
void BpeModel::merge_symbols(std::vector<int32_t>& ids, std::vector<uint32_t>& ends) const {
  size_t n = ids.size();
  std::array<int32_t, kSmallWordSymbols> ranks;
  std::array<int32_t, kSmallWordSymbols> merged;
  auto refresh = [&](size_t i) {
    const MergeTable::Slot* slot = merges_->find(ids[i], ids[i + 1]);
    ranks[i] = slot ? slot->rank : INT32_MAX;
    merged[i] = slot ? slot->id : -1;
  };
  for (size_t i = 0; i + 1 < n; ++i) refresh(i);
  while (n > 1) {
    size_t best = 0;
    for (size_t i = 1; i + 1 < n; ++i)
      if (ranks[i] < ranks[best]) best = i;
    if (ranks[best] == INT32_MAX) break;
    ids[best] = merged[best];
    ends[best] = ends[best + 1];
    for (size_t i = best + 1; i + 1 < n; ++i) {
      ids[i] = ids[i + 1];
      ends[i] = ends[i + 1];
      ranks[i] = ranks[i + 1];
      merged[i] = merged[i + 1];
    }
    --n;
    if (best + 1 < n) refresh(best);
    if (best > 0) refresh(best - 1);
  }
  ids.resize(n);
  ends.resize(n);
}

// Long words: a min-heap of candidate pairs over a linked list of symbols. Entries carry the ids
// they were made for, so an entry whose symbols changed since is skipped when popped.
void BpeModel::merge_symbols_heap(std::vector<int32_t>& ids, std::vector<uint32_t>& ends) const {
  size_t n = ids.size();
  std::vector<int32_t> prev(n);
  std::vector<int32_t> next(n);
  std::vector<char> alive(n, 1);
  for (size_t i = 0; i < n; ++i) {
    prev[i] = static_cast<int32_t>(i) - 1;
    next[i] = i + 1 < n ? static_cast<int32_t>(i + 1) : -1;
  }
  struct Candidate {
    int32_t rank;
    int32_t pos;
    int32_t left;
    int32_t right;
    bool operator>(const Candidate& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
  };
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<>> queue;
  auto push = [&](int32_t pos) {
    int32_t right = next[pos];
    if (right < 0) return;
    if (const MergeTable::Slot* slot = merges_->find(ids[pos], ids[right])) queue.push({slot->rank, pos, ids[pos], ids[right]});
  };
  for (size_t i = 0; i + 1 < n; ++i) push(static_cast<int32_t>(i));
  while (!queue.empty()) {
    Candidate top = queue.top();
    queue.pop();
    int32_t right = next[top.pos];
    if (!alive[top.pos] || right < 0 || ids[top.pos] != top.left || ids[right] != top.right) continue;
    ids[top.pos] = merges_->find(top.left, top.right)->id;
    ends[top.pos] = ends[right];
    alive[right] = 0;
    next[top.pos] = next[right];
    if (next[right] >= 0) prev[next[right]] = top.pos;
    if (prev[top.pos] >= 0) push(prev[top.pos]);
    push(top.pos);
  }
  size_t k = 0;
  for (size_t i = 0; i < n; ++i) {
    if (!alive[i]) continue;
    ids[k] = ids[i];
    ends[k] = ends[i];
    ++k;
  }
  ids.resize(k);
  ends.resize(k);
}

}  // namespace flare::text
