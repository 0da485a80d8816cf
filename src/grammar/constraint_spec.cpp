// ConstraintSpec compilation (constraint_spec.h).
#include "grammar/constraint_spec.h"

#include <fmt/format.h>

#include "grammar/gbnf.h"
#include "grammar/json_schema_grammar.h"
#include "grammar/regex.h"

namespace flare::grammar {

std::string ConstraintSpec::cache_key() const {
  std::string key(1, char('0' + int(kind)));
  key += '\n';
  switch (kind) {
    case Kind::json_schema:
      key += schema.dump();
      break;
    case Kind::json_object:
      break;
    case Kind::regex:
    case Kind::gbnf:
      key += text;
      break;
    case Kind::choice:
      key += nlohmann::json(choices).dump();
      break;
  }
  return key;
}

Grammar choice_grammar(const std::vector<std::string>& choices, const std::string& path) {
  if (choices.empty()) throw GrammarError(path, "must list at least one string");
  if (choices.size() > kMaxChoices) throw GrammarError(path, fmt::format("lists more than {} strings", kMaxChoices));
  std::size_t bytes = 0;
  for (const auto& c : choices) bytes += c.size();
  if (bytes > kMaxChoiceBytes) throw GrammarError(path, fmt::format("holds more than {} bytes of strings", kMaxChoiceBytes));
  GrammarBuilder builder;
  std::vector<Sequence> alternatives;
  alternatives.reserve(choices.size());
  for (const auto& c : choices) alternatives.push_back(builder.literal(c));
  const auto root = builder.add_rule("root", std::move(alternatives));
  return builder.build(root, path);
}

Grammar compile_constraint(const ConstraintSpec& spec) {
  switch (spec.kind) {
    case ConstraintSpec::Kind::json_schema:
      return json_schema_grammar(spec.schema, spec.path);
    case ConstraintSpec::Kind::json_object:
      return json_object_grammar();
    case ConstraintSpec::Kind::regex:
      return regex_grammar(spec.text, spec.path);
    case ConstraintSpec::Kind::choice:
      return choice_grammar(spec.choices, spec.path);
    case ConstraintSpec::Kind::gbnf:
      return gbnf_grammar(spec.text, spec.path);
  }
  throw GrammarError(spec.path, "unknown constraint kind");
}

}  // namespace flare::grammar
