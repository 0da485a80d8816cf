// The plain types between the HTTP layer and the API adapters: a parsed HTTP request, an
// HTTP response, and a generation job (one internal GenerationRequest plus the responder that
// turns engine outputs back into the API's JSON or SSE events). No Boost, no JSON here.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "engine/request.h"
#include "server/api_error.h"

namespace flare::server {

class Frontend;
struct ModelInfo;

struct HttpRequest {
  std::string method;                         // "GET", "POST", ...
  std::string target;                         // path with query
  std::map<std::string, std::string> headers;  // lower-case names
  std::string body;
  std::string header(const std::string& lower_name) const {
    auto it = headers.find(lower_name);
    return it == headers.end() ? std::string() : it->second;
  }
};

struct HttpResponse {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;
};

// Turns one request's engine outputs into the API's answer. Used on one thread at a time.
class GenerationResponder {
 public:
  virtual ~GenerationResponder() = default;
  virtual bool streaming() const = 0;
  // Streaming: bytes sent right after the headers (e.g. Anthropic's message_start).
  virtual std::string stream_start() { return {}; }
  // Consumes one engine output of job.requests[request_index]; returns the bytes to send now
  // (streaming only).
  virtual std::string on_output(size_t request_index, const engine::StepOutput& output) = 0;
  // Non-streaming: the complete response, once done().
  virtual HttpResponse final_response() = 0;
  // Streaming: the bytes that report an error after the headers went out.
  virtual std::string stream_error(const std::string& message) = 0;
  // (request index, choice index) pairs that a stop string finished; the server cancels them.
  std::vector<std::pair<size_t, int32_t>> take_cancelled_choices() { return std::exchange(cancelled_choices_, {}); }
  bool done() const { return done_; }
  const engine::Usage& usage() const { return usage_; }

 protected:
  std::vector<std::pair<size_t, int32_t>> cancelled_choices_;
  bool done_ = false;
  engine::Usage usage_;
};

// Usually one request; /v1/completions with a list of prompts makes one per prompt.
struct GenerationJob {
  std::vector<engine::GenerationRequest> requests;
  std::unique_ptr<GenerationResponder> responder;
  ApiStyle style = ApiStyle::openai;
};

struct AdapterContext {
  const Frontend& frontend;
  const ModelInfo& model;
};

// The response to an admission rejection: when the engine is busy 503 (OpenAI, Responses) or
// 529 overloaded_error (Anthropic), 400 when the request can never fit; the body carries the
// capacity form.
HttpResponse admission_error_response(ApiStyle style, const engine::AdmissionError& error);

}  // namespace flare::server
