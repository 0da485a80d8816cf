// An incremental JSON recognizer for constrained decoding: it reads text one byte at a time,
// answers whether the bytes so far can still begin a valid JSON value (RFC 8259, with valid
// UTF-8 in strings), and writes the shortest text that completes the value. Token masks try each
// token's bytes on a copy; a generation running out of tokens is closed with completion().
// The root value must be an object (tool-call arguments). Numbers are limited to 100 integer
// digits and 2 exponent digits, so that every accepted number is a finite double (parsers reject
// overflowing numbers). Small and copyable by design: a few enums and the stack of open containers.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace flare::text {

class JsonPrefix {
 public:
  // Reads one byte; false when no valid JSON object starts with the bytes read so far plus this
  // one (the state is then unspecified: try bytes on a copy).
  bool push(char byte);
  // Reads bytes in order; false as soon as one is rejected.
  bool push(std::string_view bytes);
  // The root object is closed; nothing more may follow.
  bool complete() const { return mode_ == Mode::done; }
  // The shortest bytes that make the text read so far a complete JSON object ("" once complete).
  // Every byte of it is ASCII or a UTF-8 continuation byte (0x80) finishing a split character.
  std::string completion() const;
  // Whether completion() may need a UTF-8 continuation byte (a character is split now).
  bool inside_character() const { return n_utf8_pending_ > 0; }
  // The whole state as bytes: prefixes with equal keys accept exactly the same continuations
  // (token masks are cached by it: a model writing a long string stays in one state).
  std::string state_key() const;

 private:
  enum class Mode : std::uint8_t {
    value,          // a value starts here (after ':' , ',' in an array, or at the root)
    array_first,    // right after '[': a value or ']'
    object_first,   // right after '{': a key or '}'
    key,            // after ',' in an object: a key
    string,         // inside a string (key_ says which kind)
    escape,         // after a backslash in a string
    unicode,        // inside \uXXXX; n_hex_left_ digits to go
    colon,          // after a key: ':'
    after_value,    // a value ended: ',' or the container's close
    number_sign,    // after '-': a digit
    number_zero,    // "0" / "-0": '.', 'e', or the end of the number
    number_int,     // integer digits
    number_dot,     // after '.': a digit
    number_frac,    // fraction digits
    number_exp,     // after 'e': sign or digit
    number_exp_sign,  // after the exponent's sign: a digit
    number_exp_digits,
    literal,        // inside true / false / null
    done,           // the root object closed
  };

  bool end_value();                 // a value just ended: after_value, or done at the root
  bool push_structural(char byte);  // whitespace, ',' ']' '}' after a value or number
  bool start_value(char byte);
  bool push_string(char byte);
  char completion_byte() const;

  Mode mode_ = Mode::value;
  bool key_ = false;               // the current string is an object key
  std::uint8_t n_hex_left_ = 0;
  std::uint8_t n_utf8_pending_ = 0;  // continuation bytes the current character still needs
  std::uint8_t utf8_lead_ = 0;       // the current character's lead byte (for the 2nd byte's range)
  std::uint8_t n_utf8_read_ = 0;     // continuation bytes read of the current character
  std::uint8_t n_number_digits_ = 0;  // integer digits, then exponent digits, of the current number
  const char* literal_ = nullptr;    // the rest of the literal being read
  std::string stack_;                // open containers, '{' or '[', innermost last
};

}  // namespace flare::text
