// Grammars run by the Matcher: GBNF, regular expressions and JSON Schema accept exactly the texts
// they describe, byte by byte.
#include <gtest/gtest.h>

#include "grammar/gbnf.h"
#include "grammar/json_schema_grammar.h"
#include "grammar/matcher.h"
#include "grammar/regex.h"

namespace flare::grammar {
namespace {

std::shared_ptr<const Grammar> shared(Grammar g) { return std::make_shared<const Grammar>(std::move(g)); }

// Whether the whole text is a complete match.
bool matches(const std::shared_ptr<const Grammar>& g, std::string_view text) {
  Matcher m(g);
  return m.advance(text) && m.can_end();
}
// Whether the text can begin a match.
bool prefix(const std::shared_ptr<const Grammar>& g, std::string_view text) {
  Matcher m(g);
  return m.advance(text);
}

TEST(GbnfTest, LiteralsClassesRepetitionAndRecursion) {
  auto g = shared(gbnf_grammar(R"(
# a comment
root ::= list
list ::= "[" ( item ("," item)* )? "]"
item ::= [0-9]+ | list | "\"" [^"\\]* "\""
)", "grammar"));
  EXPECT_TRUE(matches(g, "[]"));
  EXPECT_TRUE(matches(g, "[1,22,[3,[]],\"x y\"]"));
  EXPECT_FALSE(matches(g, "[1,]"));
  EXPECT_FALSE(matches(g, "[1"));
  EXPECT_TRUE(prefix(g, "[1,[2"));
  EXPECT_FALSE(prefix(g, "[a"));
}

TEST(GbnfTest, BoundedRepeatsAndUnicode) {
  auto g = shared(gbnf_grammar("root ::= \"é\"{2,3} [α-ω]? \"\\u00e9\"", "grammar"));
  EXPECT_TRUE(matches(g, "ééé"));
  EXPECT_TRUE(matches(g, "éééé"));
  EXPECT_TRUE(matches(g, "ééλé"));
  EXPECT_FALSE(matches(g, "éé"));
  EXPECT_FALSE(matches(g, "ééééé"));
}

TEST(GbnfTest, ErrorsNameTheLine) {
  try {
    gbnf_grammar("root ::= a\na ::= \"x\" |\nb ::= [", "grammar");
    FAIL();
  } catch (const GrammarError& e) {
    EXPECT_NE(std::string(e.what()).find("line 3"), std::string::npos) << e.what();
  }
  EXPECT_THROW(gbnf_grammar("start ::= \"x\"", "g"), GrammarError);      // no root
  EXPECT_THROW(gbnf_grammar("root ::= missing", "g"), GrammarError);     // undefined rule
  EXPECT_THROW(gbnf_grammar("root ::= root \"x\" | \"y\"", "g"), GrammarError);  // left recursion
  EXPECT_THROW(gbnf_grammar("root ::= \"x\" root", "g"), GrammarError);  // no finite text
  EXPECT_THROW(gbnf_grammar("root ::= \"x\"\nroot ::= \"y\"", "g"), GrammarError);
}

TEST(GbnfTest, NullableRepetitionsTerminate) {
  auto g = shared(gbnf_grammar("root ::= (\"a\"?)* (\"b\"* | \"c\")* \"d\"", "grammar"));
  EXPECT_TRUE(matches(g, "d"));
  EXPECT_TRUE(matches(g, "aabbcbd"));
  EXPECT_FALSE(matches(g, "ad d"));
}

TEST(RegexTest, Syntax) {
  auto g = shared(regex_grammar(R"(^(\d{3})-[A-Z]{2,}(?:x|yz)*\.?$)", "regex"));
  EXPECT_TRUE(matches(g, "123-AB"));
  EXPECT_TRUE(matches(g, "123-ABCxyzx."));
  EXPECT_FALSE(matches(g, "12-AB"));
  EXPECT_FALSE(matches(g, "123-A"));
  auto any = shared(regex_grammar("a.c", "regex"));
  EXPECT_TRUE(matches(any, "a€c"));
  EXPECT_FALSE(matches(any, "a\nc"));
  auto cls = shared(regex_grammar(R"([^a-c\d]+|[\w-]{2})", "regex"));
  EXPECT_TRUE(matches(cls, "xyz!"));
  EXPECT_TRUE(matches(cls, "a-"));
  EXPECT_TRUE(matches(cls, "x1"));    // [\w-]{2}
  EXPECT_FALSE(matches(cls, "a1b"));
}

TEST(RegexTest, RefusesWhatAGrammarCannotExpress) {
  for (const char* bad : {"(a)\\1", "(?=a)b", "\\bword", "(?i)abc", "a{3,2}", "[z-a]", "(ab", "ab)", "*a", "a{100001}"}) {
    EXPECT_THROW(regex_grammar(bad, "regex"), GrammarError) << bad;
  }
}

TEST(RegexTest, ExponentialPatternsStayWithinLimits) {
  // Nested counted repeats share their inner rule: the grammar stays small (its shortest text is
  // what makes such a pattern unusable, and max_tokens refuses it), while one wide repeat of a
  // long body is over the element limit and refused.
  const Grammar nested = regex_grammar("((a{1000}){1000}){1000}", "regex");
  EXPECT_LT(nested.n_elements(), 20000u);
  EXPECT_GE(nested.min_length(nested.root()), 1u << 29);
  EXPECT_THROW(regex_grammar("(abcdefghij){0,100000}", "regex"), GrammarError);
  auto g = shared(regex_grammar("(a|aa|aaa)*b", "regex"));
  EXPECT_TRUE(matches(g, std::string(200, 'a') + "b"));
}

TEST(JsonSchemaTest, ObjectsWithRequiredAndOptionalProperties) {
  auto schema = nlohmann::ordered_json::parse(R"({
    "type": "object",
    "properties": {"a": {"type": "integer"}, "b": {"type": "string"}, "c": {"type": "boolean"}},
    "required": ["b"], "additionalProperties": false})");
  auto g = shared(json_schema_grammar(schema, "schema"));
  EXPECT_TRUE(matches(g, R"({"b":"x"})"));
  EXPECT_TRUE(matches(g, R"({"a": 1, "b": "x", "c": true})"));
  EXPECT_TRUE(matches(g, "{ \"a\" : -5 ,\n  \"b\":\"\" }"));
  EXPECT_FALSE(matches(g, R"({"a":1})"));           // b missing
  EXPECT_FALSE(matches(g, R"({"b":"x","d":1})"));    // no such key
  EXPECT_FALSE(matches(g, R"({"a":1.5,"b":"x"})"));  // not an integer
  EXPECT_FALSE(matches(g, R"({"b":"x",})"));
}

TEST(JsonSchemaTest, RecursionThroughRefs) {
  auto schema = nlohmann::ordered_json::parse(R"({
    "$defs": {"node": {"type": "object", "properties": {"v": {"type": "integer"},
              "kids": {"type": "array", "items": {"$ref": "#/$defs/node"}}}, "required": ["v"]}},
    "$ref": "#/$defs/node"})");
  auto g = shared(json_schema_grammar(schema, "schema"));
  EXPECT_TRUE(matches(g, R"({"v":1,"kids":[{"v":2},{"v":3,"kids":[]}]})"));
  EXPECT_FALSE(matches(g, R"({"v":1,"kids":[{"kids":[]}]})"));
}

TEST(JsonSchemaTest, IntegerBounds) {
  auto g = shared(json_schema_grammar(nlohmann::ordered_json::parse(R"({"type":"integer","minimum":-12,"exclusiveMaximum":150})"), "s"));
  for (int v = -30; v <= 200; ++v) {
    EXPECT_EQ(matches(g, std::to_string(v)), v >= -12 && v < 150) << v;
  }
  EXPECT_FALSE(matches(g, "007"));
  EXPECT_FALSE(matches(g, "-0"));
}

TEST(JsonSchemaTest, StringsFormatsAndPatterns) {
  auto date = shared(json_schema_grammar(nlohmann::ordered_json::parse(R"({"type":"string","format":"date"})"), "s"));
  EXPECT_TRUE(matches(date, "\"2024-02-28\""));
  EXPECT_FALSE(matches(date, "\"2024-02-30\""));
  auto pattern = shared(json_schema_grammar(nlohmann::ordered_json::parse(R"({"type":"string","pattern":"^a\"b"})"), "s"));
  EXPECT_TRUE(matches(pattern, R"("a\"b and more")"));
  EXPECT_FALSE(matches(pattern, R"("ab")"));
  auto length = shared(json_schema_grammar(nlohmann::ordered_json::parse(R"({"type":"string","minLength":2,"maxLength":3})"), "s"));
  EXPECT_TRUE(matches(length, "\"é\\n\""));
  EXPECT_FALSE(matches(length, "\"é\""));
  EXPECT_FALSE(matches(length, "\"abcd\""));
}

TEST(JsonSchemaTest, ArraysEnumsAndUnions) {
  auto g = shared(json_schema_grammar(nlohmann::ordered_json::parse(R"({"type":"array","prefixItems":[{"const":"x"},{"enum":[1,"two",null]}],
      "items":{"type":["integer","null"]},"minItems":1,"maxItems":4})"), "s"));
  EXPECT_TRUE(matches(g, R"(["x"])"));
  EXPECT_TRUE(matches(g, R"(["x","two",3,null])"));
  EXPECT_FALSE(matches(g, R"([])"));
  EXPECT_FALSE(matches(g, R"(["x",2])"));
  EXPECT_FALSE(matches(g, R"(["x",1,1,1,1])"));
}

TEST(JsonSchemaTest, UnsupportedKeywordsNameTheirPath) {
  try {
    json_schema_grammar(nlohmann::ordered_json::parse(R"({"type":"object","properties":{"a":{"type":"string","not":{}}}})"),
                        "response_format.json_schema.schema");
    FAIL();
  } catch (const GrammarError& e) {
    EXPECT_EQ(e.path(), "response_format.json_schema.schema/properties/a/not");
  }
  EXPECT_THROW(json_schema_grammar(nlohmann::ordered_json::parse(R"({"type":"nope"})"), "s"), GrammarError);
  EXPECT_THROW(json_schema_grammar(nlohmann::ordered_json::parse(R"({"$ref":"http://x/y"})"), "s"), GrammarError);
  EXPECT_THROW(json_schema_grammar(nlohmann::ordered_json::parse(R"({"type":"array","uniqueItems":true})"), "s"), GrammarError);
  // allOf of a closed object and one declaring another key: no merge would validate.
  EXPECT_THROW(json_schema_grammar(nlohmann::ordered_json::parse(R"({"allOf":[{"type":"object","properties":{"a":{}},
      "additionalProperties":false},{"type":"object","properties":{"b":{}}}]})"), "s"), GrammarError);
}

TEST(JsonSchemaTest, HostileSchemasFailFast) {
  // Deep nesting.
  nlohmann::ordered_json deep = {{"type", "string"}};
  for (int i = 0; i < 200; ++i) deep = {{"type", "array"}, {"items", deep}};
  EXPECT_THROW(json_schema_grammar(deep, "s"), GrammarError);
  // A huge enum.
  nlohmann::ordered_json values = nlohmann::ordered_json::array();
  for (int i = 0; i < 200000; ++i) values.push_back("value number " + std::to_string(i));
  EXPECT_THROW(json_schema_grammar({{"enum", values}}, "s"), GrammarError);
  // A self-reference with no way out.
  EXPECT_THROW(json_schema_grammar(nlohmann::ordered_json::parse(R"({"type":"object","properties":{"a":{"$ref":"#"}},"required":["a"]})"), "s"),
               GrammarError);
}

TEST(JsonSchemaTest, JsonObjectGrammar) {
  auto g = shared(json_object_grammar());
  EXPECT_TRUE(matches(g, R"({"a":[1,2.5e3,{"b":null}],"c":"é\n\u0001"})"));
  EXPECT_FALSE(matches(g, R"({"c":"\u00e9"})"));  // escapes only where a character needs one
  EXPECT_FALSE(matches(g, R"([1])"));
  EXPECT_FALSE(matches(g, R"({"a":01})"));
}

}  // namespace
}  // namespace flare::grammar
