// The five-line block rendering of a model's first served name at the top of `flare inspect`
// (spec cli-design section 5.3): spaced letters from a small 5-row pixel font, a gold-to-orange
// gradient across the columns on a styled terminal, long names wrapped at separators (- _ .)
// and split inside a word only when one word alone is wider than the space.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "common/terminal.h"

namespace flare::cli {

inline constexpr int kBannerRows = 5;

// True when every character of `name` has a glyph (letters, digits, '-', '_', '.').
bool banner_supported(const std::string& name);

// Display columns of `text` rendered as a banner (glyphs plus one space between letters).
int banner_width(const std::string& text);

// Splits `name` into pieces each at most `width` banner columns wide: breaks after separators
// first; a piece with no usable separator is split between letters.
std::vector<std::string> banner_pieces(const std::string& name, int width);

// The banner lines (kBannerRows per piece, a blank line between pieces), or nullopt when the
// name has unsupported characters or even one letter does not fit `width`.
std::optional<std::vector<std::string>> render_name_banner(const TerminalInfo& terminal, const std::string& name,
                                                           int width);

}  // namespace flare::cli
