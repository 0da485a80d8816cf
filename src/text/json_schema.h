// The subset of JSON Schema that tool parameters use, compiled for the JSON recognizer
// (json_prefix.h) so that forced tool calls write arguments of the declared shape.
//
// Supported: "type" (a name or a list of names), "properties", "required", "additionalProperties",
// "items", "enum" and "const" of scalars. An object with "properties" accepts only those keys
// unless "additionalProperties" is true or a schema (the common tool schemas list every key, and
// a model inventing keys is the error guided decoding exists to prevent); such an open object, or
// one without "properties", takes any keys with unchecked values. Each key is written at most once;
// the object closes only once every required key is written. Keys and enum values must be written
// in their canonical JSON text (nlohmann's dump, non-ASCII as \u escapes), and an "integer" has
// no fraction or exponent. Annotations (description, title, default, examples, format, ...) are
// ignored.
//
// Fallback: a subschema the compiler does not support or understand ("$ref", "pattern", "oneOf",
// "minimum", a "type" that is not a type name, "properties" that is not an object, an empty or
// non-scalar enum, more than kMaxEnumValues values, more than kMaxProperties keys, deeper than
// kMaxDepth, beyond kMaxNodes) accepts any JSON value there, as if it were absent. A root that is
// not an object schema leaves the whole arguments a free JSON object. Compiling never fails.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace flare::text {

class JsonSchema {
 public:
  static constexpr int32_t kFree = -1;  // the id of "any JSON value"
  static constexpr int kMaxDepth = 32;
  static constexpr size_t kMaxNodes = 4096;
  static constexpr size_t kMaxProperties = 64;  // the written keys are a 64-bit set
  static constexpr size_t kMaxEnumValues = 1024;
  static constexpr size_t kMaxLiteralBytes = 256;  // one key's or enum value's canonical text

  enum Type : uint8_t { object = 1, array = 2, string = 4, number = 8, integer = 16, boolean = 32, null = 64 };
  static constexpr uint8_t kAnyType = 127;

  struct Node {
    uint8_t types = kAnyType;             // the JSON types allowed (integer: a number without '.' or 'e')
    std::vector<std::string> enum_texts;  // non-empty: the value is one of these canonical texts
    bool closed = false;                  // an object takes only `keys`
    std::vector<std::string> keys;        // canonical texts of the property names, quotes included
    std::vector<int32_t> key_nodes;       // the schema of each key's value
    uint64_t required = 0;                // bit i: keys[i] is required
    int32_t items = kFree;                // an array's element schema
    size_t completion_text = 1;           // at least the bytes completion() writes for the value from its start
  };

  // nullptr when the root is not an object schema the recognizer can enforce.
  static std::shared_ptr<const JsonSchema> compile(const nlohmann::ordered_json& schema);

  // Node 0 is the root object.
  const Node& node(int32_t id) const { return nodes_[static_cast<size_t>(id)]; }
  // An upper bound on how much the shortest completion can grow when one byte is read.
  size_t max_completion_growth_per_byte() const { return max_growth_; }
  // Every byte a key or enum value can contain (the completion may have to write them).
  const std::string& literal_bytes() const { return literal_bytes_; }

 private:
  int32_t compile_node(const nlohmann::ordered_json& schema, int depth);
  void finish();

  std::vector<Node> nodes_;
  size_t longest_value_text_ = 5;  // the longest completion of a value once its type is picked ("false")
  size_t max_growth_ = 0;
  std::string literal_bytes_;
};

}  // namespace flare::text
