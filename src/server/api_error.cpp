// Error shapes per API (see api_error.h).
#include "server/api_error.h"

#include <nlohmann/json.hpp>

#include "common/error.h"

namespace flare::server {

std::string error_type_for(ApiStyle style, int status) {
  if (style == ApiStyle::anthropic) {
    switch (status) {
      case 401: return "authentication_error";
      case 403: return "permission_error";
      case 404: return "not_found_error";
      case 413: return "request_too_large";
      case 429: return "rate_limit_error";
      case 503:
      case 529: return "overloaded_error";
      default: return status >= 500 ? "api_error" : "invalid_request_error";
    }
  }
  switch (status) {
    case 401: return "authentication_error";
    case 404: return "not_found_error";
    case 429: return "rate_limit_error";
    case 503: return "service_unavailable";
    default: return status >= 500 ? "server_error" : "invalid_request_error";
  }
}

std::string error_body(ApiStyle style, int status, const std::string& message,
                       const std::string& param, const std::string& code) {
  nlohmann::json body;
  if (style == ApiStyle::anthropic) {
    body = {{"type", "error"}, {"error", {{"type", error_type_for(style, status)}, {"message", message}}}};
  } else {
    body = {{"error",
             {{"message", message},
              {"type", error_type_for(style, status)},
              {"param", param.empty() ? nlohmann::json(nullptr) : nlohmann::json(param)},
              {"code", code.empty() ? nlohmann::json(nullptr) : nlohmann::json(code)}}}};
  }
  return body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string error_body(ApiStyle style, const ApiError& error) {
  return error_body(style, error.status(), error.what(), error.param(), error.code());
}

RenderedError render_exception(ApiStyle style, const std::exception& error) {
  if (auto* api = dynamic_cast<const ApiError*>(&error)) return {api->status(), error_body(style, *api)};
  if (auto* flare_error = dynamic_cast<const Error*>(&error)) {
    int status = flare_error->code() == ExitCode::failure || flare_error->code() == ExitCode::usage ||
                         flare_error->code() == ExitCode::capacity
                     ? 400
                     : 500;
    return {status, error_body(style, status, flare_error->what())};
  }
  if (dynamic_cast<const nlohmann::json::exception*>(&error)) {
    return {400, error_body(style, 400, std::string("invalid request: ") + error.what())};
  }
  return {500, error_body(style, 500, std::string("internal error: ") + error.what())};
}

}  // namespace flare::server
