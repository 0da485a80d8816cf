// Streaming tool-call parsers (see parser_tool_call.h). Hermes and DeepSeek V3 share one
// marker-driven state machine; Llama 3's bare-JSON form buffers until the end of generation
// because only the whole output tells a tool call from a JSON answer.
#include "text/parser_tool_call.h"

#include <optional>
#include <random>

#include <nlohmann/json.hpp>

#include "common/error.h"

namespace flare::text {

namespace {

using ordered_json = nlohmann::ordered_json;

constexpr size_t k_max_call_bytes = 1u << 20;  // a longer call body is treated as content

size_t partial_suffix(std::string_view text, std::string_view marker) {
  if (marker.empty()) return 0;
  size_t longest = std::min(text.size(), marker.size() - 1);
  for (size_t n = longest; n > 0; --n) {
    if (text.substr(text.size() - n) == marker.substr(0, n)) return n;
  }
  return 0;
}

std::string_view trim(std::string_view text) {
  const char* space = " \t\r\n";
  size_t first = text.find_first_not_of(space);
  if (first == std::string_view::npos) return {};
  size_t last = text.find_last_not_of(space);
  return text.substr(first, last - first + 1);
}

struct ParsedCall {
  std::string name;
  std::string arguments;
};

// Arguments as JSON text: objects are serialized compactly, strings holding JSON kept as is.
std::optional<std::string> arguments_text(const ordered_json& call) {
  const ordered_json* arguments = nullptr;
  if (call.contains("arguments")) arguments = &call["arguments"];
  else if (call.contains("parameters")) arguments = &call["parameters"];
  if (!arguments) return std::string("{}");
  if (arguments->is_object()) return arguments->dump(-1, ' ', false, ordered_json::error_handler_t::replace);
  if (arguments->is_string()) {
    ordered_json inner = ordered_json::parse(arguments->get<std::string>(), nullptr, false);
    if (inner.is_discarded() || !inner.is_object()) return std::nullopt;
    return arguments->get<std::string>();
  }
  return std::nullopt;
}

std::optional<ParsedCall> parse_json_call(std::string_view text) {
  ordered_json call = ordered_json::parse(trim(text), nullptr, false);
  if (call.is_discarded() || !call.is_object()) return std::nullopt;
  auto name = call.find("name");
  if (name == call.end() || !name->is_string() || name->get<std::string>().empty()) return std::nullopt;
  auto arguments = arguments_text(call);
  if (!arguments) return std::nullopt;
  return ParsedCall{name->get<std::string>(), *arguments};
}

// DeepSeek V3 body: function<｜tool▁sep｜>NAME\n```json\nARGS\n```
std::optional<ParsedCall> parse_deepseek_call(std::string_view body) {
  static const std::string sep = "<｜tool▁sep｜>";
  size_t sep_pos = body.find(sep);
  if (sep_pos == std::string_view::npos) return std::nullopt;
  std::string_view rest = body.substr(sep_pos + sep.size());
  size_t newline = rest.find('\n');
  std::string_view name = trim(rest.substr(0, newline));
  if (name.empty() || newline == std::string_view::npos) return std::nullopt;
  std::string_view arguments = trim(rest.substr(newline + 1));
  if (arguments.substr(0, 3) == "```") {
    size_t line_end = arguments.find('\n');
    size_t fence_end = arguments.rfind("```");
    if (line_end == std::string_view::npos || fence_end <= line_end) return std::nullopt;
    arguments = trim(arguments.substr(line_end + 1, fence_end - line_end - 1));
  }
  ordered_json parsed = ordered_json::parse(arguments, nullptr, false);
  if (parsed.is_discarded() || !parsed.is_object()) return std::nullopt;
  return ParsedCall{std::string(name), parsed.dump(-1, ' ', false, ordered_json::error_handler_t::replace)};
}

class IdMaker {
 public:
  explicit IdMaker(std::function<std::string(int)> make_id) : make_id_(std::move(make_id)) {}
  std::string operator()(int index) {
    if (make_id_) return make_id_(index);
    static const char* alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    if (!seeded_) {
      rng_.seed(std::random_device{}());
      seeded_ = true;
    }
    std::string id = "call_";
    for (int i = 0; i < 24; ++i) id += alphabet[rng_() % 62];
    return id;
  }

 private:
  std::function<std::string(int)> make_id_;
  std::mt19937_64 rng_;
  bool seeded_ = false;
};

void emit_call(std::vector<ToolCallEvent>& events, int index, std::string id, const ParsedCall& call) {
  events.push_back({ToolCallEvent::Kind::tool_call_start, "", index, std::move(id), call.name});
  events.push_back({ToolCallEvent::Kind::arguments_delta, call.arguments, index, "", ""});
  events.push_back({ToolCallEvent::Kind::tool_call_end, "", index, "", ""});
}

void emit_content(std::vector<ToolCallEvent>& events, std::string text) {
  if (text.empty()) return;
  if (!events.empty() && events.back().kind == ToolCallEvent::Kind::content) {
    events.back().text += text;
    return;
  }
  events.push_back({ToolCallEvent::Kind::content, std::move(text), 0, "", ""});
}

struct MarkerFormat {
  std::string section_begin;  // empty: calls appear directly in the text
  std::string section_end;
  std::string call_begin;
  std::string call_end;
  std::function<std::optional<ParsedCall>(std::string_view)> parse_body;
};

class MarkerToolCallParser : public ToolCallParser {
 public:
  MarkerToolCallParser(MarkerFormat format, ToolCallParserOptions options)
      : format_(std::move(format)), make_id_(std::move(options.make_id)) {}

  std::vector<ToolCallEvent> feed(std::string_view delta) override {
    std::vector<ToolCallEvent> events;
    pending_.append(delta);
    step(events, false);
    return events;
  }

  std::vector<ToolCallEvent> finish() override {
    std::vector<ToolCallEvent> events;
    step(events, true);
    if (state_ == State::in_call) {
      emit_content(events, format_.call_begin + pending_);  // unfinished call: literal text
    } else if (state_ == State::outside) {
      emit_text(events, pending_);
    }
    pending_.clear();
    return events;
  }

 private:
  enum class State { outside, in_section, in_call };

  void emit_text(std::vector<ToolCallEvent>& events, const std::string& text) {
    // Whitespace around and between tool calls is not content. After a call, trailing
    // whitespace is held until more content follows (then it is content) or the next call or
    // the end comes (then it is dropped), so the result does not depend on delta boundaries.
    if (n_calls_ == 0) {
      emit_content(events, text);
      return;
    }
    size_t last = text.find_last_not_of(" \t\r\n");
    if (last == std::string::npos) {
      held_blank_ += text;
      return;
    }
    emit_content(events, held_blank_ + text.substr(0, last + 1));
    held_blank_ = text.substr(last + 1);
  }

  // Finds the earliest of `markers` in pending_; returns its index or -1.
  int find_marker(std::initializer_list<const std::string*> markers, size_t& at) const {
    int found = -1;
    int i = 0;
    at = std::string::npos;
    for (const std::string* marker : markers) {
      if (!marker->empty()) {
        size_t pos = pending_.find(*marker);
        if (pos < at) {
          at = pos;
          found = i;
        }
      }
      ++i;
    }
    return found;
  }

  void step(std::vector<ToolCallEvent>& events, bool final);
  void finish_call(std::vector<ToolCallEvent>& events, std::string body);

  MarkerFormat format_;
  IdMaker make_id_;
  State state_ = State::outside;
  std::string pending_;
  std::string held_blank_;  // whitespace after a call, not yet known to be content
  int n_calls_ = 0;
};

void MarkerToolCallParser::finish_call(std::vector<ToolCallEvent>& events, std::string body) {
  std::optional<ParsedCall> call = format_.parse_body(body);
  if (!call) {
    emit_content(events, format_.call_begin + body + format_.call_end);  // malformed: keep as text
    return;
  }
  int index = n_calls_++;
  emit_call(events, index, make_id_(index), *call);
}

void MarkerToolCallParser::step(std::vector<ToolCallEvent>& events, bool final) {
  const std::string& opener = format_.section_begin.empty() ? format_.call_begin : format_.section_begin;
  while (!pending_.empty()) {
    size_t at = 0;
    if (state_ == State::outside) {
      if (find_marker({&opener}, at) < 0) {
        size_t keep = final ? 0 : partial_suffix(pending_, opener);
        if (final) return;  // finish() releases the rest
        emit_text(events, pending_.substr(0, pending_.size() - keep));
        pending_.erase(0, pending_.size() - keep);
        return;
      }
      emit_text(events, pending_.substr(0, at));
      held_blank_.clear();  // separators before the next call
      pending_.erase(0, at + opener.size());
      state_ = format_.section_begin.empty() ? State::in_call : State::in_section;
      continue;
    }
    if (state_ == State::in_section) {
      int which = find_marker({&format_.call_begin, &format_.section_end}, at);
      if (which < 0) {
        size_t keep = std::max(partial_suffix(pending_, format_.call_begin), partial_suffix(pending_, format_.section_end));
        if (final) keep = 0;
        pending_.erase(0, pending_.size() - keep);  // separators between calls
        return;
      }
      if (which == 0) {
        pending_.erase(0, at + format_.call_begin.size());
        state_ = State::in_call;
      } else {
        pending_.erase(0, at + format_.section_end.size());
        state_ = State::outside;
      }
      continue;
    }
    // In a call: wait for its end marker.
    size_t end = pending_.find(format_.call_end);
    if (end == std::string::npos) {
      if (pending_.size() > k_max_call_bytes) {
        emit_content(events, format_.call_begin + pending_);
        pending_.clear();
        state_ = format_.section_begin.empty() ? State::outside : State::in_section;
      }
      return;
    }
    std::string body = pending_.substr(0, end);
    pending_.erase(0, end + format_.call_end.size());
    state_ = format_.section_begin.empty() ? State::outside : State::in_section;
    finish_call(events, std::move(body));
  }
}

// Llama 3: the whole output is one or more JSON calls separated by ';'.
class Llama3JsonToolCallParser : public ToolCallParser {
 public:
  explicit Llama3JsonToolCallParser(ToolCallParserOptions options) : make_id_(std::move(options.make_id)) {}

  std::vector<ToolCallEvent> feed(std::string_view delta) override {
    std::vector<ToolCallEvent> events;
    if (mode_ == Mode::content) {
      emit_content(events, std::string(delta));
      return events;
    }
    buffer_.append(delta);
    if (mode_ == Mode::undecided) decide(events, false);
    if (mode_ == Mode::json && buffer_.size() > k_max_call_bytes) {
      mode_ = Mode::content;
      emit_content(events, std::move(buffer_));
      buffer_.clear();
    }
    return events;
  }

  std::vector<ToolCallEvent> finish() override {
    std::vector<ToolCallEvent> events;
    if (mode_ == Mode::undecided) decide(events, true);
    if (mode_ == Mode::json) {
      std::vector<ParsedCall> calls;
      if (parse_all(calls)) {
        for (const ParsedCall& call : calls) {
          int index = n_calls_++;
          emit_call(events, index, make_id_(index), call);
        }
      } else {
        emit_content(events, buffer_);
      }
    }
    buffer_.clear();
    return events;
  }

 private:
  enum class Mode { undecided, json, content };
  static constexpr std::string_view k_python_tag = "<|python_tag|>";

  void decide(std::vector<ToolCallEvent>& events, bool final) {
    std::string_view text = trim(buffer_);
    if (text.empty() && !final) return;
    if (text.substr(0, 1) == "{" || text.substr(0, k_python_tag.size()) == k_python_tag) {
      mode_ = Mode::json;
      return;
    }
    if (!final && k_python_tag.substr(0, text.size()) == text) return;  // maybe the tag
    mode_ = Mode::content;
    emit_content(events, std::move(buffer_));
    buffer_.clear();
  }

  bool parse_all(std::vector<ParsedCall>& calls) const {
    std::string_view text = trim(buffer_);
    if (text.substr(0, k_python_tag.size()) == k_python_tag) text = trim(text.substr(k_python_tag.size()));
    // Split on ';' outside strings and brackets.
    int depth = 0;
    bool in_string = false, escaped = false;
    size_t start = 0;
    for (size_t i = 0; i <= text.size(); ++i) {
      char c = i < text.size() ? text[i] : ';';
      if (in_string) {
        if (escaped) escaped = false;
        else if (c == '\\') escaped = true;
        else if (c == '"') in_string = false;
        continue;
      }
      if (c == '"') in_string = true;
      else if (c == '{' || c == '[') ++depth;
      else if (c == '}' || c == ']') --depth;
      else if (c == ';' && depth == 0) {
        std::string_view piece = trim(text.substr(start, i - start));
        start = i + 1;
        if (piece.empty() && i == text.size() && !calls.empty()) continue;
        std::optional<ParsedCall> call = parse_json_call(piece);
        if (!call) return false;
        calls.push_back(*call);
      }
    }
    return !calls.empty();
  }

  IdMaker make_id_;
  Mode mode_ = Mode::undecided;
  std::string buffer_;
  int n_calls_ = 0;
};

}  // namespace

std::unique_ptr<ToolCallParser> make_tool_call_parser(std::string_view name, ToolCallParserOptions options) {
  if (name == "hermes" || name == "qwen" || name == "qwen3") {
    MarkerFormat format{"", "", "<tool_call>", "</tool_call>", parse_json_call};
    return std::make_unique<MarkerToolCallParser>(std::move(format), std::move(options));
  }
  if (name == "deepseek_v3" || name == "deepseek") {
    MarkerFormat format{"<｜tool▁calls▁begin｜>", "<｜tool▁calls▁end｜>", "<｜tool▁call▁begin｜>",
                        "<｜tool▁call▁end｜>", parse_deepseek_call};
    return std::make_unique<MarkerToolCallParser>(std::move(format), std::move(options));
  }
  if (name == "llama3_json" || name == "llama3") return std::make_unique<Llama3JsonToolCallParser>(std::move(options));
  fail_usage("unknown tool-call parser '{}' (known: hermes, llama3_json, deepseek_v3)", name);
}

ParsedToolOutput collect_tool_calls(const std::vector<ToolCallEvent>& events) {
  ParsedToolOutput out;
  for (const ToolCallEvent& event : events) {
    switch (event.kind) {
      case ToolCallEvent::Kind::content: out.content += event.text; break;
      case ToolCallEvent::Kind::tool_call_start: out.tool_calls.push_back({event.id, event.name, ""}); break;
      case ToolCallEvent::Kind::arguments_delta:
        if (!out.tool_calls.empty()) out.tool_calls.back().arguments += event.text;
        break;
      case ToolCallEvent::Kind::tool_call_end: break;
    }
  }
  return out;
}

}  // namespace flare::text
