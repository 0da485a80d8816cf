// GrammarBuilder and Grammar (grammar.h).
#include "grammar/grammar.h"

#include <algorithm>
#include <cstring>
#include <functional>
#include <queue>

#include <fmt/format.h>

namespace flare::grammar {

void append(Sequence& to, const Sequence& more) { to.insert(to.end(), more.begin(), more.end()); }

std::uint32_t GrammarBuilder::declare(std::string name) {
  if (rules_.size() >= limits_.max_rules) {
    throw GrammarError("", fmt::format("the grammar needs more than {} rules", limits_.max_rules));
  }
  rules_.push_back(Rule{std::move(name), {}, false});
  return static_cast<std::uint32_t>(rules_.size() - 1);
}

void GrammarBuilder::define(std::uint32_t rule, std::vector<Sequence> alternatives) {
  for (const auto& alternative : alternatives) n_elements_ += alternative.size() + 1;
  rules_[rule].alternatives = std::move(alternatives);
  rules_[rule].defined = true;
}

std::uint32_t GrammarBuilder::add_rule(std::string name, std::vector<Sequence> alternatives) {
  const auto rule = declare(std::move(name));
  define(rule, std::move(alternatives));
  return rule;
}

void GrammarBuilder::check_limits(const std::string& path) const {
  if (n_elements_ > limits_.max_elements) {
    throw GrammarError(path, fmt::format("the constraint is too large (over {} grammar elements)", limits_.max_elements));
  }
}

Element GrammarBuilder::bytes(const ByteSet& set) {
  std::string key(sizeof(std::uint64_t) * 4, '\0');
  std::memcpy(key.data(), set.words().data(), key.size());
  auto [it, inserted] = byte_set_index_.emplace(std::move(key), static_cast<std::uint32_t>(byte_sets_.size()));
  if (inserted) byte_sets_.push_back(set);
  return {Element::Kind::bytes, it->second};
}

Sequence GrammarBuilder::literal(std::string_view text) {
  Sequence sequence;
  sequence.reserve(text.size());
  for (char c : text) sequence.push_back(bytes(ByteSet::of(static_cast<std::uint8_t>(c))));
  return sequence;
}

std::string GrammarBuilder::anonymous_key(const std::vector<Sequence>& alternatives) const {
  std::string key;
  for (const auto& alternative : alternatives) {
    for (const auto& element : alternative) {
      const std::uint32_t word = element.id | (element.kind == Element::Kind::rule ? Grammar::kRuleBit : 0);
      key.append(reinterpret_cast<const char*>(&word), sizeof word);
    }
    const std::uint32_t end = Grammar::kEnd;
    key.append(reinterpret_cast<const char*>(&end), sizeof end);
  }
  return key;
}

Element GrammarBuilder::choice(std::vector<Sequence> alternatives) {
  if (alternatives.size() == 1 && alternatives[0].size() == 1) return alternatives[0][0];
  auto key = anonymous_key(alternatives);
  if (auto it = anonymous_index_.find(key); it != anonymous_index_.end()) return ref(it->second);
  const auto rule = add_rule("", std::move(alternatives));
  anonymous_index_.emplace(std::move(key), rule);
  return ref(rule);
}

Element GrammarBuilder::optional(const Sequence& body) { return choice({body, {}}); }

Element GrammarBuilder::star(const Sequence& body) {
  // R ::= body R | empty: the reference sits in tail position, so the matcher's stacks stay flat.
  const auto rule = declare("");
  Sequence loop = body;
  loop.push_back(ref(rule));
  define(rule, {std::move(loop), {}});
  return ref(rule);
}

Element GrammarBuilder::plus(const Sequence& body) {
  Sequence once = body;
  once.push_back(star(body));
  return choice({std::move(once)});
}

Sequence GrammarBuilder::repeat(const Sequence& body, std::uint32_t min, std::optional<std::uint32_t> max,
                                const std::string& path) {
  if (max && *max < min) throw GrammarError(path, fmt::format("the repetition {{{},{}}} has max below min", min, *max));
  const std::size_t size = body.size() + 1;
  const std::size_t optional_copies = max ? *max - min : 1;
  if (std::size_t(min) * size + optional_copies * (size + 1) + n_elements_ > limits_.max_elements) {
    throw GrammarError(path, fmt::format("the repetition {{{},{}}} makes the constraint too large (over {} grammar elements)",
                                         min, max ? std::to_string(*max) : "", limits_.max_elements));
  }
  Sequence out;
  if (!body.empty()) {
    for (std::uint32_t i = 0; i < min; ++i) append(out, body);
  }
  if (body.empty()) return out;
  if (!max) {
    out.push_back(star(body));
  } else if (*max > min) {
    // (body (body (...)?)?)? from the inside out: each level one rule of two alternatives.
    Element tail = optional(body);
    for (std::uint32_t i = min + 1; i < *max; ++i) {
      Sequence level = body;
      level.push_back(tail);
      tail = optional(level);
    }
    out.push_back(tail);
  }
  return out;
}

namespace {

// Rules that can derive some finite text: a fixed point.
std::vector<bool> productive_rules(const std::vector<std::vector<Sequence>>& rules) {
  std::vector<bool> productive(rules.size(), false);
  for (bool changed = true; changed;) {
    changed = false;
    for (std::size_t r = 0; r < rules.size(); ++r) {
      if (productive[r]) continue;
      for (const auto& alternative : rules[r]) {
        const bool ok = std::all_of(alternative.begin(), alternative.end(), [&](const Element& e) {
          return e.kind == Element::Kind::bytes || productive[e.id];
        });
        if (ok) {
          productive[r] = true;
          changed = true;
          break;
        }
      }
    }
  }
  return productive;
}

std::vector<bool> nullable_rules(const std::vector<std::vector<Sequence>>& rules) {
  std::vector<bool> nullable(rules.size(), false);
  for (bool changed = true; changed;) {
    changed = false;
    for (std::size_t r = 0; r < rules.size(); ++r) {
      if (nullable[r]) continue;
      for (const auto& alternative : rules[r]) {
        const bool ok = std::all_of(alternative.begin(), alternative.end(), [&](const Element& e) {
          return e.kind == Element::Kind::rule && nullable[e.id];
        });
        if (ok) {
          nullable[r] = true;
          changed = true;
          break;
        }
      }
    }
  }
  return nullable;
}

// Left recursion the matcher cannot run: a cycle of rules each reached at the left edge of the
// previous one (after nullable elements only), where some step is not in tail position (a tail
// reference replaces its caller, so a cycle of those only revisits a state the matcher has seen).
// Returns a rule on such a cycle, or -1.
std::int64_t find_left_recursion(const std::vector<std::vector<Sequence>>& rules, const std::vector<bool>& nullable) {
  struct Edge {
    std::uint32_t to;
    bool tail;
  };
  std::vector<std::vector<Edge>> edges(rules.size());
  for (std::size_t r = 0; r < rules.size(); ++r) {
    for (const auto& alternative : rules[r]) {
      for (std::size_t i = 0; i < alternative.size(); ++i) {
        const Element& e = alternative[i];
        if (e.kind == Element::Kind::bytes) break;
        // Tail: nothing after it but nullable rules? No: only an element that is last is a tail call.
        edges[r].push_back({e.id, i + 1 == alternative.size()});
        if (!nullable[e.id]) break;
      }
    }
  }
  // Tarjan's strongly connected components, iteratively.
  const std::size_t n = rules.size();
  std::vector<std::int64_t> index(n, -1), low(n, 0), component(n, -1);
  std::vector<bool> on_stack(n, false);
  std::vector<std::uint32_t> stack;
  std::int64_t next_index = 0, n_components = 0;
  struct Frame {
    std::uint32_t rule;
    std::size_t edge;
  };
  for (std::uint32_t start = 0; start < n; ++start) {
    if (index[start] >= 0) continue;
    std::vector<Frame> frames{{start, 0}};
    index[start] = low[start] = next_index++;
    stack.push_back(start);
    on_stack[start] = true;
    while (!frames.empty()) {
      Frame& f = frames.back();
      if (f.edge < edges[f.rule].size()) {
        const auto to = edges[f.rule][f.edge++].to;
        if (index[to] < 0) {
          index[to] = low[to] = next_index++;
          stack.push_back(to);
          on_stack[to] = true;
          frames.push_back({to, 0});
        } else if (on_stack[to]) {
          low[f.rule] = std::min(low[f.rule], index[to]);
        }
        continue;
      }
      const auto rule = f.rule;
      frames.pop_back();
      if (!frames.empty()) low[frames.back().rule] = std::min(low[frames.back().rule], low[rule]);
      if (low[rule] == index[rule]) {
        std::uint32_t member;
        do {
          member = stack.back();
          stack.pop_back();
          on_stack[member] = false;
          component[member] = n_components;
        } while (member != rule);
        ++n_components;
      }
    }
  }
  for (std::size_t r = 0; r < n; ++r) {
    for (const Edge& e : edges[r]) {
      if (!e.tail && component[e.to] == component[r]) return std::int64_t(r);
    }
  }
  return -1;
}

}  // namespace

Grammar GrammarBuilder::build(std::uint32_t root, const std::string& path) const {
  check_limits(path);
  std::vector<std::vector<Sequence>> rules(rules_.size());
  for (std::size_t r = 0; r < rules_.size(); ++r) {
    if (!rules_[r].defined) {
      throw GrammarError(path, fmt::format("rule '{}' is used but never defined", rules_[r].name));
    }
    rules[r] = rules_[r].alternatives;
  }
  const auto productive = productive_rules(rules);
  if (!productive[root]) throw GrammarError(path, "the grammar matches no finite text");
  // Alternatives that can never finish are dead ends for a matcher that only looks ahead one byte.
  for (auto& alternatives : rules) {
    std::erase_if(alternatives, [&](const Sequence& alternative) {
      return std::any_of(alternative.begin(), alternative.end(),
                         [&](const Element& e) { return e.kind == Element::Kind::rule && !productive[e.id]; });
    });
  }
  const auto nullable = nullable_rules(rules);
  if (auto r = find_left_recursion(rules, nullable); r >= 0) {
    const auto& name = rules_[std::size_t(r)].name;
    throw GrammarError(path, name.empty() ? std::string("the grammar is left-recursive (a repetition of something that can be empty, "
                                                        "or a rule that begins with itself)")
                                          : fmt::format("rule '{}' is left-recursive (it can begin with itself)", name));
  }

  Grammar g;
  g.byte_sets_ = byte_sets_;
  g.root_ = root;
  g.rule_alt_begin_.push_back(0);
  for (std::size_t r = 0; r < rules.size(); ++r) {
    g.rule_names_.push_back(rules_[r].name.empty() ? fmt::format("_{}", r) : rules_[r].name);
    for (const auto& alternative : rules[r]) {
      g.alt_starts_.push_back(static_cast<std::uint32_t>(g.code_.size()));
      for (const auto& e : alternative) {
        g.code_.push_back(e.kind == Element::Kind::rule ? (e.id | Grammar::kRuleBit) : e.id);
      }
      g.code_.push_back(Grammar::kEnd);
    }
    g.rule_alt_begin_.push_back(static_cast<std::uint32_t>(g.alt_starts_.size()));
  }
  g.compute_min_lengths();
  return g;
}

void Grammar::compute_min_lengths() {
  // Shortest derivations, Knuth's generalisation of Dijkstra's algorithm: an alternative's length
  // is known once every rule it uses is final; the shortest known one finalises its rule.
  const auto n = static_cast<std::uint32_t>(n_rules());
  min_length_.assign(n, kFarCost);
  min_rest_.assign(code_.size(), kFarCost);
  std::vector<bool> final(n, false);
  std::vector<std::uint32_t> alt_rule(alt_starts_.size());
  std::vector<std::uint32_t> pending(alt_starts_.size(), 0);  // rule elements not yet final
  std::vector<std::uint64_t> known(alt_starts_.size(), 0);    // the lengths of the final ones
  std::vector<std::vector<std::uint32_t>> users(n);           // rule -> alternatives using it, once per use
  using Entry = std::pair<std::uint64_t, std::uint32_t>;      // (length, rule)
  std::priority_queue<Entry, std::vector<Entry>, std::greater<>> queue;
  for (std::uint32_t r = 0; r < n; ++r) {
    for (auto a = rule_alt_begin_[r]; a < rule_alt_begin_[r + 1]; ++a) {
      alt_rule[a] = r;
      for (auto p = alt_starts_[a]; code_[p] != kEnd; ++p) {
        if (is_rule(code_[p])) {
          ++pending[a];
          users[rule_of(code_[p])].push_back(a);
        } else {
          ++known[a];
        }
      }
      if (pending[a] == 0) queue.emplace(known[a], r);
    }
  }
  while (!queue.empty()) {
    const auto [length, r] = queue.top();
    queue.pop();
    if (final[r]) continue;
    final[r] = true;
    min_length_[r] = static_cast<std::uint32_t>(std::min<std::uint64_t>(length, kFarCost));
    for (auto a : users[r]) {
      known[a] += min_length_[r];
      if (--pending[a] == 0) queue.emplace(known[a], alt_rule[a]);
    }
  }
  auto element_length = [&](std::uint32_t e) { return is_rule(e) ? min_length_[rule_of(e)] : 1u; };
  // Suffix sums within each alternative, from its end back.
  for (std::size_t p = code_.size(); p-- > 0;) {
    if (code_[p] == kEnd) {
      min_rest_[p] = 0;
    } else {
      min_rest_[p] = static_cast<std::uint32_t>(std::min<std::uint64_t>(std::uint64_t(element_length(code_[p])) + min_rest_[p + 1], kFarCost));
    }
  }
}

namespace {

std::string describe_set(const ByteSet& set) {
  std::string out = "[";
  auto put = [&](unsigned b) {
    if (b >= 0x21 && b < 0x7f && b != ']' && b != '\\' && b != '-' && b != '^') {
      out += char(b);
    } else {
      out += fmt::format("\\x{:02X}", b);
    }
  };
  for (unsigned b = 0; b < 256;) {
    if (!set.contains(std::uint8_t(b))) {
      ++b;
      continue;
    }
    unsigned e = b;
    while (e + 1 < 256 && set.contains(std::uint8_t(e + 1))) ++e;
    put(b);
    if (e > b) {
      out += '-';
      put(e);
    }
    b = e + 1;
  }
  return out + "]";
}

}  // namespace

std::string Grammar::describe() const {
  std::string out;
  for (std::uint32_t r = 0; r < n_rules(); ++r) {
    out += rule_names_[r] + " ::=";
    bool first = true;
    for (auto start : alternatives(r)) {
      out += first ? " " : " | ";
      first = false;
      std::string items;
      for (auto p = start; code_[p] != kEnd; ++p) {
        if (!items.empty()) items += ' ';
        items += is_rule(code_[p]) ? rule_names_[rule_of(code_[p])] : describe_set(byte_sets_[code_[p]]);
      }
      out += items.empty() ? "\"\"" : items;
    }
    out += '\n';
  }
  return out;
}

}  // namespace flare::grammar
