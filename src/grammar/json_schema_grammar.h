// JSON Schema to a grammar of the JSON texts that validate against it (structured outputs).
//
// Supported (at least OpenAI's strict mode): "type" (a name or a list), "properties", "required",
// "additionalProperties" (false, true or a schema), "enum", "const", "anyOf", "oneOf" (as anyOf:
// its branches should exclude each other, as discriminated unions do), "allOf" (one schema, or
// object schemas merged), "$ref" to "#", "#/$defs/..." or any local JSON pointer (recursion
// included), "items" (a schema or false), "prefixItems", "minItems", "maxItems", string
// "minLength", "maxLength", "pattern" (regex.h), "format" (date-time, date, time, uuid, email,
// hostname, ipv4), integer "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", and
// OpenAPI's "nullable". Annotations (title, description, default, examples, $schema, $id,
// $comment, deprecated, readOnly, writeOnly, x-*) are ignored. Any other keyword is refused with
// its path: the output could not be guaranteed to validate.
//
// Choices the grammar makes, all within what the schema allows: properties are written in the
// schema's order, each at most once; an object with "properties" takes no other key unless
// "additionalProperties" says so (an object without "properties" takes any); "prefixItems"
// without "items" takes no further item; whitespace between tokens is at most
// kMaxWhitespace characters; numbers have at most 20 integer and 20 fraction digits and a
// two-digit exponent; an unbounded integer at most 20 digits.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "grammar/grammar.h"

namespace flare::grammar {

constexpr std::uint32_t kMaxWhitespace = 16;

// Throws GrammarError whose path starts with `path` (the request field holding the schema).
Grammar json_schema_grammar(const nlohmann::ordered_json& schema, const std::string& path);

// Any JSON object ("response_format": {"type": "json_object"}).
Grammar json_object_grammar();

}  // namespace flare::grammar
