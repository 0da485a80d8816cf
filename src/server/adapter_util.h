// Helpers shared by the API adapters: SSE framing, logprob and usage JSON, timestamps, the
// common responder base that owns one ChoiceStream per choice. Included by adapter .cpp files.
#pragma once

#include <string>
#include <vector>

#include "server/api.h"
#include "server/choice_stream.h"
#include "server/json_body.h"

namespace flare::server {

std::string sse_data(const json& payload);                          // "data: {...}\n\n"
std::string sse_event(const std::string& name, const json& payload);  // "event: x\ndata: {...}\n\n"
std::string dump_json(const json& value);                             // invalid UTF-8 replaced
int64_t unix_now_s();
// Valid UTF-8 with invalid bytes replaced by U+FFFD (token texts can be partial characters).
std::string sanitize_utf8(const std::string& text);
std::vector<int> utf8_bytes(const std::string& text);

// OpenAI chat logprobs: {"content": [{"token", "logprob", "bytes", "top_logprobs": [...]}]}.
json chat_logprobs_json(const std::vector<LogprobEntry>& entries, int32_t n_top);
// Converts a tool call's argument text into what a client expects: the text as is.
json usage_json_openai(const engine::Usage& usage);

// A choice that ended in an engine error, answered whole: running out of KV memory is the spec's
// capacity error and worth a retry (503, Anthropic's 529, with Retry-After); anything else is a
// 500 "generation failed".
HttpResponse generation_error_response(ApiStyle style, const ChoiceStream& stream);
// The same error as the body of a streamed error event (the stream has already answered 200).
std::string generation_error_body(ApiStyle style, const ChoiceStream& stream);

// One ChoiceStream per choice, usage bookkeeping and stop-string cancellations.
class ResponderBase : public GenerationResponder {
 public:
  // Choices of all requests, request-major: choice(r * n + c). Every request has the same n.
  ResponderBase(const Frontend& frontend, const std::vector<engine::GenerationRequest>& requests,
                const ChoiceOptions& options, bool stream);
  bool streaming() const override { return stream_; }

 protected:
  // Routes the output to its choice; records usage, cancellations and completion.
  // `flat_index` receives the choice's index over all requests (-1 if out of range).
  ChoiceDelta consume(size_t request_index, const engine::StepOutput& output, int32_t& flat_index);
  ChoiceStream& choice(size_t index) { return choices_[index]; }
  const ChoiceStream& choice(size_t index) const { return choices_[index]; }
  size_t n_choices() const { return choices_.size(); }

  bool stream_;
  int32_t n_per_request_ = 1;
  std::vector<ChoiceStream> choices_;
  std::vector<engine::Usage> request_usage_;
  std::vector<bool> request_finished_;
};

// Parses a tool call's argument text as JSON for templates; invalid text fails the field.
json parse_tool_arguments(const json& arguments, const std::string& field);

}  // namespace flare::server
