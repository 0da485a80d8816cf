// UTF-8 helpers for the template interpreter (see utf8.h).
#include "text/jinja/utf8.h"

#include <utf8proc.h>

namespace flare::text::jinja {

char32_t utf8_next(std::string_view text, size_t& pos) {
  const auto byte = [&](size_t i) { return static_cast<unsigned char>(text[i]); };
  unsigned char lead = byte(pos);
  size_t length = lead < 0x80 ? 1 : (lead >> 5) == 0x6 ? 2 : (lead >> 4) == 0xE ? 3 : (lead >> 3) == 0x1E ? 4 : 0;
  if (length <= 1 || pos + length > text.size()) {
    ++pos;
    return lead;
  }
  char32_t code_point = lead & (0x7F >> length);
  for (size_t i = 1; i < length; ++i) {
    unsigned char next = byte(pos + i);
    if ((next & 0xC0) != 0x80) {
      ++pos;
      return lead;
    }
    code_point = (code_point << 6) | (next & 0x3F);
  }
  pos += length;
  return code_point;
}

void utf8_append(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

std::vector<std::string> utf8_chars(std::string_view text) {
  std::vector<std::string> chars;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t start = pos;
    utf8_next(text, pos);
    chars.emplace_back(text.substr(start, pos - start));
  }
  return chars;
}

bool is_js_space(char32_t c) {
  switch (c) {
    case 0x09: case 0x0A: case 0x0B: case 0x0C: case 0x0D: case 0x20: case 0xA0: case 0x1680:
    case 0x2028: case 0x2029: case 0x202F: case 0x205F: case 0x3000: case 0xFEFF:
      return true;
    default:
      return c >= 0x2000 && c <= 0x200A;
  }
}

std::string_view js_trim_start(std::string_view text) {
  size_t pos = 0;
  while (pos < text.size()) {
    size_t next = pos;
    if (!is_js_space(utf8_next(text, next))) break;
    pos = next;
  }
  return text.substr(pos);
}

std::string_view js_trim_end(std::string_view text) {
  size_t end = 0;  // end of the last non-space code point
  size_t pos = 0;
  while (pos < text.size()) {
    char32_t cp = utf8_next(text, pos);
    if (!is_js_space(cp)) end = pos;
  }
  return text.substr(0, end);
}

std::string_view js_trim(std::string_view text) { return js_trim_end(js_trim_start(text)); }

size_t utf16_length(std::string_view text) {
  size_t n_units = 0;
  size_t pos = 0;
  while (pos < text.size()) n_units += utf8_next(text, pos) >= 0x10000 ? 2 : 1;
  return n_units;
}

namespace {
template <typename Map>
std::string map_case(std::string_view text, Map map) {
  std::string out;
  out.reserve(text.size());
  size_t pos = 0;
  while (pos < text.size()) {
    size_t start = pos;
    char32_t cp = utf8_next(text, pos);
    if (cp < 0x80 || pos - start > 1) {
      utf8proc_int32_t mapped = map(static_cast<utf8proc_int32_t>(cp));
      if (mapped < 0) {
        out += "SS";
      } else {
        utf8_append(out, static_cast<char32_t>(mapped));
      }
    } else {
      out.append(text.substr(start, pos - start));  // an invalid byte stays as it was
    }
  }
  return out;
}
}  // namespace

std::string to_upper(std::string_view text) {
  // JavaScript's full case mapping turns U+00DF (sharp s) into "SS"; utf8proc's simple
  // mapping would give U+1E9E.
  return map_case(text, [](utf8proc_int32_t cp) -> utf8proc_int32_t {
    return cp == 0xDF ? -1 : utf8proc_toupper(cp);
  });
}
std::string to_lower(std::string_view text) { return map_case(text, utf8proc_tolower); }

}  // namespace flare::text::jinja
