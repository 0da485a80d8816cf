// Template engine: error positions, execution limits (steps, nesting, output and list sizes),
// fuzzing with random and mutated templates (must fail with an Error, never crash or hang),
// and the value model's JavaScript number and JSON formatting.
#include <chrono>
#include <fstream>
#include <random>
#include <sstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "common/error.h"
#include "text/jinja/lexer.h"
#include "text/jinja/template.h"
#include "text/jinja/value.h"
#include "text/jinja/value_json.h"

namespace flare::text::jinja {
namespace {

std::string render(const std::string& source, const std::vector<std::pair<std::string, Value>>& vars = {},
                   const RenderLimits& limits = {}) {
  return Template::compile(source).render(vars, limits);
}

std::string error_of(const std::string& source, const RenderLimits& limits = {}) {
  try {
    render(source, {}, limits);
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(JinjaErrors, SyntaxErrorsCarryLineAndColumn) {
  EXPECT_NE(error_of("line one\n{{ 1 + }}").find("line 2, column 8"), std::string::npos) << error_of("line one\n{{ 1 + }}");
  EXPECT_NE(error_of("ab\ncd {% frob %}").find("line 2, column 7"), std::string::npos) << error_of("ab\ncd {% frob %}");
  EXPECT_NE(error_of("{{ 'unterminated }}").find("line 1, column 4"), std::string::npos);
  EXPECT_NE(error_of("{% if x %}\n\nno end").find("syntax error"), std::string::npos);
  EXPECT_NE(error_of("é{{ @ }}").find("line 1, column 5"), std::string::npos) << error_of("é{{ @ }}");
}

TEST(JinjaErrors, RuntimeErrorsCarryLineAndColumn) {
  std::string message = error_of("{% for m in [1] %}\n  {{ raise_exception('bad role') }}\n{% endfor %}");
  EXPECT_NE(message.find("line 2"), std::string::npos) << message;
  EXPECT_NE(message.find("bad role"), std::string::npos) << message;
  message = error_of("ok\n{{ 'a' + missing }}");
  EXPECT_NE(message.find("line 2, column 8"), std::string::npos) << message;
  EXPECT_EQ(error_of("{% break %}").find("outside of a loop") != std::string::npos, true);
}

TEST(JinjaErrors, ErrorsUseExitCodeFailure) {
  try {
    render("{{ x() }}");
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ExitCode::failure);
  }
}

TEST(JinjaLimits, StepLimitStopsRunawayLoops) {
  RenderLimits limits;
  limits.max_steps = 100'000;
  auto start = std::chrono::steady_clock::now();
  std::string message = error_of("{% for a in range(1000) %}{% for b in range(1000) %}{% for c in range(1000) %}x{% endfor %}{% endfor %}{% endfor %}", limits);
  EXPECT_NE(message.find("evaluation steps"), std::string::npos) << message;
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(2));
}

TEST(JinjaLimits, CopyingWorkIsBounded) {
  // Each step copies a long string: steps alone would allow hours of copying.
  RenderLimits limits;
  limits.max_work_bytes = 64 << 20;
  auto start = std::chrono::steady_clock::now();
  std::string message = error_of("{% set ns = namespace(s='xxxxxxxxxxxxxxxx') %}{% for i in range(16) %}{% set ns.s = ns.s + ns.s %}{% endfor %}"
                                 "{% for i in range(1000000) %}{% set t = ns.s ~ 'y' %}{% set u = ns.s.upper() %}{% set v = ns.s[1:] %}{% endfor %}",
                                 limits);
  EXPECT_NE(message.find("copied more than"), std::string::npos) << message;
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
}

TEST(JinjaLimits, RecursionIsBounded) {
  std::string message = error_of("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}");
  EXPECT_NE(message.find("nested deeper"), std::string::npos) << message;
}

TEST(JinjaLimits, OutputAndListSizesAreBounded) {
  RenderLimits limits;
  limits.max_output_bytes = 1 << 16;
  EXPECT_NE(error_of("{% for i in range(100000) %}xxxxxxxxxx{% endfor %}", limits).find("output exceeds"), std::string::npos);
  EXPECT_NE(error_of("{% set s = 'ab' %}{% for i in range(40) %}{% set s = s + s %}{% endfor %}", limits).find("output exceeds"),
            std::string::npos);
  limits.max_items = 1000;
  EXPECT_NE(error_of("{% set l = [1] %}{% for i in range(40) %}{% set l = l + l %}{% endfor %}", limits).find("list exceeds"),
            std::string::npos);
  EXPECT_NE(error_of("{{ range(100000000) | length }}", limits).find("list exceeds"), std::string::npos);
  // One long string referenced many times: printing, tojson and joining stay bounded.
  limits.max_items = 100000;
  std::string many = "{% set s = '" + std::string(60000, 'x') + "' %}{% set ns = namespace(l=[]) %}"
                     "{% for i in range(200) %}{% set ns.l = ns.l + [s] %}{% endfor %}{% set l = ns.l %}";
  EXPECT_NE(error_of(many + "{{ l }}", limits).find("output exceeds"), std::string::npos);
  EXPECT_NE(error_of(many + "{{ l|tojson(indent=4) }}", limits).find("output exceeds"), std::string::npos);
  EXPECT_NE(error_of(many + "{{ l|join(',') }}", limits).find("output exceeds"), std::string::npos);
  EXPECT_NE(error_of(many + "{{ l ~ '' }}", limits).find("output exceeds"), std::string::npos);
}

TEST(JinjaLimits, DeepNestingFailsAtCompileTime) {
  std::string deep = "{{ " + std::string(5000, '(') + "1" + std::string(5000, ')') + " }}";
  EXPECT_NE(error_of(deep).find("nested too deeply"), std::string::npos);
  std::string chain = "{{ 1";
  for (int i = 0; i < 20000; ++i) chain += " + 1";
  chain += " }}";
  EXPECT_NE(error_of(chain).find("nested too deeply"), std::string::npos);
  std::string blocks;
  for (int i = 0; i < 3000; ++i) blocks += "{% if true %}";
  EXPECT_NE(error_of(blocks).find("nested too deeply"), std::string::npos);
}

TEST(JinjaLimits, CyclicNamespaceFailsCleanly) {
  std::string message = error_of("{% set ns = namespace(a=1) %}{% set ns.self = ns %}{{ ns | tojson }}");
  EXPECT_NE(message.find("nested deeper"), std::string::npos) << message;
  // Printing a cyclic namespace is an error too, not a crash; the cycle is freed afterwards.
  EXPECT_NE(error_of("{% set ns = namespace() %}{% set ns.x = [ns] %}{{ ns }}").find("error"), std::string::npos);
}

TEST(JinjaLimits, ValueNestingIsBounded) {
  // Built one level per iteration: must fail cleanly, and nothing deep is left to destroy.
  std::string message = error_of("{% set x = [] %}{% for i in range(100000) %}{% set x = [x] %}{% endfor %}{{ x|length }}");
  EXPECT_NE(message.find("nested deeper"), std::string::npos) << message;
  message = error_of("{% set ns = namespace(n=none) %}{% for i in range(100000) %}{% set ns.n = namespace(n=ns.n) %}{% endfor %}");
  EXPECT_NE(message.find("nested deeper"), std::string::npos) << message;
  message = error_of("{% set ns = namespace() %}{% set l = [ns] %}{% for i in range(100000) %}{% set ns.x = l %}{% set l = [l] %}{% endfor %}");
  EXPECT_NE(message.find("nested deeper"), std::string::npos) << message;
}

std::string read_template(const std::string& model) {
  std::ifstream in(std::string(FLARE_TEST_DATA) + "/templates/" + model + ".tokenizer_config.json");
  std::stringstream buffer;
  buffer << in.rdbuf();
  return nlohmann::json::parse(buffer.str())["chat_template"].get<std::string>();
}

// Each attempt must either render or throw flare::Error, quickly.
void expect_graceful(const std::string& source, const std::vector<std::pair<std::string, Value>>& vars) {
  RenderLimits limits;
  limits.max_steps = 200'000;
  limits.max_output_bytes = 1 << 20;
  try {
    Template::compile(source).render(vars, limits);
  } catch (const Error&) {
  }
}

TEST(JinjaFuzz, MutatedRealTemplates) {
  std::mt19937 rng(1234);
  nlohmann::ordered_json messages = nlohmann::ordered_json::parse(
      R"([{"role":"system","content":"s"},{"role":"user","content":"u"},{"role":"assistant","content":"a","tool_calls":[{"function":{"name":"f","arguments":{"x":1}}}]},{"role":"tool","content":"t"}])");
  std::vector<std::pair<std::string, Value>> vars = {{"messages", value_from_json(messages)},
                                                     {"add_generation_prompt", Value::boolean(true)},
                                                     {"bos_token", Value::string("<s>")}};
  const std::string fragments[] = {"{%", "%}", "{{", "}}", "{#", "#}", "-", "(", ")", "[", "]", "'", "\"", "|", ".",
                                   "endfor", "endif", "loop", "::-1", "\\", "namespace(", "in ", "not ", "~", "**"};
  auto start = std::chrono::steady_clock::now();
  int n_attempts = 0;
  for (const std::string model : {"qwen3", "llama3", "deepseek_v3", "gemma3"}) {
    std::string base = read_template(model);
    for (int trial = 0; trial < 150; ++trial) {
      std::string mutated = base;
      int n_mutations = 1 + static_cast<int>(rng() % 4);
      for (int m = 0; m < n_mutations && !mutated.empty(); ++m) {
        size_t pos = rng() % mutated.size();
        switch (rng() % 3) {
          case 0: mutated.erase(pos, 1 + rng() % 8); break;
          case 1: mutated.insert(pos, fragments[rng() % std::size(fragments)]); break;
          default: mutated[pos] = static_cast<char>(rng() % 256); break;
        }
      }
      expect_graceful(mutated, vars);
      ++n_attempts;
    }
  }
  EXPECT_EQ(n_attempts, 600);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(60));
}

TEST(JinjaFuzz, RandomTokenSoup) {
  std::mt19937 rng(99);
  const std::string atoms[] = {"{{", "}}", "{%", "%}", "{%-", "-%}", "for", "x", "in", "if", "else", "endif", "endfor",
                               "set", "=", "macro", "endmacro", "call", "endcall", "filter", "endfilter", "(", ")", "[",
                               "]", "{", "}", ",", ":", ".", "|", "'s'", "1", "-1", "2.5", "+", "*", "//", "%", "**",
                               "~", "==", "<", "not", "and", "or", "is", "defined", "range(9)", "loop", "caller()",
                               "namespace()", "tojson", "join", " ", "\n", "text", "break", "continue", "raise_exception"};
  for (int trial = 0; trial < 3000; ++trial) {
    std::string source;
    size_t n = 1 + rng() % 30;
    for (size_t i = 0; i < n; ++i) source += atoms[rng() % std::size(atoms)] + " ";
    expect_graceful(source, {});
  }
}

TEST(JinjaValues, JavaScriptNumberFormatting) {
  EXPECT_EQ(format_js_number(0.1 + 0.2), "0.30000000000000004");
  EXPECT_EQ(format_js_number(1e21), "1e+21");
  EXPECT_EQ(format_js_number(1e20), "100000000000000000000");
  EXPECT_EQ(format_js_number(1.5e-7), "1.5e-7");
  EXPECT_EQ(format_js_number(0.000001), "0.000001");
  EXPECT_EQ(format_js_number(-2.5), "-2.5");
  EXPECT_EQ(format_js_number(123456789.125), "123456789.125");
  EXPECT_EQ(to_output_string(Value::floating(2.0)), "2.0");
  EXPECT_EQ(to_output_string(Value::floating(-0.0)), "-0.0");
}

TEST(JinjaValues, JsonConversionKeepsOrderAndJavaScriptKeyRules) {
  auto json = nlohmann::ordered_json::parse(R"({"b": 1, "10": 2, "a": 3.0, "2": 4.5, "01": null})");
  Value value = value_from_json(json);
  EXPECT_EQ(to_json(value, {}), R"({"2": 4.5, "10": 2, "b": 1, "a": 3, "01": null})");
  auto deep = nlohmann::ordered_json::parse(std::string(200, '[') + std::string(200, ']'));
  EXPECT_THROW(value_from_json(deep), Error);
}

TEST(JinjaValues, TemplatesAreReusableAndIndependent) {
  Template t = Template::compile("{% set ns = namespace(n=0) %}{% for x in xs %}{% set ns.n = ns.n + x %}{% endfor %}{{ ns.n }}");
  auto list = [](std::initializer_list<int64_t> xs) {
    ValueList items;
    for (int64_t x : xs) items.push_back(Value::integer(x));
    return Value::list(items);
  };
  EXPECT_EQ(t.render({{"xs", list({1, 2, 3})}}), "6");
  EXPECT_EQ(t.render({{"xs", list({10})}}), "10");
}

}  // namespace
}  // namespace flare::text::jinja
