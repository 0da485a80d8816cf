// Matcher (matcher.h): interned stacks, expansion through rules, one byte at a time.
#include "grammar/matcher.h"

#include <algorithm>

namespace flare::grammar {
namespace {

constexpr std::uint64_t pair_key(std::uint32_t position, std::uint32_t parent) {
  return (std::uint64_t(position) << 32) | parent;
}

constexpr std::uint32_t kUnknownCost = 0xFFFFFFFFu;

inline std::size_t hash_key(std::uint64_t key) {
  key ^= key >> 33;
  key *= 0xff51afd7ed558ccdULL;
  key ^= key >> 33;
  return std::size_t(key);
}

}  // namespace

Matcher::Matcher(std::shared_ptr<const Grammar> grammar) : grammar_(std::move(grammar)) {
  index_keys_.assign(1024, 0);
  index_values_.assign(1024, 0);
  visited_keys_.assign(256, 0);
  visited_stamp_.assign(256, 0);
  start_step();
  for (auto start : grammar_->alternatives(grammar_->root())) expand(start, kRoot, state_);
  std::sort(state_.leaves.begin(), state_.leaves.end());
}

void Matcher::grow_index() {
  std::vector<std::uint64_t> keys(index_keys_.size() * 2, 0);
  std::vector<std::uint32_t> values(keys.size(), 0);
  const std::size_t mask = keys.size() - 1;
  for (std::size_t i = 0; i < index_keys_.size(); ++i) {
    if (index_keys_[i] == 0) continue;
    std::size_t slot = hash_key(index_keys_[i]) & mask;
    while (keys[slot] != 0) slot = (slot + 1) & mask;
    keys[slot] = index_keys_[i];
    values[slot] = index_values_[i];
  }
  index_keys_ = std::move(keys);
  index_values_ = std::move(values);
}

std::uint32_t Matcher::intern(std::uint32_t position, std::uint32_t parent) {
  if ((nodes_.size() + 1) * 2 > index_keys_.size()) grow_index();
  const std::uint64_t key = pair_key(position, parent) + 1;
  const std::size_t mask = index_keys_.size() - 1;
  std::size_t slot = hash_key(key) & mask;
  while (index_keys_[slot] != 0) {
    if (index_keys_[slot] == key) return index_values_[slot];
    slot = (slot + 1) & mask;
  }
  const auto id = static_cast<std::uint32_t>(nodes_.size());
  nodes_.push_back({position, parent});
  index_keys_[slot] = key;
  index_values_[slot] = id;
  return id;
}

void Matcher::start_step() {
  if (++stamp_ == 0) {  // the stamps wrapped: clear them once
    std::fill(visited_stamp_.begin(), visited_stamp_.end(), 0);
    stamp_ = 1;
  }
  n_visited_ = 0;
}

bool Matcher::visit(std::uint64_t key) {
  if ((n_visited_ + 1) * 2 > visited_keys_.size()) {
    // Grow, keeping this step's entries.
    std::vector<std::uint64_t> keys(visited_keys_.size() * 2, 0);
    std::vector<std::uint32_t> stamps(keys.size(), 0);
    const std::size_t mask = keys.size() - 1;
    for (std::size_t i = 0; i < visited_keys_.size(); ++i) {
      if (visited_stamp_[i] != stamp_) continue;
      std::size_t slot = hash_key(visited_keys_[i]) & mask;
      while (stamps[slot] == stamp_) slot = (slot + 1) & mask;
      keys[slot] = visited_keys_[i];
      stamps[slot] = stamp_;
    }
    visited_keys_ = std::move(keys);
    visited_stamp_ = std::move(stamps);
  }
  const std::size_t mask = visited_keys_.size() - 1;
  std::size_t slot = hash_key(key) & mask;
  while (visited_stamp_[slot] == stamp_) {
    if (visited_keys_[slot] == key) return false;
    slot = (slot + 1) & mask;
  }
  visited_keys_[slot] = key;
  visited_stamp_[slot] = stamp_;
  ++n_visited_;
  return true;
}

void Matcher::expand(std::uint32_t position, std::uint32_t parent, MatchState& out) {
  const Grammar& g = *grammar_;
  work_.clear();
  work_.emplace_back(position, parent);
  while (!work_.empty()) {
    const auto [p, par] = work_.back();
    work_.pop_back();
    if (!visit(pair_key(p, par))) continue;
    const std::uint32_t e = g.code(p);
    if (e == Grammar::kEnd) {
      if (par == kRoot) {
        out.accepting = true;
      } else {
        work_.emplace_back(nodes_[par].position, nodes_[par].parent);
      }
    } else if (Grammar::is_rule(e)) {
      // Where the caller continues; a reference in tail position continues where the caller would.
      const std::uint32_t next = p + 1;
      const std::uint32_t continuation = g.code(next) == Grammar::kEnd ? par : intern(next, par);
      for (auto start : g.alternatives(Grammar::rule_of(e))) work_.emplace_back(start, continuation);
    } else {
      out.leaves.push_back(intern(p, par));
    }
  }
}

void Matcher::step(const MatchState& from, std::uint8_t byte, MatchState& to) {
  to.leaves.clear();
  to.accepting = false;
  start_step();
  const Grammar& g = *grammar_;
  for (auto leaf : from.leaves) {
    const Node node = nodes_[leaf];
    if (g.byte_set(g.code(node.position)).contains(byte)) expand(node.position + 1, node.parent, to);
  }
  if (to.leaves.size() > 1) std::sort(to.leaves.begin(), to.leaves.end());
}

bool Matcher::advance(std::uint8_t byte) {
  step(state_, byte, scratch_);
  if (scratch_.dead()) return false;
  std::swap(state_, scratch_);
  return true;
}

bool Matcher::advance(std::string_view bytes) {
  MatchState saved = state_;
  for (char c : bytes) {
    if (!advance(static_cast<std::uint8_t>(c))) {
      state_ = std::move(saved);
      return false;
    }
  }
  return true;
}

std::uint32_t Matcher::intern_state(const MatchState& state) {
  std::string key(1, state.accepting ? 'A' : 'a');
  key.append(reinterpret_cast<const char*>(state.leaves.data()), state.leaves.size() * sizeof(std::uint32_t));
  auto [it, inserted] = state_index_.emplace(std::move(key), static_cast<std::uint32_t>(states_.size()));
  if (inserted) {
    states_.push_back(state);
    state_cost_.push_back(kUnknownCost);
  }
  return it->second;
}

std::uint32_t Matcher::transition(std::uint32_t state, std::uint8_t byte) {
  if ((n_transitions_ + 1) * 2 > transition_keys_.size()) {
    std::vector<std::uint64_t> keys(std::max<std::size_t>(1024, transition_keys_.size() * 2), 0);
    std::vector<std::uint32_t> values(keys.size(), 0);
    const std::size_t mask = keys.size() - 1;
    for (std::size_t i = 0; i < transition_keys_.size(); ++i) {
      if (transition_keys_[i] == 0) continue;
      std::size_t slot = hash_key(transition_keys_[i]) & mask;
      while (keys[slot] != 0) slot = (slot + 1) & mask;
      keys[slot] = transition_keys_[i];
      values[slot] = transition_values_[i];
    }
    transition_keys_ = std::move(keys);
    transition_values_ = std::move(values);
  }
  const std::uint64_t key = ((std::uint64_t(state) << 8) | byte) + 1;
  const std::size_t mask = transition_keys_.size() - 1;
  std::size_t slot = hash_key(key) & mask;
  while (transition_keys_[slot] != 0) {
    if (transition_keys_[slot] == key) return transition_values_[slot];
    slot = (slot + 1) & mask;
  }
  step(states_[state], byte, step_scratch_);
  const std::uint32_t next = step_scratch_.dead() ? kDeadState : intern_state(step_scratch_);
  // intern_state may not rehash the table: the slot found above is still the free one.
  transition_keys_[slot] = key;
  transition_values_[slot] = next;
  ++n_transitions_;
  return next;
}

std::uint32_t Matcher::interned_cost(std::uint32_t state) {
  if (state_cost_[state] == kUnknownCost) state_cost_[state] = completion_cost(states_[state]);
  return state_cost_[state];
}

std::uint32_t Matcher::node_cost(std::uint32_t node) {
  // A stack's cost: what its top needs to finish its alternative, then each caller's rest.
  if (node_cost_.size() < nodes_.size()) node_cost_.resize(nodes_.size(), kUnknownCost);
  cost_chain_.clear();
  std::uint32_t id = node;
  std::uint64_t base = 0;
  for (; id != kRoot; id = nodes_[id].parent) {
    if (node_cost_[id] != kUnknownCost) {
      base = node_cost_[id];
      break;
    }
    cost_chain_.push_back(id);
  }
  for (auto it = cost_chain_.rbegin(); it != cost_chain_.rend(); ++it) {
    base = std::min<std::uint64_t>(base + grammar_->min_rest(nodes_[*it].position), Grammar::kFarCost);
    node_cost_[*it] = static_cast<std::uint32_t>(base);
  }
  return static_cast<std::uint32_t>(base);
}

std::uint32_t Matcher::completion_cost(const MatchState& state) {
  if (state.accepting) return 0;
  std::uint32_t best = Grammar::kFarCost;
  for (auto leaf : state.leaves) best = std::min(best, node_cost(leaf));
  return best;
}

std::uint32_t Matcher::max_stack_cost(const MatchState& state) {
  std::uint32_t most = 0;
  for (auto leaf : state.leaves) most = std::max(most, node_cost(leaf));
  return most;
}

std::string Matcher::state_key(const MatchState& state) const {
  std::vector<std::string> stacks;
  stacks.reserve(state.leaves.size());
  for (auto leaf : state.leaves) {
    std::string stack;
    for (std::uint32_t id = leaf; id != kRoot; id = nodes_[id].parent) {
      const std::uint32_t p = nodes_[id].position;
      stack.append(reinterpret_cast<const char*>(&p), sizeof p);
    }
    stacks.push_back(std::move(stack));
  }
  std::sort(stacks.begin(), stacks.end());
  std::string key(1, state.accepting ? 'A' : 'a');
  for (const auto& s : stacks) {
    const auto n = static_cast<std::uint32_t>(s.size());
    key.append(reinterpret_cast<const char*>(&n), sizeof n);
    key += s;
  }
  return key;
}

void Matcher::compact() {
  node_cost_.clear();
  states_.clear();
  state_index_.clear();
  state_cost_.clear();
  std::fill(transition_keys_.begin(), transition_keys_.end(), 0);
  n_transitions_ = 0;
  std::vector<Node> old = std::move(nodes_);
  nodes_.clear();
  std::fill(index_keys_.begin(), index_keys_.end(), 0);
  std::vector<std::uint32_t> remap(old.size(), kRoot);
  std::vector<std::uint32_t> chain;
  for (auto& leaf : state_.leaves) {
    chain.clear();
    for (std::uint32_t id = leaf; id != kRoot && remap[id] == kRoot; id = old[id].parent) chain.push_back(id);
    for (auto it = chain.rbegin(); it != chain.rend(); ++it) {
      const std::uint32_t parent = old[*it].parent == kRoot ? kRoot : remap[old[*it].parent];
      remap[*it] = intern(old[*it].position, parent);
    }
    leaf = remap[leaf];
  }
  std::sort(state_.leaves.begin(), state_.leaves.end());
}

}  // namespace flare::grammar
