// The incremental JSON recognizer (json_prefix.h).
#include "text/json_prefix.h"

#include <algorithm>

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

// The types a value starting with `byte` can have.
std::uint8_t types_starting_with(char byte) {
  switch (byte) {
    case '{': return JsonSchema::object;
    case '[': return JsonSchema::array;
    case '"': return JsonSchema::string;
    case 't':
    case 'f': return JsonSchema::boolean;
    case 'n': return JsonSchema::null;
    default: return byte == '-' || is_digit(byte) ? JsonSchema::number | JsonSchema::integer : 0;
  }
}

}  // namespace

JsonPrefix::JsonPrefix(std::shared_ptr<const JsonSchema> schema) : schema_(std::move(schema)) {
  if (schema_) value_node_ = 0;
}

const JsonSchema::Node* JsonPrefix::schema_node(int32_t id) const {
  return schema_ && id != JsonSchema::kFree ? &schema_->node(id) : nullptr;
}

const JsonSchema::Node* JsonPrefix::closed_object() const {
  if (frames_.empty() || stack_.back() != '{') return nullptr;
  const JsonSchema::Node* node = schema_node(frames_.back().node);
  return node && node->closed ? node : nullptr;
}

bool JsonPrefix::may_close_object() const {
  const JsonSchema::Node* node = closed_object();
  return !node || (node->required & ~frames_.back().seen) == 0;
}

bool JsonPrefix::may_add_key() const {
  const JsonSchema::Node* node = closed_object();
  if (!node) return true;
  for (size_t i = 0; i < node->keys.size(); ++i) {
    if (!(frames_.back().seen >> i & 1)) return true;
  }
  return false;
}

void JsonPrefix::open_container(char open, int32_t node) {
  stack_.push_back(open);
  if (schema_) frames_.push_back({node, 0});
}

bool JsonPrefix::close_container() {
  stack_.pop_back();
  if (schema_) frames_.pop_back();
  return end_value();
}

const std::vector<std::string>& JsonPrefix::choices() const {
  return key_ ? closed_object()->keys : schema_node(value_node_)->enum_texts;
}

bool JsonPrefix::choice_available(size_t i) const { return !key_ || !(frames_.back().seen >> i & 1); }

bool JsonPrefix::choice_is_whole_value() const {
  if (key_) return false;  // a key ends with its quote
  const auto& texts = choices();
  return std::find(texts.begin(), texts.end(), choice_) != texts.end();
}

// The byte must continue some available choice; a choice complete with no longer one it starts
// ends the key (then ':') or the value. A number choice that longer ones extend ("1" of 1 and 12)
// ends at the byte after it, which is then read as after any value.
bool JsonPrefix::push_choice(char c) {
  const auto& texts = choices();
  const size_t length = choice_.size() + 1;
  size_t whole = texts.size();
  bool extends = false, longer = false;
  for (size_t i = 0; i < texts.size(); ++i) {
    const std::string& text = texts[i];
    if (!choice_available(i) || text.size() < length || text.compare(0, choice_.size(), choice_) != 0 ||
        text[choice_.size()] != c) {
      continue;
    }
    extends = true;
    if (text.size() == length) whole = i;
    else longer = true;
  }
  if (!extends) {
    if (!choice_is_whole_value()) return false;
    end_value();
    return push_structural(c);
  }
  choice_.push_back(c);
  if (whole == texts.size() || longer) return true;
  if (!key_) return end_value();
  const JsonSchema::Node* object = closed_object();
  frames_.back().seen |= std::uint64_t{1} << whole;
  value_node_ = object->key_nodes[whole];
  mode_ = Mode::colon;
  return true;
}

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
    if (open == '{' && !may_add_key()) return false;
    mode_ = open == '{' ? Mode::key : Mode::value;
    if (open == '[' && schema_) {  // the next element follows the array's items schema
      const JsonSchema::Node* array = schema_node(frames_.back().node);
      value_node_ = array ? array->items : JsonSchema::kFree;
    }
    return true;
  }
  if ((c == '}' && open == '{' && may_close_object()) || (c == ']' && open == '[')) return close_container();
  return false;
}

bool JsonPrefix::start_value(char c) {
  if (is_space(c)) return true;
  if (stack_.empty() && c != '{') return false;  // the root is an object
  const JsonSchema::Node* node = schema_node(value_node_);
  if (node && !node->enum_texts.empty()) {
    key_ = false;
    choice_.clear();
    mode_ = Mode::choice;
    return push_choice(c);
  }
  if (node && (node->types & types_starting_with(c)) == 0) return false;
  integer_only_ = node && (node->types & JsonSchema::number) == 0;
  switch (c) {
    case '{':
      open_container('{', value_node_);
      mode_ = Mode::object_first;
      return true;
    case '[':
      open_container('[', value_node_);
      value_node_ = node ? node->items : JsonSchema::kFree;
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
    if (key_) {  // a key of an object without a schema for its keys: any value
      mode_ = Mode::colon;
      value_node_ = JsonSchema::kFree;
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
      if (c == ']') return close_container();
      return start_value(c);
    case Mode::object_first:
      if (c == '}') return may_close_object() && close_container();
      [[fallthrough]];
    case Mode::key:
      if (is_space(c)) return true;
      if (c != '"') return false;
      key_ = true;
      if (closed_object()) {
        choice_.clear();
        mode_ = Mode::choice;
        return push_choice(c);
      }
      mode_ = Mode::string;
      return true;
    case Mode::choice:
      return push_choice(c);
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
      if ((c == '.' || c == 'e' || c == 'E') && integer_only_) return false;
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
    case Mode::value: {
      if (stack_.empty()) return '{';
      const JsonSchema::Node* node = schema_node(value_node_);
      if (node && !node->enum_texts.empty()) {
        const auto& texts = node->enum_texts;
        return std::min_element(texts.begin(), texts.end(), [](auto& a, auto& b) { return a.size() < b.size(); })->front();
      }
      if (!node || (node->types & (JsonSchema::number | JsonSchema::integer))) return '0';
      if (node->types & JsonSchema::string) return '"';
      if (node->types & JsonSchema::array) return '[';
      if (node->types & JsonSchema::object) return '{';
      return node->types & JsonSchema::boolean ? 't' : 'n';
    }
    case Mode::array_first:
      return ']';
    case Mode::object_first:
      return may_close_object() ? '}' : '"';
    case Mode::choice:
      return choice_completion_byte();
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
      return close_byte();
    case Mode::done:
      break;
  }
  return '\0';
}

char JsonPrefix::close_byte() const {
  if (stack_.back() == '[') return ']';
  return may_close_object() ? '}' : ',';
}

// The next byte of the shortest available choice continuing choice_, a missing required key first.
char JsonPrefix::choice_completion_byte() const {
  if (choice_is_whole_value()) return close_byte();
  const auto& texts = choices();
  const JsonSchema::Node* object = key_ ? closed_object() : nullptr;
  const std::string* best = nullptr;
  bool best_required = false;
  for (size_t i = 0; i < texts.size(); ++i) {
    const std::string& text = texts[i];
    if (!choice_available(i) || text.size() <= choice_.size() || !text.starts_with(choice_)) continue;
    const bool required = object && (object->required >> i & 1);
    if (!best || (required && !best_required) || (required == best_required && text.size() < best->size())) {
      best = &text;
      best_required = required;
    }
  }
  return (*best)[choice_.size()];
}

size_t JsonPrefix::max_completion_growth_per_byte() const {
  return schema_ ? schema_->max_completion_growth_per_byte() : 4;  // 4: a '"' opening a key turns "}" into "\":0}"
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
  if (schema_) {
    auto append = [&key](const void* data, size_t size) { key.append(static_cast<const char*>(data), size); };
    const bool enum_choice = mode_ == Mode::choice && !key_;
    const bool node_matters = mode_ == Mode::value || mode_ == Mode::array_first || mode_ == Mode::colon || enum_choice;
    const int32_t node = node_matters ? value_node_ : JsonSchema::kFree;
    append(&node, sizeof(node));
    key.push_back(static_cast<char>(mode_ >= Mode::number_sign && mode_ <= Mode::number_exp_digits && integer_only_));
    if (mode_ == Mode::choice) {
      key.push_back(static_cast<char>(key_));
      key += choice_;
      key.push_back('\0');  // canonical texts are escaped: no raw NUL inside
    }
    for (const Frame& frame : frames_) {
      append(&frame.node, sizeof(frame.node));
      append(&frame.seen, sizeof(frame.seen));
    }
  }
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
