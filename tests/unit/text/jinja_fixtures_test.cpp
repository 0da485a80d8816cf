// Renders every chat template over the conversation suite, and every snippet, and compares
// byte for byte with what @huggingface/jinja renders (tests/data/templates/expected.json,
// made by tools/template-fixtures.mjs). Where the reference fails, rendering must fail too,
// and runtime errors must carry the reference's message.
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "common/error.h"
#include "text/chat_template.h"

namespace flare::text {
namespace {

using ordered_json = nlohmann::ordered_json;

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in) << path;
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

ordered_json load(const std::string& name) {
  return ordered_json::parse(read_file(std::string(FLARE_TEST_DATA) + "/templates/" + name));
}

struct Outcome {
  bool ok = false;
  std::string text;  // output or error message
};

template <typename Render>
Outcome attempt(Render render) {
  try {
    return {true, render()};
  } catch (const Error& e) {
    return {false, e.what()};
  }
}

void check(const ordered_json& expected, const Outcome& actual, const std::string& label) {
  if (expected.contains("output")) {
    ASSERT_TRUE(actual.ok) << label << ": unexpected error: " << actual.text;
    EXPECT_EQ(actual.text, expected["output"].get<std::string>()) << label;
    return;
  }
  std::string reference = expected["error"].get<std::string>();
  ASSERT_FALSE(actual.ok) << label << ": expected error '" << reference << "', rendered: " << actual.text;
  // Runtime errors carry the reference's message; syntax errors are worded our own way.
  if (actual.text.rfind("chat template error at line", 0) == 0) {
    EXPECT_NE(actual.text.find(reference), std::string::npos) << label << ": " << actual.text << " vs " << reference;
  }
  EXPECT_NE(actual.text.find("line "), std::string::npos) << label << ": " << actual.text;
}

TEST(JinjaFixtures, ConversationsMatchReference) {
  ordered_json expected = load("expected.json")["conversations"];
  ordered_json conversations = load("conversations.json");
  int n_checked = 0;
  for (const std::string model : {"qwen3", "llama3", "deepseek_v3", "gemma3", "demo"}) {
    ChatTemplate chat = ChatTemplate::from_tokenizer_config(read_file(std::string(FLARE_TEST_DATA) + "/templates/" + model + ".tokenizer_config.json"));
    for (const auto& conversation : conversations) {
      std::string name = conversation["name"].get<std::string>();
      Outcome actual = attempt([&] {
        return chat.render_chat(conversation["messages"], conversation.value("tools", ordered_json()),
                                conversation["add_generation_prompt"].get<bool>(),
                                conversation.value("kwargs", ordered_json()));
      });
      check(expected[model][name], actual, model + "/" + name);
      ++n_checked;
    }
  }
  EXPECT_GE(n_checked, 100);
}

TEST(JinjaFixtures, SnippetsMatchReference) {
  ordered_json expected = load("expected.json")["snippets"];
  for (const auto& snippet : load("snippets.json")) {
    std::string name = snippet["name"].get<std::string>();
    Outcome actual = attempt([&] { return ChatTemplate::compile(snippet["template"].get<std::string>()).render(snippet["context"]); });
    check(expected[name], actual, name);
  }
}

}  // namespace
}  // namespace flare::text
