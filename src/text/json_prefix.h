// An incremental JSON recognizer for constrained decoding: it reads text one byte at a time,
// answers whether the bytes so far can still begin a valid JSON value (RFC 8259, with valid
// UTF-8 in strings), and writes the shortest text that completes the value. Token masks try each
// token's bytes on a copy; a generation running out of tokens is closed with completion().
// The root value must be an object (tool-call arguments). Numbers are limited to 100 integer
// digits and 2 exponent digits, so that every accepted number is a finite double (parsers reject
// overflowing numbers). Small and copyable by design: a few enums and the stack of open containers.
// With a schema (json_schema.h) it also holds the arguments to the schema's keys and types.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "text/json_schema.h"

namespace flare::text {

class JsonPrefix {
 public:
  JsonPrefix() = default;
  // Objects that follow `schema` (nullptr: any JSON object).
  explicit JsonPrefix(std::shared_ptr<const JsonSchema> schema);

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
  // Inside a string between characters: reading more characters leaves completion() unchanged.
  bool inside_plain_string() const { return mode_ == Mode::string && n_utf8_pending_ == 0; }
  // The whole state as bytes: prefixes with equal keys accept exactly the same continuations
  // (token masks are cached by it: a model writing a long string stays in one state).
  std::string state_key() const;
  // An upper bound on how much completion() can grow when one more byte is read.
  size_t max_completion_growth_per_byte() const;

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
    choice,         // a schema's key or enum value: choice_ read so far (key_ says which)
    done,           // the root object closed
  };

  bool end_value();                 // a value just ended: after_value, or done at the root
  bool push_structural(char byte);  // whitespace, ',' ']' '}' after a value or number
  bool start_value(char byte);
  bool push_string(char byte);
  char completion_byte() const;
  // Schema helpers; all answer "no constraint" without a schema.
  const JsonSchema::Node* schema_node(int32_t id) const;
  const JsonSchema::Node* closed_object() const;  // the innermost container, when a closed object
  bool may_close_object() const;                  // every required key written
  bool may_add_key() const;                       // a key not yet written remains
  void open_container(char open, int32_t node);
  bool close_container();
  const std::vector<std::string>& choices() const;  // the keys or enum texts being chosen from
  bool choice_available(size_t i) const;             // a key not yet written (enum texts: all)
  bool push_choice(char byte);
  bool choice_is_whole_value() const;  // choice_ is a complete enum value (a number others extend)
  char choice_completion_byte() const;
  char close_byte() const;  // after a value: ',' toward a missing required key, else the close

  struct Frame {
    int32_t node;   // the container's schema
    uint64_t seen;  // keys written (closed objects)
  };

  Mode mode_ = Mode::value;
  bool key_ = false;               // the current string is an object key
  std::uint8_t n_hex_left_ = 0;
  std::uint8_t n_utf8_pending_ = 0;  // continuation bytes the current character still needs
  std::uint8_t utf8_lead_ = 0;       // the current character's lead byte (for the 2nd byte's range)
  std::uint8_t n_utf8_read_ = 0;     // continuation bytes read of the current character
  std::uint8_t n_number_digits_ = 0;  // integer digits, then exponent digits, of the current number
  const char* literal_ = nullptr;    // the rest of the literal being read
  std::string stack_;                // open containers, '{' or '[', innermost last
  std::shared_ptr<const JsonSchema> schema_;
  std::vector<Frame> frames_;        // with a schema: one per open container
  int32_t value_node_ = JsonSchema::kFree;  // the schema of the value starting or being chosen
  bool integer_only_ = false;        // the current number is an integer
  std::string choice_;               // the key or enum value read so far
};

}  // namespace flare::text
