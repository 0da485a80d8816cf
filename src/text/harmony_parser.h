// Streaming parser for gpt-oss (harmony) output: the text after the prompt's
// "<|start|>assistant", fed in detokenized pieces cut anywhere (special tokens and tool calls
// may be split across pieces; a suffix that could still become a special token is held back).
// Each message is routed by its header:
//   <|channel|>analysis               -> reasoning deltas
//   <|channel|>final, commentary      -> content deltas (commentary without a recipient is a
//                                        preamble meant for the user)
//   to=functions.NAME (any channel)   -> a tool call: start (name), arguments, end
//   to=OTHER (built-in browser/python) -> reasoning (not shown, not run here)
// <|return|> ends the response (`end` event: stop, or tool_calls if a call was made); <|call|>
// ends a call and sets finish_reason() to tool_calls, and the `end` event follows at finish().
// When the engine consumed the stop token and it never reaches the text, finish() closes the
// open message the same way.
// Arguments are held until the call's message closes and checked as JSON, so a broken call
// degrades to content (as in parser_tool_call.h); with stream_arguments they go out as deltas.
// Malformed output (stray text, unknown channels, headers that never close, specials inside a
// message) never throws: it degrades to content and problem() says what was wrong.
// The server's OutputParser for gpt-oss packages wraps one HarmonyParser (server/harmony_chat.h)
// and keeps special tokens in the detokenized text. One parser per request; not thread-safe.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "text/harmony.h"

namespace flare::text {

enum class HarmonyFinish { none, stop, tool_calls };

struct HarmonyEvent {
  enum class Kind { content, reasoning, tool_call_start, arguments_delta, tool_call_end, end };
  Kind kind = Kind::content;
  std::string text;  // content, reasoning, or an arguments fragment (JSON text)
  int index = 0;     // tool call index within the response
  std::string name;  // tool_call_start: the function name, without "functions."
  HarmonyFinish finish = HarmonyFinish::none;  // end only
};

struct HarmonyParserOptions {
  bool prompt_opened_assistant = true;  // the prompt ended with "<|start|>assistant"
  bool stream_arguments = false;        // send arguments as they arrive (no JSON check)
  size_t max_header_bytes = 512;        // a longer header is garbage: shown as content
};

class HarmonyParser {
 public:
  explicit HarmonyParser(HarmonyParserOptions options = {});

  std::vector<HarmonyEvent> feed(std::string_view delta);
  // End of generation: releases held-back text, closes the open message, emits `end`.
  std::vector<HarmonyEvent> finish();

  HarmonyFinish finish_reason() const { return finish_; }
  bool degraded() const { return !problem_.empty(); }
  const std::string& problem() const { return problem_; }  // the first malformation seen

 private:
  enum class State { between, header, body, done };
  enum class Route { content, reasoning, tool_call };

  void step(std::vector<HarmonyEvent>& out, bool final);
  bool step_between(std::vector<HarmonyEvent>& out, bool final);
  bool step_header(std::vector<HarmonyEvent>& out, bool final);
  bool step_body(std::vector<HarmonyEvent>& out, bool final);
  void open_body(std::vector<HarmonyEvent>& out);
  void emit_body(std::vector<HarmonyEvent>& out, std::string_view text);
  void close_body(std::vector<HarmonyEvent>& out, std::string_view marker);
  void end_response(std::vector<HarmonyEvent>& out, HarmonyFinish finish);
  void note(std::string problem);

  HarmonyParserOptions options_;
  State state_;
  std::string pending_;    // text not yet classified
  std::string header_;     // the open message's header, specials included
  Route route_ = Route::content;
  std::string tool_name_;  // route_ == tool_call
  std::string arguments_;  // route_ == tool_call, held until the message closes
  int n_tool_calls_ = 0;
  HarmonyFinish finish_ = HarmonyFinish::none;
  std::string problem_;
};

// Whole-output helper: the assistant message the events describe, and how it ended.
struct HarmonyParsedOutput {
  HarmonyMessage message;  // role "assistant": reasoning, content, tool_calls
  HarmonyFinish finish = HarmonyFinish::none;
};
HarmonyParsedOutput collect_harmony_events(const std::vector<HarmonyEvent>& events);
// Parses a complete output in one piece.
HarmonyParsedOutput harmony_parse_output(std::string_view text, HarmonyParserOptions options = {});

}  // namespace flare::text
