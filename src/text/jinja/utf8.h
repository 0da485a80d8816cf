// UTF-8 helpers for the template interpreter: code point iteration, JavaScript's notion of
// whitespace (String.prototype.trim, /\s/), UTF-16 length (JavaScript's String length) and
// case mapping through utf8proc.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace flare::text::jinja {

// Decodes the code point at text[pos] and advances pos; invalid bytes decode as themselves
// (one byte each) so arbitrary bytes survive round trips.
char32_t utf8_next(std::string_view text, size_t& pos);
void utf8_append(std::string& out, char32_t code_point);
// Splits into code points, each kept as its UTF-8 bytes.
std::vector<std::string> utf8_chars(std::string_view text);

bool is_js_space(char32_t code_point);
std::string_view js_trim_start(std::string_view text);
std::string_view js_trim_end(std::string_view text);
std::string_view js_trim(std::string_view text);

size_t utf16_length(std::string_view text);
std::string to_upper(std::string_view text);
std::string to_lower(std::string_view text);

}  // namespace flare::text::jinja
