// The incremental JSON recognizer (json_prefix.h).
#include "text/json_prefix.h"

namespace flare::text {
namespace {

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }
bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_hex(char c) { return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }

// Beyond these a number could overflow a double (10^(100 + 99) < 1.8e308).
constexpr std::uint8_t kMaxIntegerDigits = 100;
constexpr std::uint8_t kMaxExponentDigits = 2;

// Continuation bytes a UTF-8 lead byte announces; 0 for bytes that cannot lead (RFC 3629).
std::uint8_t utf8_continuations(std::uint8_t lead) {
  if (lead >= 0xC2 && lead <= 0xDF) return 1;
  if (lead >= 0xE0 && lead <= 0xEF) return 2;
  if (lead >= 0xF0 && lead <= 0xF4) return 3;
  return 0;
}

// The range of the first continuation byte after `lead` (no overlongs, no surrogates, <= U+10FFFF).
std::uint8_t first_continuation_min(std::uint8_t lead) { return lead == 0xE0 ? 0xA0 : lead == 0xF0 ? 0x90 : 0x80; }
std::uint8_t first_continuation_max(std::uint8_t lead) { return lead == 0xED ? 0x9F : lead == 0xF4 ? 0x8F : 0xBF; }

}  // namespace

bool JsonPrefix::push(std::string_view bytes) {
  for (char c : bytes) {
    if (!push(c)) return false;
  }
  return true;
}

bool JsonPrefix::end_value() {
  mode_ = stack_.empty() ? Mode::done : Mode::after_value;
  return true;
}

bool JsonPrefix::push_structural(char c) {
  if (is_space(c)) {
    mode_ = Mode::after_value;
    return true;
  }
  if (stack_.empty()) return false;
  const char open = stack_.back();
  if (c == ',') {
    mode_ = open == '{' ? Mode::key : Mode::value;
    return true;
  }
  if ((c == '}' && open == '{') || (c == ']' && open == '[')) {
    stack_.pop_back();
    return end_value();
  }
  return false;
}

bool JsonPrefix::start_value(char c) {
  if (is_space(c)) return true;
  if (stack_.empty() && c != '{') return false;  // the root is an object
  switch (c) {
    case '{':
      stack_.push_back('{');
      mode_ = Mode::object_first;
      return true;
    case '[':
      stack_.push_back('[');
      mode_ = Mode::array_first;
      return true;
    case '"':
      key_ = false;
      mode_ = Mode::string;
      return true;
    case '-':
      mode_ = Mode::number_sign;
      return true;
    case '0':
      mode_ = Mode::number_zero;
      n_number_digits_ = 1;
      return true;
    case 't':
      literal_ = "rue";
      mode_ = Mode::literal;
      return true;
    case 'f':
      literal_ = "alse";
      mode_ = Mode::literal;
      return true;
    case 'n':
      literal_ = "ull";
      mode_ = Mode::literal;
      return true;
    default:
      if (c >= '1' && c <= '9') {
        mode_ = Mode::number_int;
        n_number_digits_ = 1;
        return true;
      }
      return false;
  }
}

bool JsonPrefix::push_string(char c) {
  const auto byte = static_cast<std::uint8_t>(c);
  if (n_utf8_pending_ > 0) {
    const bool first = n_utf8_read_ == 0;
    const std::uint8_t low = first ? first_continuation_min(utf8_lead_) : 0x80;
    const std::uint8_t high = first ? first_continuation_max(utf8_lead_) : 0xBF;
    if (byte < low || byte > high) return false;
    --n_utf8_pending_;
    ++n_utf8_read_;
    return true;
  }
  if (c == '"') {
    if (key_) {
      mode_ = Mode::colon;
      return true;
    }
    return end_value();
  }
  if (c == '\\') {
    mode_ = Mode::escape;
    return true;
  }
  if (byte < 0x20) return false;  // control characters must be escaped
  if (byte >= 0x80) {
    n_utf8_pending_ = utf8_continuations(byte);
    if (n_utf8_pending_ == 0) return false;
    utf8_lead_ = byte;
    n_utf8_read_ = 0;
  }
  return true;
}

bool JsonPrefix::push(char c) {
  switch (mode_) {
    case Mode::value:
      return start_value(c);
    case Mode::array_first:
      if (c == ']') {
        stack_.pop_back();
        return end_value();
      }
      return start_value(c);
    case Mode::object_first:
      if (c == '}') {
        stack_.pop_back();
        return end_value();
      }
      [[fallthrough]];
    case Mode::key:
      if (is_space(c)) return true;
      if (c != '"') return false;
      key_ = true;
      mode_ = Mode::string;
      return true;
    case Mode::string:
      return push_string(c);
    case Mode::escape:
      if (c == 'u') {
        n_hex_left_ = 4;
        mode_ = Mode::unicode;
        return true;
      }
      if (c == '"' || c == '\\' || c == '/' || c == 'b' || c == 'f' || c == 'n' || c == 'r' || c == 't') {
        mode_ = Mode::string;
        return true;
      }
      return false;
    case Mode::unicode:
      if (!is_hex(c)) return false;
      if (--n_hex_left_ == 0) mode_ = Mode::string;
      return true;
    case Mode::colon:
      if (is_space(c)) return true;
      if (c != ':') return false;
      mode_ = Mode::value;
      return true;
    case Mode::after_value:
      return push_structural(c);
    case Mode::number_sign:
      if (c == '0') mode_ = Mode::number_zero;
      else if (c >= '1' && c <= '9') mode_ = Mode::number_int;
      else return false;
      n_number_digits_ = 1;
      return true;
    case Mode::number_zero:
    case Mode::number_int:
      if (c == '.') mode_ = Mode::number_dot;
      else if (c == 'e' || c == 'E') mode_ = Mode::number_exp;
      else if (is_digit(c) && mode_ == Mode::number_int) return ++n_number_digits_ <= kMaxIntegerDigits;
      else return push_structural(c);
      return true;
    case Mode::number_dot:
      if (!is_digit(c)) return false;
      mode_ = Mode::number_frac;
      return true;
    case Mode::number_frac:
      if (is_digit(c)) return true;
      if (c == 'e' || c == 'E') {
        mode_ = Mode::number_exp;
        return true;
      }
      return push_structural(c);
    case Mode::number_exp:
      if (c == '+' || c == '-') mode_ = Mode::number_exp_sign;
      else if (is_digit(c)) mode_ = Mode::number_exp_digits;
      else return false;
      n_number_digits_ = is_digit(c) ? 1 : 0;
      return true;
    case Mode::number_exp_sign:
      if (!is_digit(c)) return false;
      mode_ = Mode::number_exp_digits;
      n_number_digits_ = 1;
      return true;
    case Mode::number_exp_digits:
      if (is_digit(c)) return ++n_number_digits_ <= kMaxExponentDigits;
      return push_structural(c);
    case Mode::literal:
      if (c != *literal_) return false;
      if (*++literal_ == '\0') return end_value();
      return true;
    case Mode::done:
      return false;
  }
  return false;
}

// The next byte of the shortest completion from this state.
char JsonPrefix::completion_byte() const {
  switch (mode_) {
    case Mode::value:
      return stack_.empty() ? '{' : '0';
    case Mode::array_first:
      return ']';
    case Mode::object_first:
      return '}';
    case Mode::key:
      return '"';  // an empty key: "":0
    case Mode::string:
      if (n_utf8_pending_ > 0) return static_cast<char>(n_utf8_read_ == 0 ? first_continuation_min(utf8_lead_) : 0x80);
      return '"';
    case Mode::escape:
      return 'n';
    case Mode::unicode:
      return '0';
    case Mode::colon:
      return ':';
    case Mode::number_sign:
    case Mode::number_dot:
    case Mode::number_exp:
    case Mode::number_exp_sign:
      return '0';
    case Mode::literal:
      return *literal_;
    case Mode::after_value:
    case Mode::number_zero:
    case Mode::number_int:
    case Mode::number_frac:
    case Mode::number_exp_digits:
      return stack_.back() == '{' ? '}' : ']';
    case Mode::done:
      break;
  }
  return '\0';
}

std::string JsonPrefix::state_key() const {
  // Only the fields the current mode reads: the others keep stale values from earlier values.
  const bool in_string = mode_ == Mode::string || mode_ == Mode::escape || mode_ == Mode::unicode;
  const bool in_number = mode_ == Mode::number_int || mode_ == Mode::number_exp_digits;
  std::string key;
  key.reserve(8 + stack_.size());
  key.push_back(static_cast<char>(mode_));
  key.push_back(static_cast<char>(in_string && key_));
  key.push_back(static_cast<char>(mode_ == Mode::unicode ? n_hex_left_ : 0));
  key.push_back(static_cast<char>(in_string ? n_utf8_pending_ : 0));
  key.push_back(static_cast<char>(in_string && n_utf8_pending_ > 0 && n_utf8_read_ == 0 ? utf8_lead_ : 0));
  key.push_back(static_cast<char>(in_number ? n_number_digits_ : 0));
  if (mode_ == Mode::literal) key += literal_;  // the rest of the literal ("ue", "ull", ...)
  key.push_back('|');
  key += stack_;
  return key;
}

std::string JsonPrefix::completion() const {
  std::string out;
  JsonPrefix state = *this;
  while (!state.complete()) {
    const char c = state.completion_byte();
    state.push(c);
    out.push_back(c);
  }
  return out;
}

}  // namespace flare::text
