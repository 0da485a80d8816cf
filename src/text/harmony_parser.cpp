// Streaming harmony output parser (harmony_parser.h).
#include "text/harmony_parser.h"

#include <array>

namespace flare::text {

namespace {

constexpr std::array<std::string_view, 7> kSpecials = {kHarmonyStart,     kHarmonyEnd,    kHarmonyMessage, kHarmonyChannel,
                                                       kHarmonyConstrain, kHarmonyReturn, kHarmonyCall};

struct Special {
  size_t at = std::string_view::npos;
  std::string_view token;  // empty: none found
};

// The first known special token at or after `from`; unknown <|...|> text is literal.
Special next_special(std::string_view text, size_t from = 0) {
  for (size_t at = text.find("<|", from); at != std::string_view::npos; at = text.find("<|", at + 1)) {
    for (std::string_view token : kSpecials) {
      if (text.compare(at, token.size(), token) == 0) return {at, token};
    }
  }
  return {};
}

// Length of the longest suffix of `text` that is a proper prefix of a special token.
size_t partial_special_suffix(std::string_view text) {
  constexpr size_t kLongest = 13;  // "<|constrain|>"
  for (size_t n = std::min(text.size(), kLongest - 1); n > 0; --n) {
    std::string_view tail = text.substr(text.size() - n);
    for (std::string_view token : kSpecials) {
      if (tail.size() < token.size() && token.substr(0, tail.size()) == tail) return n;
    }
  }
  return 0;
}

bool is_space(char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; }

std::vector<std::string_view> words(std::string_view text) {
  std::vector<std::string_view> out;
  size_t i = 0;
  while (i < text.size()) {
    while (i < text.size() && is_space(text[i])) ++i;
    size_t begin = i;
    while (i < text.size() && !is_space(text[i])) ++i;
    if (i > begin) out.push_back(text.substr(begin, i - begin));
  }
  return out;
}

struct Header {
  std::string role, channel, recipient, content_type;
};

// "assistant to=X<|channel|>commentary json" or "<|channel|>commentary to=X <|constrain|>json":
// the recipient may sit in the role or the channel part.
Header parse_header(std::string_view raw) {
  Header header;
  enum class Part { role, channel, constrain } part = Part::role;
  size_t begin = 0;
  while (begin <= raw.size()) {
    Special special = next_special(raw, begin);
    size_t end = special.token.empty() ? raw.size() : special.at;
    for (std::string_view word : words(raw.substr(begin, end - begin))) {
      if (word.starts_with("to=")) header.recipient = std::string(word.substr(3));
      else if (part == Part::role && header.role.empty()) header.role = std::string(word);
      else if (part == Part::channel && header.channel.empty()) header.channel = std::string(word);
      else if (part != Part::role && header.content_type.empty()) header.content_type = std::string(word);
    }
    if (special.token.empty()) break;
    if (special.token == kHarmonyChannel) part = Part::channel;
    else if (special.token == kHarmonyConstrain) part = Part::constrain;
    begin = special.at + special.token.size();
  }
  return header;
}

std::string trim(std::string_view text) {
  size_t begin = 0, end = text.size();
  while (begin < end && is_space(text[begin])) ++begin;
  while (end > begin && is_space(text[end - 1])) --end;
  return std::string(text.substr(begin, end - begin));
}

HarmonyEvent text_event(HarmonyEvent::Kind kind, std::string text) {
  HarmonyEvent event;
  event.kind = kind;
  event.text = std::move(text);
  return event;
}

}  // namespace

HarmonyParser::HarmonyParser(HarmonyParserOptions options)
    : options_(std::move(options)), state_(options_.prompt_opened_assistant ? State::header : State::between) {}

std::vector<HarmonyEvent> HarmonyParser::feed(std::string_view delta) {
  std::vector<HarmonyEvent> out;
  if (state_ == State::done) {
    if (!trim(delta).empty()) note("text after the end of the response");
    return out;
  }
  pending_.append(delta);
  step(out, false);
  return out;
}

std::vector<HarmonyEvent> HarmonyParser::finish() {
  std::vector<HarmonyEvent> out;
  if (state_ == State::done) return out;
  step(out, true);
  if (state_ == State::header && !trim(header_).empty()) note("output ended inside a message header");
  if (state_ == State::body) close_body(out, {});
  end_response(out, n_tool_calls_ > 0 ? HarmonyFinish::tool_calls : HarmonyFinish::stop);
  return out;
}

void HarmonyParser::note(std::string problem) {
  if (problem_.empty()) problem_ = std::move(problem);
}

void HarmonyParser::step(std::vector<HarmonyEvent>& out, bool final) {
  bool progress = true;
  while (progress && state_ != State::done) {
    switch (state_) {
      case State::between: progress = step_between(out, final); break;
      case State::header: progress = step_header(out, final); break;
      case State::body: progress = step_body(out, final); break;
      case State::done: progress = false; break;
    }
  }
  if (state_ == State::done) pending_.clear();
}

// Between messages only whitespace and <|start|> belong; stray text is shown as content.
bool HarmonyParser::step_between(std::vector<HarmonyEvent>& out, bool final) {
  size_t first = 0;
  while (first < pending_.size() && is_space(pending_[first])) ++first;
  pending_.erase(0, first);
  if (pending_.empty()) return false;
  Special special = next_special(pending_);
  if (special.at == 0) {
    pending_.erase(0, special.token.size());
    if (special.token == kHarmonyStart) {
      header_.clear();
      state_ = State::header;
    } else if (special.token == kHarmonyChannel) {
      header_ = std::string(kHarmonyChannel);  // the model left out "<|start|>assistant"
      state_ = State::header;
    } else if (special.token == kHarmonyMessage) {
      header_.clear();
      note("<|message|> without a header");
      open_body(out);
    } else if (special.token == kHarmonyReturn) {
      end_response(out, n_tool_calls_ > 0 ? HarmonyFinish::tool_calls : HarmonyFinish::stop);
    } else {
      note("stray " + std::string(special.token) + " between messages");
    }
    return true;
  }
  size_t end = special.token.empty() ? pending_.size() : special.at;
  if (special.token.empty() && !final) end -= partial_special_suffix(pending_);
  if (end == 0) return false;
  note("text outside a message");
  out.push_back(text_event(HarmonyEvent::Kind::content, pending_.substr(0, end)));
  pending_.erase(0, end);
  return true;
}

bool HarmonyParser::step_header(std::vector<HarmonyEvent>& out, bool final) {
  Special special = next_special(pending_);
  while (!special.token.empty() && (special.token == kHarmonyChannel || special.token == kHarmonyConstrain)) {
    special = next_special(pending_, special.at + special.token.size());
  }
  if (special.token.empty()) {
    size_t keep = final ? 0 : partial_special_suffix(pending_);
    header_.append(pending_, 0, pending_.size() - keep);
    pending_.erase(0, pending_.size() - keep);
    if (header_.size() > options_.max_header_bytes) {
      note("message header too long");
      out.push_back(text_event(HarmonyEvent::Kind::content, std::move(header_)));
      header_.clear();
      route_ = Route::content;
      state_ = State::body;
      return true;
    }
    return false;
  }
  header_.append(pending_, 0, special.at);
  pending_.erase(0, special.at + special.token.size());
  if (header_.size() > options_.max_header_bytes) {
    note("message header too long");
    out.push_back(text_event(HarmonyEvent::Kind::content, std::move(header_)));
    header_.clear();  // garbage: shown as content, and so is the message that follows
  }
  if (special.token == kHarmonyStart) {
    note("<|start|> inside a message header");
    header_.clear();
    return true;
  }
  open_body(out);
  if (special.token != kHarmonyMessage) {
    note("message ended before <|message|>");
    close_body(out, special.token);
  }
  return true;
}

bool HarmonyParser::step_body(std::vector<HarmonyEvent>& out, bool final) {
  Special special = next_special(pending_);
  // Header specials inside a message are literal text (the model should not write them).
  while (!special.token.empty() && special.token != kHarmonyEnd && special.token != kHarmonyReturn &&
         special.token != kHarmonyCall && special.token != kHarmonyStart) {
    note(std::string(special.token) + " inside a message");
    special = next_special(pending_, special.at + special.token.size());
  }
  if (special.token.empty()) {
    size_t keep = final ? 0 : partial_special_suffix(pending_);
    if (pending_.size() == keep) return false;
    emit_body(out, std::string_view(pending_).substr(0, pending_.size() - keep));
    pending_.erase(0, pending_.size() - keep);
    return false;
  }
  emit_body(out, std::string_view(pending_).substr(0, special.at));
  std::string_view token = special.token;
  pending_.erase(0, special.at + token.size());
  if (token == kHarmonyStart) {
    note("message not ended before <|start|>");
    close_body(out, kHarmonyEnd);
    header_.clear();
    state_ = State::header;
    return true;
  }
  close_body(out, token);
  return true;
}

void HarmonyParser::open_body(std::vector<HarmonyEvent>& out) {
  Header header = parse_header(header_);
  header_.clear();
  state_ = State::body;
  arguments_.clear();
  tool_name_.clear();
  if (header.role.empty() && options_.prompt_opened_assistant) header.role = "assistant";
  if (header.role != "assistant") note("message from '" + header.role + "' in the output");
  if (header.recipient.starts_with("functions.") && header.recipient.size() > 10) {
    route_ = Route::tool_call;
    tool_name_ = header.recipient.substr(10);
    if (options_.stream_arguments) {
      HarmonyEvent start;
      start.kind = HarmonyEvent::Kind::tool_call_start;
      start.index = n_tool_calls_;
      start.name = tool_name_;
      out.push_back(std::move(start));
    }
    return;
  }
  if (!header.recipient.empty() && header.recipient != "assistant") {
    route_ = Route::reasoning;  // a built-in tool (browser, python) the server does not run
    return;
  }
  if (header.channel == "analysis") {
    route_ = Route::reasoning;
    return;
  }
  route_ = Route::content;
  if (header.channel.empty()) note("message without a channel");
  else if (header.channel != "final" && header.channel != "commentary") note("unknown channel '" + header.channel + "'");
}

void HarmonyParser::emit_body(std::vector<HarmonyEvent>& out, std::string_view text) {
  if (text.empty()) return;
  if (route_ == Route::tool_call) {
    arguments_.append(text);
    if (options_.stream_arguments) {
      HarmonyEvent delta = text_event(HarmonyEvent::Kind::arguments_delta, std::string(text));
      delta.index = n_tool_calls_;
      out.push_back(std::move(delta));
    }
    return;
  }
  auto kind = route_ == Route::reasoning ? HarmonyEvent::Kind::reasoning : HarmonyEvent::Kind::content;
  if (!out.empty() && out.back().kind == kind) out.back().text.append(text);
  else out.push_back(text_event(kind, std::string(text)));
}

// Ends the open message; `marker` is the closing special, empty at the end of the output.
void HarmonyParser::close_body(std::vector<HarmonyEvent>& out, std::string_view marker) {
  state_ = State::between;
  if (route_ == Route::tool_call) {
    std::string arguments = trim(arguments_);
    if (arguments.empty()) arguments = "{}";
    int index = n_tool_calls_;
    if (options_.stream_arguments) {
      ++n_tool_calls_;
      HarmonyEvent end;
      end.kind = HarmonyEvent::Kind::tool_call_end;
      end.index = index;
      out.push_back(std::move(end));
    } else if (nlohmann::json::accept(arguments)) {
      ++n_tool_calls_;
      HarmonyEvent start;
      start.kind = HarmonyEvent::Kind::tool_call_start;
      start.index = index;
      start.name = tool_name_;
      out.push_back(std::move(start));
      HarmonyEvent delta = text_event(HarmonyEvent::Kind::arguments_delta, std::move(arguments));
      delta.index = index;
      out.push_back(std::move(delta));
      HarmonyEvent end;
      end.kind = HarmonyEvent::Kind::tool_call_end;
      end.index = index;
      out.push_back(std::move(end));
    } else {
      note("tool call to '" + tool_name_ + "' with arguments that are not JSON");
      out.push_back(text_event(HarmonyEvent::Kind::content, arguments_));
    }
    arguments_.clear();
  }
  route_ = Route::content;
  // <|call|> ends the call, not the response: a model not stopped there may call again.
  if (marker == kHarmonyCall && n_tool_calls_ > 0) finish_ = HarmonyFinish::tool_calls;
  if (marker == kHarmonyReturn) end_response(out, n_tool_calls_ > 0 ? HarmonyFinish::tool_calls : HarmonyFinish::stop);
}

void HarmonyParser::end_response(std::vector<HarmonyEvent>& out, HarmonyFinish finish) {
  if (state_ == State::body) close_body(out, {});
  state_ = State::done;
  finish_ = finish;
  if (!trim(pending_).empty()) note("text after the end of the response");
  pending_.clear();
  HarmonyEvent end;
  end.kind = HarmonyEvent::Kind::end;
  end.finish = finish;
  out.push_back(std::move(end));
}

HarmonyParsedOutput collect_harmony_events(const std::vector<HarmonyEvent>& events) {
  HarmonyParsedOutput parsed;
  parsed.message.role = "assistant";
  auto& calls = parsed.message.tool_calls;
  for (const auto& event : events) {
    switch (event.kind) {
      case HarmonyEvent::Kind::content: parsed.message.content += event.text; break;
      case HarmonyEvent::Kind::reasoning: parsed.message.reasoning += event.text; break;
      case HarmonyEvent::Kind::tool_call_start: calls.push_back({event.name, {}}); break;
      case HarmonyEvent::Kind::arguments_delta:
        if (!calls.empty()) calls.back().arguments += event.text;
        break;
      case HarmonyEvent::Kind::tool_call_end: break;
      case HarmonyEvent::Kind::end: parsed.finish = event.finish; break;
    }
  }
  return parsed;
}

HarmonyParsedOutput harmony_parse_output(std::string_view text, HarmonyParserOptions options) {
  HarmonyParser parser(std::move(options));
  std::vector<HarmonyEvent> events = parser.feed(text);
  std::vector<HarmonyEvent> rest = parser.finish();
  events.insert(events.end(), rest.begin(), rest.end());
  return collect_harmony_events(events);
}

}  // namespace flare::text
