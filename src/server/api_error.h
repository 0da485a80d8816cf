// HTTP errors and each API's error shape. Adapters throw ApiError (a status, the offending
// field and a message); the router renders it in the shape of the API that was called:
//   OpenAI / Responses: {"error": {"message", "type", "param", "code"}}
//   Anthropic:          {"type": "error", "error": {"type", "message"}}
// This is the one place that maps flare::Error exit codes to HTTP statuses.
#pragma once

#include <stdexcept>
#include <string>

#include <fmt/format.h>

namespace flare::server {

enum class ApiStyle : uint8_t { openai, anthropic };

class ApiError : public std::runtime_error {
 public:
  ApiError(int status, std::string param, std::string message, std::string code = {})
      : std::runtime_error(std::move(message)), status_(status), param_(std::move(param)),
        code_(std::move(code)) {}
  int status() const noexcept { return status_; }
  const std::string& param() const noexcept { return param_; }  // empty: no single field
  const std::string& code() const noexcept { return code_; }    // e.g. "invalid_api_key"

 private:
  int status_;
  std::string param_;
  std::string code_;
};

// A 400 naming the field: bad_field("messages[0].role", "must be one of ...").
template <typename... Args>
[[noreturn]] void fail_field(const std::string& field, fmt::format_string<Args...> format, Args&&... args) {
  std::string detail = fmt::format(format, std::forward<Args>(args)...);
  throw ApiError(400, field, field.empty() ? detail : fmt::format("'{}': {}", field, detail));
}

// The error type names each API uses for a status.
std::string error_type_for(ApiStyle style, int status);
// The JSON body for an error in the given style.
std::string error_body(ApiStyle style, int status, const std::string& message,
                       const std::string& param = {}, const std::string& code = {});
std::string error_body(ApiStyle style, const ApiError& error);
// Maps any exception escaping an adapter to (status, body). flare::Error with ExitCode::capacity
// becomes 400 (never fits) and the rest 400/500 by code; unknown exceptions are 500.
struct RenderedError {
  int status = 500;
  std::string body;
};
RenderedError render_exception(ApiStyle style, const std::exception& error);

}  // namespace flare::server
