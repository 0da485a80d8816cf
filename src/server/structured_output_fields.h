// The request fields that ask for structured output, read into one grammar::ConstraintSpec:
//   Chat Completions and Completions: "response_format" {"type": "json_object"} or
//     {"type": "json_schema", "json_schema": {"name", "schema", "strict"}} ("text": none);
//   vLLM's "structured_outputs" object with one of "json" (a schema, or its text), "regex",
//     "choice", "grammar" (GBNF) or "json_object": true, and its older "guided_json",
//     "guided_regex", "guided_choice", "guided_grammar" fields;
//   llama.cpp's "grammar" (GBNF) and "json_schema" (a schema) fields;
//   Responses: "text": {"format": {"type": "json_object"} or {"type": "json_schema", "name",
//     "schema", "strict"}}.
// A request may give at most one. Wrong shapes are 400s naming the field; the constraint's own
// errors (an unsupported keyword, a bad pattern) are found when it compiles.
#pragma once

#include <optional>

#include "grammar/constraint_spec.h"
#include "server/json_body.h"

namespace flare::server {

enum class StructuredOutputApi : uint8_t { chat, completions, responses };

std::optional<grammar::ConstraintSpec> read_structured_output(const json& body, StructuredOutputApi api);

}  // namespace flare::server
