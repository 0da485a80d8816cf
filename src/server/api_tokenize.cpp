// POST /tokenize and /detokenize in vLLM's shapes, and the /v1/models list.
#include "server/adapters.h"
#include "server/adapter_util.h"
#include "server/chat_messages.h"
#include "server/frontend.h"
#include "server/sampling.h"

namespace flare::server {

json tokenize(const json& body, const AdapterContext& context) {
  require_object(body, "");
  check_model_name(context.model, get_string(body, "model"), false);
  std::vector<TokenId> ids;
  bool has_prompt = body.contains("prompt") && !body["prompt"].is_null();
  bool has_messages = body.contains("messages") && !body["messages"].is_null();
  if (has_prompt == has_messages) fail_field("prompt", "exactly one of prompt and messages is required");
  if (has_prompt) {
    auto prompt = get_string(body, "prompt");
    ids = context.frontend.encode(*prompt, get_bool(body, "add_special_tokens").value_or(true));
  } else {
    json messages = normalize_chat_messages(body["messages"]);
    json tools = normalize_chat_tools(body.contains("tools") ? body["tools"] : json());
    json kwargs = body.contains("chat_template_kwargs") ? body["chat_template_kwargs"] : json::object();
    if (!kwargs.is_object()) fail_field("chat_template_kwargs", "must be an object");
    auto effort = get_string(body, "reasoning_effort");
    if (effort) kwargs["reasoning_effort"] = *effort;
    check_reasoning_effort(context.frontend, kwargs, effort ? "reasoning_effort" : "chat_template_kwargs.reasoning_effort");
    bool add_generation_prompt = get_bool(body, "add_generation_prompt").value_or(true);
    ids = render_chat_prompt(context, messages, tools, kwargs, add_generation_prompt, "messages");
  }
  json result = {{"count", ids.size()}, {"max_model_len", context.model.max_context_tokens}, {"tokens", ids},
                 {"token_strs", nullptr}};
  if (get_bool(body, "return_token_strs").value_or(false)) {
    json strs = json::array();
    for (TokenId id : ids) strs.push_back(sanitize_utf8(context.frontend.token_text(id)));
    result["token_strs"] = std::move(strs);
  }
  return result;
}

json detokenize(const json& body, const AdapterContext& context) {
  require_object(body, "");
  check_model_name(context.model, get_string(body, "model"), false);
  auto it = body.find("tokens");
  if (it == body.end() || !it->is_array()) fail_field("tokens", "must be an array of token ids");
  std::vector<TokenId> ids;
  int32_t vocab = context.frontend.vocab_size();
  for (size_t i = 0; i < it->size(); ++i) {
    const json& id = (*it)[i];
    if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() >= vocab) {
      fail_field(index_path("tokens", i), "must be a token id below {}", vocab);
    }
    ids.push_back(static_cast<TokenId>(id.get<int64_t>()));
  }
  return {{"prompt", sanitize_utf8(context.frontend.decode(ids, false))}};
}

json model_card(const ModelInfo& model, const std::string& name) {
  return {{"id", name}, {"object", "model"}, {"created", model.created_unix_s}, {"owned_by", model.owned_by},
          {"root", model.canonical_id}, {"parent", nullptr}, {"max_model_len", model.max_context_tokens}};
}

json models_list(const ModelInfo& model) {
  json data = json::array();
  if (model.served_names.empty()) data.push_back(model_card(model, model.canonical_id));
  for (const auto& name : model.served_names) data.push_back(model_card(model, name));
  return {{"object", "list"}, {"data", std::move(data)}};
}

}  // namespace flare::server
