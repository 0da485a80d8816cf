// BPE model: vocabulary and merge table construction, word merging, cache (see bpe.h).
#include "text/bpe.h"

#include <algorithm>
#include <climits>
#include <queue>

#include <nlohmann/json.hpp>

#include "common/error.h"
#include "text/tokenizer_json.h"
#include "text/unicode.h"

namespace flare::text {

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

// Word -> ids, sharded so that concurrent encoders rarely contend.
class BpeModel::Cache {
 public:
  static constexpr size_t kShards = 16;
  static constexpr size_t kShardCapacity = 8192;
  static constexpr size_t kMaxWordBytes = 256;

  bool get(std::string_view word, std::vector<int32_t>& out) {
    Shard& shard = shard_of(word);
    std::lock_guard lock(shard.mutex);
    auto it = shard.map.find(word);
    if (it == shard.map.end()) return false;
    out.insert(out.end(), it->second.begin(), it->second.end());
    return true;
  }
  void put(std::string_view word, const int32_t* ids, size_t n_ids) {
    if (word.size() >= kMaxWordBytes) return;
    Shard& shard = shard_of(word);
    std::lock_guard lock(shard.mutex);
    if (shard.map.size() >= kShardCapacity) shard.map.clear();
    shard.map.emplace(std::string(word), std::vector<int32_t>(ids, ids + n_ids));
  }

 private:
  struct Shard {
    std::mutex mutex;
    std::unordered_map<std::string, std::vector<int32_t>, StringHash, std::equal_to<>> map;
  };
  Shard& shard_of(std::string_view word) { return shards_[StringHash{}(word) % kShards]; }
  std::array<Shard, kShards> shards_;
};

namespace {

std::pair<std::string, std::string> parse_merge(const nlohmann::json& merge, size_t rank) {
  if (merge.is_string()) {
    const auto& s = merge.get_ref<const std::string&>();
    size_t space = s.find(' ', 1);
    if (space == std::string::npos) fail_input("tokenizer.json: merge {} {:?} is not \"left right\"", rank, s);
    return {s.substr(0, space), s.substr(space + 1)};
  }
  if (merge.is_array() && merge.size() == 2 && merge[0].is_string() && merge[1].is_string()) {
    return {merge[0].get<std::string>(), merge[1].get<std::string>()};
  }
  fail_input("tokenizer.json: merge {} is neither \"left right\" nor [left, right]", rank);
}

}  // namespace

BpeModel::BpeModel(const nlohmann::json& model, bool byte_level) : byte_level_(byte_level), cache_(std::make_unique<Cache>()) {
  if (json_bool(model, "dropout", false) || (model.contains("dropout") && model["dropout"].is_number() &&
                                             model["dropout"].get<double>() != 0.0)) {
    fail_input("tokenizer.json: BPE dropout is not supported");
  }
  if (!json_string(model, "continuing_subword_prefix", "").empty() ||
      !json_string(model, "end_of_word_suffix", "").empty()) {
    fail_input("tokenizer.json: BPE continuing_subword_prefix / end_of_word_suffix are not supported");
  }
  ignore_merges_ = json_bool(model, "ignore_merges", false);
  byte_fallback_ = json_bool(model, "byte_fallback", false);
  fuse_unk_ = json_bool(model, "fuse_unk", false);

  auto vocab_it = model.find("vocab");
  if (vocab_it == model.end() || !vocab_it->is_object()) fail_input("tokenizer.json: BPE model has no vocab object");
  symbol_ids_.reserve(vocab_it->size());
  for (auto it = vocab_it->begin(); it != vocab_it->end(); ++it) {
    if (!it.value().is_number_integer()) fail_input("tokenizer.json: vocab id of {:?} is not an integer", it.key());
    int64_t id = it.value().get<int64_t>();
    if (id < 0 || id > INT32_MAX / 2) fail_input("tokenizer.json: vocab id {} of {:?} is out of range", id, it.key());
    if (static_cast<size_t>(id) >= tokens_.size()) tokens_.resize(static_cast<size_t>(id) + 1);
    tokens_[static_cast<size_t>(id)] = it.key();
  }
  if (byte_level_) token_bytes_.resize(tokens_.size());
  for (size_t id = 0; id < tokens_.size(); ++id) {
    if (tokens_[id].empty()) continue;
    std::string key = tokens_[id];
    if (byte_level_) {
      std::string bytes;
      // A token outside the byte alphabet cannot come out of a byte-level pre-tokenizer: it keeps
      // its id for decoding but is unreachable when encoding.
      if (!byte_level_decode(tokens_[id], bytes)) continue;
      token_bytes_[id] = bytes;
      key = std::move(bytes);
    }
    symbol_ids_.emplace(std::move(key), static_cast<int32_t>(id));
  }

  byte_ids_.fill(-1);
  fallback_ids_.fill(-1);
  for (int b = 0; b < 256; ++b) {
    if (byte_level_) {
      if (auto it = symbol_ids_.find(std::string_view(std::string(1, static_cast<char>(b)))); it != symbol_ids_.end())
        byte_ids_[b] = it->second;
    }
    if (byte_fallback_) {
      if (auto it = symbol_ids_.find(std::string_view(fmt::format("<0x{:02X}>", b))); it != symbol_ids_.end())
        fallback_ids_[b] = it->second;
    }
  }
  std::string unk = json_string(model, "unk_token", "");
  if (!unk.empty()) {
    auto it = symbol_ids_.find(std::string_view(byte_level_ ? std::string() : unk));
    if (byte_level_) {
      std::string bytes;
      if (byte_level_decode(unk, bytes)) it = symbol_ids_.find(std::string_view(bytes));
    }
    if (it == symbol_ids_.end()) fail_input("tokenizer.json: unk_token {:?} is not in the vocabulary", unk);
    unk_id_ = it->second;
  }

  const auto& merges = json_array(model, "merges", "BPE model");
  merges_ = std::make_unique<MergeTable>(merges.size());
  auto symbol_id = [&](const std::string& token, size_t rank) {
    std::string key = token;
    if (byte_level_) {
      key.clear();
      byte_level_decode(token, key);
    }
    auto it = symbol_ids_.find(std::string_view(key));
    if (it == symbol_ids_.end()) fail_input("tokenizer.json: merge {} uses {:?}, which is not in the vocabulary", rank, token);
    return it->second;
  };
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    auto [left, right] = parse_merge(merges[rank], rank);
    int32_t left_id = symbol_id(left, rank);
    int32_t right_id = symbol_id(right, rank);
    int32_t merged_id = symbol_id(left + right, rank);
    merges_->insert(left_id, right_id, static_cast<int32_t>(rank), merged_id);
  }
}

BpeModel::~BpeModel() = default;

void BpeModel::encode(std::string_view piece, std::vector<int32_t>& out) const {
  if (piece.empty()) return;
  if (ignore_merges_) {
    if (auto it = symbol_ids_.find(piece); it != symbol_ids_.end()) {
      out.push_back(it->second);
      return;
    }
  }
  if (cache_->get(piece, out)) return;
  size_t first = out.size();
  merge_word(piece, out);
  cache_->put(piece, out.data() + first, out.size() - first);
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
      auto it = symbol_ids_.find(word.substr(start, pos - start));
      ids.push_back(it == symbol_ids_.end() ? -1 : it->second);
      ends.push_back(static_cast<uint32_t>(pos));
    }
  }
  if (ids.size() > 64) {
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
  std::array<int32_t, 64> ranks;
  std::array<int32_t, 64> merged;
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
