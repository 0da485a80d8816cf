// UTF-8 and Unicode helpers for the tokenizer: decoding code points, repairing invalid UTF-8 the
// way the WHATWG TextDecoder does (each maximal invalid subpart becomes U+FFFD), Unicode
// normalization forms and case mapping through utf8proc, and the GPT-2 byte <-> character table
// used by byte-level BPE vocabularies. Stateless; every function is thread-safe.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace flare::text {

inline constexpr char32_t kReplacementChar = 0xFFFD;

// Decodes the code point starting at `text[pos]` of valid UTF-8; returns it and advances `pos`.
char32_t utf8_next(std::string_view text, size_t& pos);
// Appends the UTF-8 encoding of `cp` to `out`.
void utf8_append(std::string& out, char32_t cp);
// Number of bytes of the UTF-8 sequence that starts with `lead` (1 for invalid lead bytes).
inline size_t utf8_sequence_bytes(unsigned char lead) {
  return lead < 0x80 ? 1 : lead < 0xE0 ? 2 : lead < 0xF0 ? 3 : lead < 0xF8 ? 4 : 1;
}

// True when `bytes` is well-formed UTF-8 (no surrogates, no overlongs, <= U+10FFFF).
bool utf8_is_valid(std::string_view bytes);
// Replaces every maximal invalid subpart with U+FFFD (WHATWG "UTF-8 decode" with replacement,
// the behaviour of TextDecoder and of Python's errors="replace").
std::string utf8_repair(std::string_view bytes);
// Length of the longest prefix of `bytes` that ends on a complete code point boundary, treating
// a trailing incomplete-but-valid sequence as not yet complete.
size_t utf8_complete_prefix_bytes(std::string_view bytes);

enum class NormalForm { nfc, nfd, nfkc, nfkd };
// Unicode normalization of valid UTF-8.
std::string unicode_normalize(std::string_view text, NormalForm form);
// Full-string lowercase (per code point, with the final-sigma rule of Rust's str::to_lowercase).
std::string unicode_lowercase(std::string_view text);

// Unicode White_Space property (what Rust's char::is_whitespace and JS's trim use).
bool unicode_is_whitespace(char32_t cp);
// General category N* (Rust's char::is_numeric).
bool unicode_is_numeric(char32_t cp);

// The GPT-2 byte-level alphabet: each byte maps to one printable code point.
const std::array<char32_t, 256>& byte_level_chars();
// Inverse of byte_level_chars(): -1 for code points outside the alphabet.
int byte_level_byte(char32_t cp);
// Maps raw bytes to their byte-level representation (UTF-8 of the mapped code points).
std::string byte_level_encode(std::string_view bytes);
// Maps a byte-level string back to raw bytes; false when it has a character outside the alphabet.
bool byte_level_decode(std::string_view text, std::string& out);

}  // namespace flare::text
