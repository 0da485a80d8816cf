// One choice's output on the HTTP side: engine token ids -> incremental detokenizer -> stop
// strings (text that may start a stop string is held back) -> output parser (reasoning,
// tool calls) -> ordered events for the API writers. Also collects logprobs and the totals
// a non-streaming response needs. Owned by one connection; used by one thread at a time.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "server/frontend.h"

namespace flare::server {

struct LogprobEntry {
  TokenId token_id = 0;
  std::string token;  // the token's bytes (may be partial UTF-8)
  float logprob = 0.0f;
  std::vector<std::pair<std::string, float>> top;  // best first
  std::vector<TokenId> top_ids;
};

struct ToolCall {
  std::string id;  // "call_..." unique per call
  std::string name;
  std::string arguments;  // JSON text as generated
};

// An ordered event of one step. tool_call_* events carry the index into ChoiceStream::tool_calls().
struct ChoiceEvent {
  ParsedEvent::Kind kind = ParsedEvent::Kind::content;
  std::string text;
  int32_t tool_index = -1;
};

struct ChoiceDelta {
  std::vector<ChoiceEvent> events;   // coalesced, in generation order
  std::string raw_text;              // visible text before parsing (completions)
  std::vector<LogprobEntry> logprobs;
  std::vector<LogprobEntry> prompt_logprobs;
  bool finished = false;             // this step finished the choice
  bool stopped_by_string = false;    // the server must cancel the choice in the engine
};

struct ChoiceOptions {
  bool parse = true;                 // run the output parser (chat-style APIs)
  ParserOptions parser;
  std::vector<std::string> stop_strings;
  bool include_stop_string = false;
  bool skip_special_tokens = true;
  bool logprobs = false;
  bool prompt_logprobs = false;
  std::string tool_call_id_prefix = "call_";
};

class ChoiceStream {
 public:
  ChoiceStream(const Frontend& frontend, ChoiceOptions options);
  ChoiceDelta push(const engine::StepOutput& output);

  bool finished() const { return finish_reason_ != engine::FinishReason::none; }
  engine::FinishReason finish_reason() const { return finish_reason_; }
  const std::string& matched_stop_string() const { return matched_stop_; }  // when stopped by a string
  engine::TokenId stop_token_id() const { return stop_token_id_; }
  const std::string& error_message() const { return error_message_; }
  bool capacity_error() const { return capacity_error_; }  // see engine::StepOutput::capacity_error
  // Totals over the whole choice (non-streaming responses).
  const std::string& raw_text() const { return raw_text_; }
  const std::string& content() const { return content_; }
  const std::string& reasoning() const { return reasoning_; }
  const std::vector<ToolCall>& tool_calls() const { return tool_calls_; }
  const std::vector<LogprobEntry>& logprobs() const { return logprobs_; }
  const std::vector<LogprobEntry>& prompt_logprobs() const { return prompt_logprobs_; }
  int32_t n_generated_tokens() const { return n_generated_tokens_; }

 private:
  void append_text(std::string text, ChoiceDelta& delta);
  void emit_visible(const std::string& text, ChoiceDelta& delta);
  void add_events(std::vector<ParsedEvent> events, ChoiceDelta& delta);
  LogprobEntry logprob_entry(const engine::TokenOutput& token) const;

  const Frontend& frontend_;
  ChoiceOptions options_;
  std::unique_ptr<Detokenizer> detokenizer_;
  std::unique_ptr<OutputParser> parser_;
  std::string held_;  // decoded text that may be the start of a stop string
  engine::FinishReason finish_reason_ = engine::FinishReason::none;
  std::string matched_stop_;
  engine::TokenId stop_token_id_ = -1;
  std::string error_message_;
  bool capacity_error_ = false;
  std::string raw_text_, content_, reasoning_;
  std::vector<ToolCall> tool_calls_;
  std::vector<LogprobEntry> logprobs_, prompt_logprobs_;
  int32_t n_generated_tokens_ = 0;
};

// A random id with the given prefix: "chatcmpl-" + 24 alphanumerics.
std::string make_random_id(const std::string& prefix, size_t n_chars = 24);

}  // namespace flare::server
