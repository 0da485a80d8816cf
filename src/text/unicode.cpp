// UTF-8 repair, normalization, case mapping and the byte-level alphabet (see unicode.h).
#include "text/unicode.h"

#include <cstdlib>
#include <memory>

#include <utf8proc.h>

#include "common/error.h"

namespace flare::text {

char32_t utf8_next(std::string_view text, size_t& pos) {
  auto b0 = static_cast<unsigned char>(text[pos]);
  size_t n = utf8_sequence_bytes(b0);
  if (n == 1 || pos + n > text.size()) {
    pos += 1;
    return b0 < 0x80 ? b0 : kReplacementChar;
  }
  char32_t cp = n == 2 ? (b0 & 0x1F) : n == 3 ? (b0 & 0x0F) : (b0 & 0x07);
  for (size_t i = 1; i < n; ++i) cp = (cp << 6) | (static_cast<unsigned char>(text[pos + i]) & 0x3F);
  pos += n;
  return cp;
}

void utf8_append(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

namespace {

// One step of the WHATWG UTF-8 decoder. Calls emit(cp, n_bytes_consumed_so_far) per code point.
struct Utf8Decoder {
  int n_needed = 0;
  int n_seen = 0;
  char32_t cp = 0;
  unsigned char lower = 0x80;
  unsigned char upper = 0xBF;
  bool had_error = false;

  void reset() { n_needed = n_seen = 0, cp = 0, lower = 0x80, upper = 0xBF; }

  // Returns true when `b` must be processed again (an error ended the previous sequence).
  template <typename Emit>
  bool step(unsigned char b, Emit&& emit) {
    if (n_needed == 0) {
      if (b < 0x80) {
        emit(b);
      } else if (b >= 0xC2 && b <= 0xDF) {
        n_needed = 1, cp = b & 0x1F;
      } else if (b >= 0xE0 && b <= 0xEF) {
        if (b == 0xE0) lower = 0xA0;
        if (b == 0xED) upper = 0x9F;
        n_needed = 2, cp = b & 0x0F;
      } else if (b >= 0xF0 && b <= 0xF4) {
        if (b == 0xF0) lower = 0x90;
        if (b == 0xF4) upper = 0x8F;
        n_needed = 3, cp = b & 0x07;
      } else {
        had_error = true;
        emit(kReplacementChar);
      }
      return false;
    }
    if (b < lower || b > upper) {
      reset();
      had_error = true;
      emit(kReplacementChar);
      return true;
    }
    lower = 0x80, upper = 0xBF;
    cp = (cp << 6) | (b & 0x3F);
    if (++n_seen == n_needed) {
      emit(cp);
      reset();
    }
    return false;
  }
};

}  // namespace

bool utf8_is_valid(std::string_view bytes) {
  Utf8Decoder decoder;
  for (unsigned char b : bytes) {
    if (b < 0x80 && decoder.n_needed == 0) continue;
    decoder.step(b, [](char32_t) {});
    if (decoder.had_error) return false;
  }
  return decoder.n_needed == 0;
}

std::string utf8_repair(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size() + 8);
  Utf8Decoder decoder;
  auto emit = [&](char32_t cp) { utf8_append(out, cp); };
  for (size_t i = 0; i < bytes.size(); ++i) {
    auto b = static_cast<unsigned char>(bytes[i]);
    if (decoder.step(b, emit)) decoder.step(b, emit);
  }
  if (decoder.n_needed != 0) emit(kReplacementChar);
  return out;
}

size_t utf8_complete_prefix_bytes(std::string_view bytes) {
  // Look back at most 3 bytes for a lead byte whose sequence is not finished.
  size_t n = bytes.size();
  for (size_t back = 1; back <= 3 && back <= n; ++back) {
    auto b = static_cast<unsigned char>(bytes[n - back]);
    if ((b & 0xC0) == 0x80) continue;  // continuation byte: keep looking for the lead
    size_t need = utf8_sequence_bytes(b);
    if (need > back && b >= 0xC2 && b <= 0xF4) {
      // Check that what follows the lead is a valid partial sequence.
      std::string_view tail = bytes.substr(n - back);
      Utf8Decoder decoder;
      bool emitted = false;
      for (unsigned char c : tail) decoder.step(c, [&](char32_t) { emitted = true; });
      if (!emitted && !decoder.had_error && decoder.n_needed != 0) return n - back;
    }
    return n;
  }
  return n;
}

std::string unicode_normalize(std::string_view text, NormalForm form) {
  if (text.empty()) return {};
  int options = UTF8PROC_STABLE | UTF8PROC_COMPOSE;
  switch (form) {
    case NormalForm::nfc: options = UTF8PROC_STABLE | UTF8PROC_COMPOSE; break;
    case NormalForm::nfd: options = UTF8PROC_STABLE | UTF8PROC_DECOMPOSE; break;
    case NormalForm::nfkc: options = UTF8PROC_STABLE | UTF8PROC_COMPOSE | UTF8PROC_COMPAT; break;
    case NormalForm::nfkd: options = UTF8PROC_STABLE | UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT; break;
  }
  // Fast paths: ASCII is invariant under every normal form, and text below U+0300 (no
  // combining marks, nothing that decomposes canonically there) under NFC.
  unsigned char max_byte = 0;
  for (unsigned char c : text) max_byte |= c;
  if (max_byte < 0x80) return std::string(text);
  if (form == NormalForm::nfc) {
    bool below_combining = true;
    for (size_t pos = 0; pos < text.size() && below_combining;) below_combining = utf8_next(text, pos) < 0x300;
    if (below_combining) return std::string(text);
  }
  utf8proc_uint8_t* result = nullptr;
  utf8proc_ssize_t n = utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(text.data()),
                                    static_cast<utf8proc_ssize_t>(text.size()), &result,
                                    static_cast<utf8proc_option_t>(options));
  if (n < 0) fail_input("unicode normalization failed: {}", utf8proc_errmsg(n));
  std::unique_ptr<utf8proc_uint8_t, decltype(&std::free)> owner(result, &std::free);
  return std::string(reinterpret_cast<const char*>(result), static_cast<size_t>(n));
}

namespace {
bool is_cased_letter(char32_t cp) {
  auto cat = utf8proc_category(static_cast<utf8proc_int32_t>(cp));
  return cat == UTF8PROC_CATEGORY_LU || cat == UTF8PROC_CATEGORY_LL || cat == UTF8PROC_CATEGORY_LT;
}
}  // namespace

std::string unicode_lowercase(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  char32_t previous = 0;
  for (size_t pos = 0; pos < text.size();) {
    char32_t cp = utf8_next(text, pos);
    if (cp < 0x80) {
      out.push_back(static_cast<char>(cp >= 'A' && cp <= 'Z' ? cp + 32 : cp));
    } else if (cp == 0x130) {  // LATIN CAPITAL LETTER I WITH DOT ABOVE: full mapping "i\u0307"
      out.append("i\xCC\x87");
    } else if (cp == 0x3A3) {  // GREEK CAPITAL SIGMA: final form at the end of a word
      size_t next_pos = pos;
      bool next_cased = next_pos < text.size() && is_cased_letter(utf8_next(text, next_pos));
      utf8_append(out, is_cased_letter(previous) && !next_cased ? 0x3C2 : 0x3C3);
    } else {
      utf8_append(out, static_cast<char32_t>(utf8proc_tolower(static_cast<utf8proc_int32_t>(cp))));
    }
    previous = cp;
  }
  return out;
}

bool unicode_is_whitespace(char32_t cp) {
  switch (cp) {
    case 0x09: case 0x0A: case 0x0B: case 0x0C: case 0x0D: case 0x20: case 0x85: case 0xA0:
    case 0x1680: case 0x2028: case 0x2029: case 0x202F: case 0x205F: case 0x3000:
      return true;
    default:
      return cp >= 0x2000 && cp <= 0x200A;
  }
}

bool unicode_is_numeric(char32_t cp) {
  if (cp < 0x80) return cp >= '0' && cp <= '9';
  auto cat = utf8proc_category(static_cast<utf8proc_int32_t>(cp));
  return cat == UTF8PROC_CATEGORY_ND || cat == UTF8PROC_CATEGORY_NL || cat == UTF8PROC_CATEGORY_NO;
}

namespace {
struct ByteLevelTables {
  std::array<char32_t, 256> chars{};
  std::array<int16_t, 324> bytes{};  // code points of the alphabet are all < 324
  std::array<std::string, 256> utf8{};
  ByteLevelTables() {
    bytes.fill(-1);
    int n_extra = 0;
    for (int b = 0; b < 256; ++b) {
      bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
      chars[b] = printable ? static_cast<char32_t>(b) : static_cast<char32_t>(256 + n_extra++);
      bytes[chars[b]] = static_cast<int16_t>(b);
      utf8_append(utf8[b], chars[b]);
    }
  }
};
const ByteLevelTables& byte_level_tables() {
  static const ByteLevelTables tables;
  return tables;
}
}  // namespace

const std::array<char32_t, 256>& byte_level_chars() { return byte_level_tables().chars; }

int byte_level_byte(char32_t cp) { return cp < 324 ? byte_level_tables().bytes[cp] : -1; }

std::string byte_level_encode(std::string_view bytes) {
  const auto& tables = byte_level_tables();
  std::string out;
  out.reserve(bytes.size() * 2);
  for (unsigned char b : bytes) out.append(tables.utf8[b]);
  return out;
}

bool byte_level_decode(std::string_view text, std::string& out) {
  bool ok = true;
  for (size_t pos = 0; pos < text.size();) {
    int b = byte_level_byte(utf8_next(text, pos));
    if (b < 0) {
      ok = false;
      continue;
    }
    out.push_back(static_cast<char>(b));
  }
  return ok;
}

}  // namespace flare::text
