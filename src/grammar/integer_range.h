// Integers within bounds as digit sequences: the grammar of the decimal texts of every integer
// in [min, max] (either side may be open), without leading zeros or "-0".
#pragma once

#include <cstdint>
#include <optional>

#include "grammar/grammar.h"

namespace flare::grammar {

// An open side allows up to kMaxOpenDigits digits.
constexpr std::uint32_t kMaxOpenDigits = 20;

Sequence integer_range(GrammarBuilder& builder, std::optional<std::int64_t> min, std::optional<std::int64_t> max);

}  // namespace flare::grammar
