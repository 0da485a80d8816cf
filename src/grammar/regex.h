// Regular expressions as grammar rules: the syntax vLLM's, SGLang's and llama.cpp's users send
// (and JSON Schema's "pattern"), the common subset of ECMAScript, PCRE and Python: literals,
// '.', classes with ranges and negation, \d \w \s and their negations, \xHH \uHHHH \u{H..}
// escapes, groups ((...), (?:...), (?<name>...), (?P<name>...)), alternation, and the quantifiers
// * + ? {n} {n,} {n,m} (lazy and possessive forms match the same texts). '^' and '$' are accepted
// at the pattern's ends. Backreferences, lookaround, word boundaries and inline flags cannot be
// expressed by a context-free grammar over the output and are refused with the position.
// '.' matches any character but a newline; \s and \w are ASCII.
#pragma once

#include <string>
#include <string_view>

#include "grammar/grammar.h"

namespace flare::grammar {

struct RegexOptions {
  // The text is a JSON string's contents: '"', '\' and control characters are written escaped.
  bool json_string = false;
  // JSON Schema "pattern" semantics: the pattern may match anywhere; an end without an anchor
  // lets any text come before or after it.
  bool search = false;
};

// The texts `pattern` matches, as a sequence for `builder`. Throws GrammarError at `path`.
Sequence compile_regex(GrammarBuilder& builder, std::string_view pattern, const RegexOptions& options,
                       const std::string& path);

// A whole grammar whose language is the full matches of `pattern`.
Grammar regex_grammar(std::string_view pattern, const std::string& path);

}  // namespace flare::grammar
