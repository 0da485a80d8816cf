// Entry points of the API adapters: each reads a parsed JSON body into one internal
// GenerationJob (or answers directly). Throws ApiError naming the offending field.
#pragma once

#include "server/api.h"
#include "server/json_body.h"

namespace flare::server {

GenerationJob prepare_chat_completion(const json& body, const AdapterContext& context);  // api_chat.cpp
GenerationJob prepare_completion(const json& body, const AdapterContext& context);       // api_completions.cpp
GenerationJob prepare_anthropic_messages(const json& body, const AdapterContext& context);  // api_anthropic.cpp
GenerationJob prepare_responses(const json& body, const AdapterContext& context);         // api_responses.cpp
json tokenize(const json& body, const AdapterContext& context);                           // api_tokenize.cpp
json detokenize(const json& body, const AdapterContext& context);                         // api_tokenize.cpp
json models_list(const ModelInfo& model);                                                 // api_tokenize.cpp
json model_card(const ModelInfo& model, const std::string& name);                         // api_tokenize.cpp

}  // namespace flare::server
