// JSON string characters (json_characters.h).
#include "grammar/json_characters.h"

#include <fmt/format.h>

namespace flare::grammar {

std::vector<Sequence> json_character_alternatives(GrammarBuilder& builder, const CodePointSet& set) {
  CodePointSet special = CodePointSet::range(0, 0x1F);
  special.add('"', '"');
  special.add('\\', '\\');
  std::vector<Sequence> out = utf8_alternatives(builder, set.minus(special));
  for (std::uint32_t c = 0; c < 0x20; ++c) {
    if (!set.contains(c)) continue;
    const char* short_form = c == '\n' ? "\\n" : c == '\t' ? "\\t" : c == '\r' ? "\\r" : c == '\b' ? "\\b" : c == '\f' ? "\\f" : nullptr;
    if (short_form) out.push_back(builder.literal(short_form));
    // \u00XX in either case of hex digit.
    Sequence escaped = builder.literal("\\u00");
    const char high = char('0' + (c >> 4));
    escaped.push_back(builder.bytes(ByteSet::of(std::uint8_t(high))));
    const unsigned low = c & 15;
    ByteSet low_set = ByteSet::of(std::uint8_t(low < 10 ? '0' + low : 'a' + low - 10));
    if (low >= 10) low_set.add(std::uint8_t('A' + low - 10));
    escaped.push_back(builder.bytes(low_set));
    out.push_back(std::move(escaped));
  }
  if (set.contains('"')) out.push_back(builder.literal("\\\""));
  if (set.contains('\\')) out.push_back(builder.literal("\\\\"));
  return out;
}

}  // namespace flare::grammar
