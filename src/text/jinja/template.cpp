// Compiled chat template (see template.h).
#include "text/jinja/template.h"

#include "common/error.h"
#include "text/jinja/lexer.h"
#include "text/jinja/parser.h"

namespace flare::text::jinja {

Template Template::compile(std::string source, const CompileLimits& limits) {
  if (source.size() > limits.max_source_bytes) {
    fail_input("chat template is {} bytes, over the limit of {}", source.size(), limits.max_source_bytes);
  }
  Template compiled;
  compiled.source_ = std::make_shared<const std::string>(std::move(source));
  std::vector<Token> tokens = tokenize(*compiled.source_);
  ParseLimits parse_limits;
  parse_limits.max_depth = limits.max_depth;
  compiled.program_ = std::make_shared<const NodeList>(parse(tokens, *compiled.source_, parse_limits));
  return compiled;
}

std::string Template::render(const std::vector<std::pair<std::string, Value>>& variables,
                             const RenderLimits& limits) const {
  EnvPtr globals = make_global_environment();
  auto scope = std::make_shared<Environment>();
  scope->parent = globals;
  for (const auto& [name, value] : variables) scope->set(name, value);
  Interpreter interpreter(*source_, limits);
  return interpreter.run(*program_, scope);
}

}  // namespace flare::text::jinja
