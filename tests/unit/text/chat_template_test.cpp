// Chat rendering API: tokenizer_config.json forms (string template, named template list,
// AddedToken special tokens), render_chat arguments, plain-json contexts, thread safety.
#include <fstream>
#include <sstream>
#include <thread>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "common/error.h"
#include "text/chat_template.h"

namespace flare::text {
namespace {

using ordered_json = nlohmann::ordered_json;

std::string read_config(const std::string& model) {
  std::ifstream in(std::string(FLARE_TEST_DATA) + "/templates/" + model + ".tokenizer_config.json");
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

TEST(ChatTemplate, ReadsSpecialTokensFromConfig) {
  ChatTemplate deepseek = ChatTemplate::from_tokenizer_config(read_config("deepseek_v3"));
  EXPECT_EQ(deepseek.bos_token(), "<｜begin▁of▁sentence｜>");  // an AddedToken object
  ChatTemplate llama = ChatTemplate::from_tokenizer_config(read_config("llama3"));
  EXPECT_EQ(llama.bos_token(), "<|begin_of_text|>");
  std::string prompt = llama.render_chat(ordered_json::parse(R"([{"role":"user","content":" hi "}])"), nullptr, true, nullptr);
  EXPECT_EQ(prompt,
            "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nhi<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\n");
}

TEST(ChatTemplate, NamedTemplateListPicksDefault) {
  std::string config = R"({"chat_template": [{"name": "tool_use", "template": "T"}, {"name": "default", "template": "D{{ bos_token }}"}],
                           "bos_token": "<s>"})";
  EXPECT_EQ(ChatTemplate::from_tokenizer_config(config).render_chat(ordered_json::array(), nullptr, false, nullptr), "D<s>");
  EXPECT_THROW(ChatTemplate::from_tokenizer_config(R"({"chat_template": [{"name": "x", "template": "T"}]})"), Error);
  EXPECT_THROW(ChatTemplate::from_tokenizer_config(R"({"bos_token": "<s>"})"), Error);
  EXPECT_THROW(ChatTemplate::from_tokenizer_config("not json"), Error);
  EXPECT_THROW(ChatTemplate::from_tokenizer_config(R"({"chat_template": "{% if %}"})"), Error);
}

TEST(ChatTemplate, QwenEnableThinkingAndTools) {
  ChatTemplate qwen = ChatTemplate::from_tokenizer_config(read_config("qwen3"));
  ordered_json messages = ordered_json::parse(R"([{"role":"user","content":"Hi"}])");
  std::string off = qwen.render_chat(messages, nullptr, true, {{"enable_thinking", false}});
  EXPECT_EQ(off, "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n");
  ordered_json tools = ordered_json::parse(R"([{"type":"function","function":{"name":"f","parameters":{"b":1,"a":2}}}])");
  std::string with_tools = qwen.render_chat(messages, tools, false, nullptr);
  // Key order of the tool schema is kept (ordered_json).
  EXPECT_NE(with_tools.find(R"({"type": "function", "function": {"name": "f", "parameters": {"b": 1, "a": 2}}})"), std::string::npos)
      << with_tools;
  EXPECT_THROW(qwen.render_chat(ordered_json::object(), nullptr, true, nullptr), Error);
  EXPECT_THROW(qwen.render_chat(messages, ordered_json::object(), true, nullptr), Error);
}

TEST(ChatTemplate, PlainJsonContextSortsKeys) {
  ChatTemplate chat = ChatTemplate::compile("{{ obj | tojson }}");
  nlohmann::json context = nlohmann::json::parse(R"({"obj": {"b": 1, "a": 2}})");
  EXPECT_EQ(chat.render(context), R"({"a": 2, "b": 1})");
  EXPECT_THROW(chat.render(nlohmann::json::array()), Error);
}

TEST(ChatTemplate, GemmaRoleAlternationErrorHasPosition) {
  ChatTemplate gemma = ChatTemplate::from_tokenizer_config(read_config("gemma3"));
  try {
    gemma.render_chat(ordered_json::parse(R"([{"role":"user","content":"a"},{"role":"user","content":"b"}])"), nullptr, true,
                      nullptr);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    std::string message = e.what();
    EXPECT_NE(message.find("Conversation roles must alternate"), std::string::npos);
    EXPECT_NE(message.find("line 19, column 12"), std::string::npos) << message;
  }
}

TEST(ChatTemplate, LimitsApply) {
  ChatTemplate chat = ChatTemplate::compile("{% for m in messages %}{{ m.content }}{% endfor %}");
  jinja::RenderLimits limits;
  limits.max_output_bytes = 10;
  chat.set_limits(limits);
  EXPECT_THROW(chat.render_chat(ordered_json::parse(R"([{"content":"0123456789abc"}])"), nullptr, false, nullptr), Error);
}

TEST(ChatTemplate, ConcurrentRendersShareOneTemplate) {
  ChatTemplate qwen = ChatTemplate::from_tokenizer_config(read_config("qwen3"));
  ordered_json messages = ordered_json::parse(R"([{"role":"system","content":"S"},{"role":"user","content":"U"}])");
  std::string expected = qwen.render_chat(messages, nullptr, true, nullptr);
  std::vector<std::thread> threads;
  std::atomic<int> n_mismatches{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 200; ++i) {
        if (qwen.render_chat(messages, nullptr, true, nullptr) != expected) ++n_mismatches;
      }
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(n_mismatches.load(), 0);
}

}  // namespace
}  // namespace flare::text
