// A context-free grammar over bytes: the one form every structured-output constraint compiles to
// (JSON Schema, regular expressions, GBNF, choices). Rules have alternatives; an alternative is a
// sequence of elements, each a byte set or a reference to a rule. The built Grammar is immutable
// and shared by every request that uses it; Matcher (matcher.h) runs it one byte at a time.
//
// GrammarBuilder makes the combinators (optional, star, bounded repeats) out of anonymous rules,
// interns equal byte sets and equal anonymous rules, enforces size limits as it goes (a hostile
// input fails fast instead of allocating), and on build() checks that every rule is defined,
// drops alternatives that can never finish, and refuses left recursion (which a top-down matcher
// cannot run).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "common/error.h"
#include "grammar/byte_set.h"

namespace flare::grammar {

// A constraint a request supplied is not usable: `path` names where (a JSON pointer-like path into
// a schema, or a position in a grammar or pattern), the message says why. Servers answer 400.
class GrammarError : public Error {
 public:
  GrammarError(std::string path, const std::string& message)
      : Error(ExitCode::usage, path.empty() ? message : path + ": " + message), path_(std::move(path)), reason_(message) {}
  const std::string& path() const { return path_; }
  const std::string& reason() const { return reason_; }

 private:
  std::string path_;
  std::string reason_;
};

struct Element {
  enum class Kind : std::uint8_t { bytes, rule };
  Kind kind = Kind::bytes;
  std::uint32_t id = 0;  // a byte set's or a rule's index
  bool operator==(const Element&) const = default;
};
using Sequence = std::vector<Element>;

struct GrammarLimits {
  std::size_t max_elements = std::size_t{1} << 18;  // elements over all alternatives
  std::size_t max_rules = std::size_t{1} << 16;
};

class Grammar {
 public:
  // The flattened code: each alternative's elements, then kEnd. A position is an index into it.
  static constexpr std::uint32_t kEnd = 0xFFFFFFFFu;
  static constexpr std::uint32_t kRuleBit = 0x80000000u;

  std::uint32_t code(std::uint32_t position) const { return code_[position]; }
  static bool is_rule(std::uint32_t element) { return element != kEnd && (element & kRuleBit); }
  static std::uint32_t rule_of(std::uint32_t element) { return element & ~kRuleBit; }
  const ByteSet& byte_set(std::uint32_t element) const { return byte_sets_[element]; }
  // The start positions of a rule's alternatives.
  std::span<const std::uint32_t> alternatives(std::uint32_t rule) const {
    return {alt_starts_.data() + rule_alt_begin_[rule], alt_starts_.data() + rule_alt_begin_[rule + 1]};
  }
  std::uint32_t root() const { return root_; }
  std::size_t n_rules() const { return rule_names_.size(); }
  std::size_t n_elements() const { return code_.size(); }
  const std::string& rule_name(std::uint32_t rule) const { return rule_names_[rule]; }
  // The fewest bytes that finish the alternative from `position` (its element included), and the
  // fewest a rule derives: what closing a text takes when the token budget runs out. Saturates at
  // kFarCost.
  static constexpr std::uint32_t kFarCost = 1u << 30;
  std::uint32_t min_rest(std::uint32_t position) const { return min_rest_[position]; }
  std::uint32_t min_length(std::uint32_t rule) const { return min_length_[rule]; }
  // The grammar in GBNF-like text (tests and debugging).
  std::string describe() const;

 private:
  friend class GrammarBuilder;
  std::vector<std::uint32_t> code_;
  std::vector<ByteSet> byte_sets_;
  std::vector<std::uint32_t> alt_starts_;
  std::vector<std::uint32_t> rule_alt_begin_;  // [n_rules + 1] into alt_starts_
  std::vector<std::string> rule_names_;
  std::vector<std::uint32_t> min_rest_;    // [code size]
  std::vector<std::uint32_t> min_length_;  // [n_rules]
  std::uint32_t root_ = 0;
  void compute_min_lengths();
};

class GrammarBuilder {
 public:
  explicit GrammarBuilder(GrammarLimits limits = {}) : limits_(limits) {}

  // A rule to define later (rules may refer to each other before they are defined).
  std::uint32_t declare(std::string name);
  void define(std::uint32_t rule, std::vector<Sequence> alternatives);
  bool defined(std::uint32_t rule) const { return rules_[rule].defined; }
  std::uint32_t add_rule(std::string name, std::vector<Sequence> alternatives);

  Element bytes(const ByteSet& set);
  static Element ref(std::uint32_t rule) { return {Element::Kind::rule, rule}; }
  Sequence literal(std::string_view text);
  // An anonymous rule of these alternatives (a single one-element alternative is returned as is).
  Element choice(std::vector<Sequence> alternatives);
  Element optional(const Sequence& body);
  Element star(const Sequence& body);
  Element plus(const Sequence& body);
  // body{min,max} (max absent: unbounded); fails with a GrammarError at `path` when too large.
  Sequence repeat(const Sequence& body, std::uint32_t min, std::optional<std::uint32_t> max, const std::string& path);

  std::size_t n_elements() const { return n_elements_; }
  // Throws GrammarError (at `path`) when the grammar is over its limits.
  void check_limits(const std::string& path) const;

  // Validates and flattens; `root` must be defined. `path` names the input in errors.
  Grammar build(std::uint32_t root, const std::string& path) const;

 private:
  struct Rule {
    std::string name;
    std::vector<Sequence> alternatives;
    bool defined = false;
  };
  std::string anonymous_key(const std::vector<Sequence>& alternatives) const;

  GrammarLimits limits_;
  std::vector<Rule> rules_;
  std::vector<ByteSet> byte_sets_;
  std::unordered_map<std::string, std::uint32_t> byte_set_index_;  // a set's words as bytes -> index
  std::unordered_map<std::string, std::uint32_t> anonymous_index_;  // alternatives -> rule
  std::size_t n_elements_ = 0;
};

void append(Sequence& to, const Sequence& more);

}  // namespace flare::grammar
