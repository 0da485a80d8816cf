// GBNF, llama.cpp's grammar format, as a Grammar: rules `name ::= alternatives`, string literals
// with escapes, character classes ([a-z], [^"\\]), '.', groups, and the postfix operators
// * + ? {m} {m,} {m,n}; '#' comments; a rule ends at a newline outside parentheses (a newline may
// follow '|'). The start rule is `root`. Literals and classes are Unicode characters written as
// UTF-8. Errors name the line and column.
#pragma once

#include <string>
#include <string_view>

#include "grammar/grammar.h"

namespace flare::grammar {

Grammar gbnf_grammar(std::string_view text, const std::string& path);

}  // namespace flare::grammar
