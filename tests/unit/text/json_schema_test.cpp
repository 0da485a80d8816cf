// The JSON recognizer under a tool schema (text/json_schema.h): valid documents are accepted byte
// by byte, invalid ones are rejected at their first wrong byte, every prefix closes into a
// document that follows the schema, unsupported or hostile schemas fall back to free JSON there
// without failing, and state keys still separate states.
#include <gtest/gtest.h>

#include <map>
#include <random>

#include "schema_conformance.h"
#include "text/json_prefix.h"
#include "text/json_schema.h"

namespace flare::text {
namespace {

using json = nlohmann::ordered_json;

// A weather tool with every supported form: nested closed object, string enum, integer,
// number, boolean, null, a type list, an array with items, a number enum, an open object.
const char* kWeather = R"({
  "type": "object",
  "properties": {
    "city": {"type": "string", "description": "the city"},
    "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
    "days": {"type": "integer"},
    "scale": {"type": "number"},
    "hourly": {"type": "boolean"},
    "nothing": {"type": "null"},
    "note": {"type": ["string", "null"]},
    "tags": {"type": "array", "items": {"type": "string"}},
    "level": {"enum": [1, 12, 2.5, true, "x"]},
    "where": {"type": "object", "properties": {"lat": {"type": "number"}, "lon": {"type": "number"}},
              "required": ["lat", "lon"]},
    "extra": {"type": "object"}
  },
  "required": ["city", "unit"]
})";

std::shared_ptr<const JsonSchema> compile(const std::string& schema) { return JsonSchema::compile(json::parse(schema)); }

// The length of the longest accepted prefix of `text`.
size_t accepted_length(const std::shared_ptr<const JsonSchema>& schema, std::string_view text) {
  JsonPrefix prefix(schema);
  for (size_t i = 0; i < text.size(); ++i) {
    if (!prefix.push(text[i])) return i;
  }
  return text.size();
}

bool closes_conforming(const std::string& schema, const std::string& text) {
  auto value = json::parse(text, nullptr, false);
  return !value.is_discarded() && value.is_object() && testing::conforms(json::parse(schema), value);
}

TEST(JsonSchemaPrefix, AcceptsValidDocumentsByteByByte) {
  auto schema = compile(kWeather);
  ASSERT_TRUE(schema);
  const std::vector<std::string> documents = {
      R"({"city": "Paris", "unit": "celsius"})",
      R"({"unit":"fahrenheit","city":"caf\u00e9 \"x\"","days":-0,"scale":-1.5e+3,"hourly":false})",
      R"({"city": "", "unit": "celsius", "nothing": null, "note": null, "tags": ["a", "b"], "level": 12})",
      R"({"city": "x", "unit": "celsius", "note": "n", "tags": [], "level": 1, "where": {"lon": 2, "lat": 1.5}})",
      R"({"level": 2.5, "city": "x", "unit": "celsius", "extra": {"any": [1, {"k": null}], "b": true}})",
      R"({"level": true, "city": "x", "unit": "celsius", "days": 12345678901})",
      R"( { "level" : "x" , "city" : "x" , "unit" : "celsius" } )",
  };
  for (const auto& document : documents) {
    ASSERT_TRUE(closes_conforming(kWeather, document)) << document;
    const std::string trimmed = document.substr(0, document.find_last_not_of(' ') + 1);
    JsonPrefix prefix(schema);
    for (size_t i = 0; i < trimmed.size(); ++i) {
      ASSERT_TRUE(prefix.push(trimmed[i])) << trimmed << " at byte " << i;
      const std::string closed = trimmed.substr(0, i + 1) + prefix.completion();
      EXPECT_TRUE(closes_conforming(kWeather, closed)) << closed;
    }
    EXPECT_TRUE(prefix.complete()) << document;
  }
}

TEST(JsonSchemaPrefix, RejectsInvalidDocumentsAtTheFirstWrongByte) {
  auto schema = compile(kWeather);
  // Each document is valid up to the byte marked by '#' (removed), which is the first wrong one.
  const std::vector<std::string> documents = {
      R"({"city#2": "x"})",                                       // not a property
      R"({"#": 1})",                                             // the empty key
      R"({"city": "x", "unit": "celsius", "#city": "y"})",        // a key written twice
      R"({"city": "x", "unit": "celsius", "da#x": 1})",          // not a key left
      R"({"city": #1})",                                         // a number for a string
      R"({"city": "x", "unit": "celsius", "days": 1#.5})",       // an integer's fraction
      R"({"city": "x", "unit": "celsius", "days": 1#e3})",       // an integer's exponent
      R"({"city": "x", "unit": "celsius", "days": #"1"})",
      R"({"city": "x", "unit": "#kelvin"})",                      // not in the enum
      R"({"city": "x", "unit": "celsius#s"})",
      R"({"city": "x", "unit": "celsius", "hourly": #null})",
      R"({"city": "x", "unit": "celsius", "nothing": #false})",
      R"({"city": "x", "unit": "celsius", "note": #1})",
      R"({"city": "x", "unit": "celsius", "tags": ["a", #1]})",  // items
      R"({"city": "x", "unit": "celsius", "level": 1#3})",       // 1 and 12 are in the enum, 13 is not
      R"({"city": "x", "unit": "celsius", "level": 2#})",
      R"({"city": "x", "unit": "celsius", "level": #false})",
      R"({"city": "x", "unit": "celsius", "level": "#y"})",
      R"({"city": "x"#})",                                       // "unit" is required
      R"({#})",
      R"({"city": "x", "unit": "celsius", "where": {"lat": 1#}})",   // "lon" is required
      R"({"city": "x", "unit": "celsius", "where": {"lat": 1, "lon": 2#, "lat": 3}})",  // no key left
      R"({"city": "x", "unit": "celsius", "where": {"lat": 1, "lon": 2},#})",
  };
  for (std::string document : documents) {
    const size_t wrong = document.find('#');
    ASSERT_NE(wrong, std::string::npos);
    document.erase(wrong, 1);
    EXPECT_EQ(accepted_length(schema, document), wrong) << document;
  }
  // A closed object without properties is "{}" only.
  auto empty = compile(R"({"type": "object", "additionalProperties": false})");
  EXPECT_EQ(accepted_length(empty, R"({"a": 1})"), 1u);
  EXPECT_EQ(accepted_length(empty, "{}"), 2u);
}

TEST(JsonSchemaPrefix, CompletionWritesTheRequiredKeys) {
  auto completion = [](const char* schema, std::string_view text) {
    JsonPrefix prefix(compile(schema));
    EXPECT_TRUE(prefix.push(text)) << text;
    return prefix.completion();
  };
  EXPECT_EQ(completion(kWeather, ""), R"({"city":"","unit":"celsius"})");
  EXPECT_EQ(completion(kWeather, R"({"unit": "f)"), R"(ahrenheit","city":""})");
  EXPECT_EQ(completion(kWeather, R"({"city": "a", "wh)"), R"(ere":{"lat":0,"lon":0},"unit":"celsius"})");
  EXPECT_EQ(completion(kWeather, R"({"city": "a", "unit": "celsius", "level": 1)"), "}");
  EXPECT_EQ(completion(kWeather, R"({"city": "a", "unit": "celsius", "tags": [)"), "]}");
  EXPECT_EQ(completion(kWeather, R"({"city": "a", "unit": "celsius", "hourly": )"), "true}");
  EXPECT_EQ(completion(R"({"properties": {"n": {"type": "null"}}, "required": ["n"]})", ""), R"({"n":null})");
  // The minimum a call takes is the root's completion.
  JsonPrefix fresh(compile(kWeather));
  EXPECT_EQ(fresh.completion().size(), 28u);
}

// Unsupported keywords and schemas the compiler does not understand leave that subtree free; a
// root that is not an object schema leaves the whole object free. Nothing throws.
TEST(JsonSchemaPrefix, UnsupportedOrMalformedSubschemasFallBackToFreeJson) {
  for (const char* root : {R"({"$ref": "#/defs/x"})", R"({"type": "string"})", R"({"oneOf": [{"type": "object"}]})",
                           R"({"type": 5})", R"({"type": ["object", "nonsense"]})", R"({"enum": [{"a": 1}]})",
                           R"({})", R"([])", R"("object")", R"(true)", R"({"type": "object", "properties": []})",
                           R"({"properties": {"a": {}}, "required": "a"})",
                           R"({"properties": {"a": {}}, "required": ["b"]})", R"({"enum": []})"}) {
    EXPECT_FALSE(JsonSchema::compile(json::parse(root))) << root;
  }
  const char* schema = R"({"properties": {
      "ref": {"$ref": "#/defs/x"}, "pattern": {"type": "string", "pattern": "^a"}, "one": {"oneOf": [{"type": "string"}]},
      "bad_type": {"type": 7}, "bad_items": {"type": "array", "items": [{"type": "string"}]},
      "object_enum": {"enum": [{"a": 1}]}, "min": {"type": "integer", "minimum": 3}, "free": {}}})";
  auto compiled = compile(schema);
  ASSERT_TRUE(compiled);
  for (const char* value : {R"({"a": [1, null]})", "\"s\"", "-1.5", "true", "null", "[]"}) {
    for (const char* key : {"ref", "pattern", "one", "bad_type", "bad_items", "object_enum", "min", "free"}) {
      const std::string document = std::string(R"({")") + key + R"(": )" + value + "}";
      JsonPrefix prefix(compiled);
      EXPECT_TRUE(prefix.push(document)) << document;
      EXPECT_TRUE(prefix.complete()) << document;
    }
  }
  // The keys themselves stay closed: the root object is supported.
  EXPECT_EQ(accepted_length(compiled, R"({"zzz": 1})"), 2u);
}

TEST(JsonSchemaPrefix, HostileSchemasDegradeWithoutFailing) {
  // Deep nesting: enforced down to kMaxDepth, free below.
  json deep = json::object();
  for (int level = 0; level < 1000; ++level) {
    deep = json{{"type", "object"}, {"properties", {{"a", deep}}}, {"required", json::array({"a"})}};
  }
  auto compiled = JsonSchema::compile(deep);
  ASSERT_TRUE(compiled);
  JsonPrefix prefix(compiled);
  const std::string closing = prefix.completion();  // {"a":{"a":...{"a":0}...}}
  EXPECT_EQ(std::count(closing.begin(), closing.end(), '{'), JsonSchema::kMaxDepth + 1) << closing;
  EXPECT_TRUE(prefix.push(closing));
  EXPECT_TRUE(prefix.complete());

  // A huge enum is not enforced; one within the limit is.
  json values = json::array();
  for (int i = 0; i < 5000; ++i) values.push_back("v" + std::to_string(i));
  json huge = {{"properties", {{"e", {{"enum", values}}}}}};
  EXPECT_EQ(accepted_length(JsonSchema::compile(huge), R"({"e": 12345})"), 12u);
  values.erase(values.begin() + JsonSchema::kMaxEnumValues, values.end());
  huge["properties"]["e"]["enum"] = values;
  auto big = JsonSchema::compile(huge);
  EXPECT_EQ(accepted_length(big, R"({"e": "v1023"})"), 14u);
  EXPECT_EQ(accepted_length(big, R"({"e": "v1024"})"), 11u);

  // Too many properties for the key set: the object is free.
  json wide = {{"type", "object"}, {"properties", json::object()}};
  for (int i = 0; i < 100; ++i) wide["properties"]["k" + std::to_string(i)] = {{"type", "integer"}};
  EXPECT_FALSE(JsonSchema::compile(wide));

  // Wrong types inside the schema, everywhere: free there, never a throw.
  for (const char* bad : {R"({"properties": {"a": {"type": null}}})", R"({"properties": {"a": {"enum": "x"}}})",
                          R"({"properties": {"a": {"items": 3, "type": "array"}}})",
                          R"({"properties": {"a": {"properties": {"b": 1}}}})", R"({"properties": {"a": 1}})",
                          R"({"properties": {"a": {"required": [1], "properties": {}}}})",
                          R"({"properties": {"a": {"enum": [1, 1, "\u0000", 1e308, -0.0]}}})"}) {
    EXPECT_NO_THROW({
      auto schema = compile(bad);
      ASSERT_TRUE(schema) << bad;
      JsonPrefix free_value(schema);
      free_value.push(R"({"a": )");
      (void)free_value.completion();
    }) << bad;
  }
}

// A random walk through the bytes each state accepts (what a model under the mask can write):
// every prefix closes into a document that follows the schema, and equal state keys accept the
// same bytes next.
TEST(JsonSchemaPrefix, RandomWalksFollowTheSchemaAndKeysSeparateStates) {
  const std::vector<std::string> schemas = {
      kWeather,
      R"({"properties": {"a": {"type": "array", "items": {"properties": {"x": {"enum": [0, 10, 100]},
          "y": {"type": ["integer", "boolean"]}}, "required": ["x"]}}, "b": {"const": "ab"}}, "required": ["a", "b"]})",
  };
  const std::string alphabet = "{}[]\":, 0123456789-.eEtrufalsncityhowegxyzpvbAB\\";
  std::mt19937 rng(7);
  for (const auto& source : schemas) {
    auto schema = compile(source);
    ASSERT_TRUE(schema);
    std::map<std::string, std::string> seen;
    int n_repeats = 0, n_complete = 0;
    for (int trial = 0; trial < 3000; ++trial) {
      JsonPrefix prefix(schema);
      std::string text;
      for (int i = 0; i < 200 && !prefix.complete(); ++i) {
        // Mostly bytes the state accepts, so that walks get deep.
        std::string accepted;
        for (char c : alphabet) {
          JsonPrefix attempt = prefix;
          if (attempt.push(c)) accepted.push_back(c);
        }
        if (accepted.empty()) break;
        const char c = accepted[rng() % accepted.size()];
        ASSERT_TRUE(prefix.push(c));
        text.push_back(c);
      }
      n_complete += prefix.complete();
      const std::string closed = text + prefix.completion();
      ASSERT_TRUE(closes_conforming(source, closed)) << closed;
      std::string accepted;
      for (int b = 0; b < 256; ++b) {
        JsonPrefix attempt = prefix;
        if (attempt.push(static_cast<char>(b))) accepted.push_back(static_cast<char>(b));
      }
      auto [it, inserted] = seen.emplace(prefix.state_key(), accepted);
      if (!inserted) {
        ++n_repeats;
        EXPECT_EQ(it->second, accepted) << text;
      }
    }
    EXPECT_GT(n_repeats, 100);
    EXPECT_GT(n_complete, 100);
  }
}

// The growth bound the token masks rely on holds for every byte of random walks.
// (A value whose completion is short may become an object with long required keys.)
TEST(JsonSchemaPrefix, CompletionGrowsWithinTheBound) {
  const std::string alphabet = "{}[]\":, 0123456789-.etrufalsncityhowegxyzpvk";
  const std::string either = R"({"properties": {"v": {"type": ["integer", "object"], "properties": {
      "kkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkk": {"type": "string"}, "kkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkk": {"type": "string"},
      "kkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkk": {"type": "object", "properties": {"kkkkkkkkkkkkkkkkkkkkkkkkkkkk": {"type": "null"}},
        "required": ["kkkkkkkkkkkkkkkkkkkkkkkkkkkk"]}},
      "required": ["kkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkk", "kkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkk",
                   "kkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkk"]}}})";
  std::mt19937 rng(8);
  for (int trial = 0; trial < 1000; ++trial) {
    JsonPrefix prefix(compile(trial % 2 ? kWeather : either));
    for (int i = 0; i < 60 && !prefix.complete(); ++i) {
      std::vector<JsonPrefix> next;  // every accepted byte is checked; the walk follows one
      for (char c : alphabet) {
        JsonPrefix attempt = prefix;
        if (!attempt.push(c)) continue;
        ASSERT_LE(attempt.completion().size(), prefix.completion().size() + prefix.max_completion_growth_per_byte());
        next.push_back(attempt);
      }
      ASSERT_FALSE(next.empty());
      prefix = next[rng() % next.size()];
    }
  }
}

}  // namespace
}  // namespace flare::text
