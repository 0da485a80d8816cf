// How a JSON string writes characters: the raw UTF-8 of most code points, and escapes for '"',
// '\' and the control characters, which JSON forbids raw.
#pragma once

#include <vector>

#include "grammar/code_points.h"
#include "grammar/grammar.h"

namespace flare::grammar {

// The alternatives that write one character of `set` inside a JSON string: raw bytes where JSON
// allows them, "\"" "\\" "\n" "\t" "\r" "\b" "\f" and "\u00XX" for the rest.
std::vector<Sequence> json_character_alternatives(GrammarBuilder& builder, const CodePointSet& set);

}  // namespace flare::grammar
