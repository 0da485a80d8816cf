// What a request asks its output to follow, in one form for every API: a JSON Schema, any JSON
// object, a regular expression, a choice among strings, or a GBNF grammar. compile_constraint()
// turns it into a Grammar; its canonical text (cache_key) identifies equal constraints.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "grammar/grammar.h"

namespace flare::grammar {

struct ConstraintSpec {
  enum class Kind : std::uint8_t { json_schema, json_object, regex, choice, gbnf };
  Kind kind = Kind::json_object;
  nlohmann::ordered_json schema;     // json_schema
  std::string text;                  // regex, gbnf
  std::vector<std::string> choices;  // choice
  std::string path;                  // the request field it came from (errors name it)

  // Equal for specs that compile to the same grammar (the path aside).
  std::string cache_key() const;
};

// Limits on a choice: how many strings and how many bytes in all.
constexpr std::size_t kMaxChoices = 10000;
constexpr std::size_t kMaxChoiceBytes = std::size_t{1} << 20;

// Throws GrammarError naming spec.path (and the keyword or position within it).
Grammar compile_constraint(const ConstraintSpec& spec);

// Exactly one of the strings.
Grammar choice_grammar(const std::vector<std::string>& choices, const std::string& path);

}  // namespace flare::grammar
