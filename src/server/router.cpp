// Route table, authentication and error rendering (router.h).
#include "server/router.h"

#include <algorithm>

#include "server/adapter_util.h"
#include "server/adapters.h"
#include "server/connection_limits.h"

namespace flare::server {

ServerLimits derive_limits(const ModelInfo& model, int64_t open_file_limit) {
  ServerLimits limits;
  size_t context_bytes = static_cast<size_t>(std::max(model.max_context_tokens, 1)) * 16u;
  limits.max_body_bytes = std::min<size_t>(context_bytes + (1u << 20), 64u << 20);
  limits.max_connections = std::max(connection_cap(open_file_limit), model.max_concurrency * 2 + 32);
  return limits;
}

Router::Router(const Frontend& frontend, const ModelInfo& model, std::string api_key, const engine::Engine& engine,
               Metrics& metrics, const ServerLimits& limits)
    : frontend_(frontend), model_(model), auth_(std::move(api_key)), engine_(engine), metrics_(metrics),
      limits_(limits) {}

namespace {

HttpResponse json_response(const json& body, int status = 200) {
  return {status, "application/json", dump_json(body), {}};
}

bool valid_anthropic_version(const std::string& version) {
  if (version.size() != 10 || version[4] != '-' || version[7] != '-') return false;
  for (size_t i : {0, 1, 2, 3, 5, 6, 8, 9}) {
    if (version[i] < '0' || version[i] > '9') return false;
  }
  return true;
}

}  // namespace

RouteResult Router::route(const HttpRequest& request) const {
  RouteResult result;
  std::string path = request.target.substr(0, request.target.find('?'));
  result.style = path.rfind("/v1/messages", 0) == 0 ? ApiStyle::anthropic : ApiStyle::openai;
  result.endpoint = path;
  try {
    route_checked(request, path, result);
    return result;
  } catch (const std::exception& error) {
    RenderedError rendered = render_exception(result.style, error);
    result.job.reset();
    result.response = {rendered.status, "application/json", std::move(rendered.body), {}};
    return result;
  }
}

void Router::route_checked(const HttpRequest& request, const std::string& path, RouteResult& result) const {
  using Handler = GenerationJob (*)(const json&, const AdapterContext&);
  struct Route {
    const char* path;
    const char* method;
    Handler generate;
  };
  static const Route routes[] = {
      {"/health", "GET", nullptr},           {"/v1/models", "GET", nullptr},
      {"/metrics", "GET", nullptr},          {"/tokenize", "POST", nullptr},
      {"/detokenize", "POST", nullptr},      {"/v1/chat/completions", "POST", prepare_chat_completion},
      {"/v1/completions", "POST", prepare_completion}, {"/v1/messages", "POST", prepare_anthropic_messages},
      {"/v1/responses", "POST", prepare_responses},
  };
  const Route* route = nullptr;
  bool model_card = path.rfind("/v1/models/", 0) == 0;
  for (const auto& candidate : routes) {
    if (path == candidate.path) route = &candidate;
  }
  if (!route && !model_card) {
    result.endpoint = "other";
    throw ApiError(404, "", "no route for " + request.method + " " + path);
  }
  if (model_card) result.endpoint = "/v1/models";
  std::string method = route ? route->method : "GET";
  if (request.method != method && !(method == "GET" && request.method == "HEAD")) {
    throw ApiError(405, "", fmt::format("{} requires {}", path, method));
  }
  if (path == "/health") {
    result.response = {200, "application/json", "{}", {}};
    return;
  }
  if (path == "/metrics") {
    result.response = {200, "text/plain; version=0.0.4; charset=utf-8",
                       metrics_.render(engine_.stats(), model_.primary_name()), {}};
    return;
  }
  if (!auth_.allows(request.header("authorization"), request.header("x-api-key"))) {
    throw ApiError(401, "",
                   result.style == ApiStyle::anthropic ? "invalid x-api-key" : "Incorrect API key provided.",
                   "invalid_api_key");
  }
  if (result.style == ApiStyle::anthropic) {
    std::string version = request.header("anthropic-version");
    if (!version.empty() && !valid_anthropic_version(version)) {
      fail_field("anthropic-version", "must be a date such as 2023-06-01");
    }
  }
  if (path == "/v1/models") {
    result.response = json_response(models_list(model_));
    return;
  }
  if (model_card) {
    std::string name = path.substr(std::string("/v1/models/").size());
    if (!model_.accepts_name(name)) throw ApiError(404, "model", "The model '" + name + "' does not exist");
    result.response = json_response(flare::server::model_card(model_, name));
    return;
  }
  json body = parse_json_body(request.body, {limits_.max_body_bytes, limits_.max_json_depth});
  AdapterContext context{frontend_, model_};
  if (path == "/tokenize") {
    result.response = json_response(tokenize(body, context));
  } else if (path == "/detokenize") {
    result.response = json_response(detokenize(body, context));
  } else {
    result.job = route->generate(body, context);
  }
}

}  // namespace flare::server
