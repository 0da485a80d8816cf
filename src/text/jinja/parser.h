// Template parser: tokens to a syntax tree, with the grammar and operator precedence of
// @huggingface/jinja. Errors are flare::Error with line and column.
#pragma once

#include <string_view>
#include <vector>

#include "text/jinja/ast.h"
#include "text/jinja/lexer.h"

namespace flare::text::jinja {

struct ParseLimits {
  int max_depth = 256;  // depth of the syntax tree (blocks, expressions, operator chains)
};

// `source` is only used to turn offsets into line and column in error messages.
NodeList parse(const std::vector<Token>& tokens, std::string_view source, const ParseLimits& limits = {});

}  // namespace flare::text::jinja
