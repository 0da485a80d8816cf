// Runs a Grammar (grammar.h) over bytes: a pushdown recognizer whose state is a set of stacks.
// Each stack is a chain of interned nodes {position, parent}: the top's position is the byte set
// to match next, each parent holds where its rule continues once the rule below ends. Equal
// stacks are one node chain, so a state is a short sorted list of node ids and copying it is
// cheap; references in tail position replace their caller (stacks stay flat across repetitions).
//
// Used two ways: advance() moves the choice's own state by the bytes of each accepted token, and
// step() is the pure transition the token masker (token_masker.h) runs down a vocabulary trie.
// Threads: one Matcher per constrained choice, used by one thread at a time.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "grammar/grammar.h"

namespace flare::grammar {

struct MatchState {
  std::vector<std::uint32_t> leaves;  // stack nodes whose position is a byte set, sorted
  bool accepting = false;             // the text so far is a complete match
  bool dead() const { return leaves.empty() && !accepting; }
};

class Matcher {
 public:
  static constexpr std::uint32_t kRoot = 0xFFFFFFFFu;

  explicit Matcher(std::shared_ptr<const Grammar> grammar);

  const Grammar& grammar() const { return *grammar_; }
  const std::shared_ptr<const Grammar>& shared_grammar() const { return grammar_; }
  const MatchState& state() const { return state_; }
  // Reads one byte; false (state unchanged) when no match continues with it.
  bool advance(std::uint8_t byte);
  // Reads bytes in order; false (state unchanged) when one is rejected.
  bool advance(std::string_view bytes);
  bool can_end() const { return state_.accepting; }
  // A complete match that nothing may extend.
  bool complete() const { return state_.accepting && state_.leaves.empty(); }

  // `to` = `from` after `byte` (to.dead() when rejected). `from` must come from this matcher.
  void step(const MatchState& from, std::uint8_t byte, MatchState& to);
  // The fewest bytes that complete a match from `state` (0 when it already is one);
  // Grammar::kFarCost or more when out of reach. `state` must come from this matcher.
  std::uint32_t completion_cost(const MatchState& state);
  // The most bytes any one of its stacks needs (a bound on the cost after any next byte, plus one).
  std::uint32_t max_stack_cost(const MatchState& state);
  // Interned states and a memo of their transitions: the token masker walks a vocabulary trie
  // whose paths revisit the same few states (inside a string, every character leads back to the
  // state it left), so each step is one table lookup. Ids stay valid until compact().
  static constexpr std::uint32_t kDeadState = 0xFFFFFFFFu;
  std::uint32_t intern_state(const MatchState& state);
  const MatchState& interned(std::uint32_t id) const { return states_[id]; }
  // The interned state after `byte`, or kDeadState when the byte is rejected.
  std::uint32_t transition(std::uint32_t state, std::uint8_t byte);
  // completion_cost of an interned state, memoised.
  std::uint32_t interned_cost(std::uint32_t state);

  // A key equal for states (of any matcher of this grammar) that accept exactly the same texts.
  std::string state_key(const MatchState& state) const;
  // Nodes held; compact() drops those no longer reachable from state().
  std::size_t n_nodes() const { return nodes_.size(); }
  std::size_t n_states() const { return states_.size(); }
  void compact();

 private:
  struct Node {
    std::uint32_t position;
    std::uint32_t parent;
  };
  std::uint32_t intern(std::uint32_t position, std::uint32_t parent);
  void expand(std::uint32_t position, std::uint32_t parent, MatchState& out);
  bool visit(std::uint64_t key);  // false when seen in this step
  void start_step();
  void grow_index();
  std::uint32_t node_cost(std::uint32_t node);

  std::shared_ptr<const Grammar> grammar_;
  MatchState state_;
  std::vector<Node> nodes_;
  // Open addressing: node key (position << 32 | parent) + 1 -> node id; 0 is empty.
  std::vector<std::uint64_t> index_keys_;
  std::vector<std::uint32_t> index_values_;
  // The (position, parent) pairs expanded in the current step, stamped to clear in O(1).
  std::vector<std::uint64_t> visited_keys_;
  std::vector<std::uint32_t> visited_stamp_;
  std::uint32_t stamp_ = 0;
  std::size_t n_visited_ = 0;
  std::vector<std::pair<std::uint32_t, std::uint32_t>> work_;  // expansion worklist
  MatchState scratch_;
  std::vector<MatchState> states_;                              // interned
  std::unordered_map<std::string, std::uint32_t> state_index_;  // leaves and accepting -> id
  std::vector<std::uint32_t> state_cost_;
  // Open addressing: (state << 8 | byte) + 1 -> next state id (kDeadState: rejected); 0 empty.
  std::vector<std::uint64_t> transition_keys_;
  std::vector<std::uint32_t> transition_values_;
  std::size_t n_transitions_ = 0;
  MatchState step_scratch_;
  std::vector<std::uint32_t> node_cost_;  // per node, memoised (kUnknownCost: not yet)
  std::vector<std::uint32_t> cost_chain_;
};

}  // namespace flare::grammar
