// The real Gemma 3 chat template behind every chat route: a conversation the template refuses
// (its raise_exception on roles that do not alternate user / assistant, an assistant first, two
// system turns, a tool turn) is a 400 in each API's own error shape carrying the template's text,
// streaming or not, never a 500; a system message is folded into the first user turn.
#include <memory>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "fakes.h"
#include "server/router.h"
#include "server/text_frontend.h"
#include "test_assets.h"

namespace flare::server {
namespace {

using json = nlohmann::ordered_json;

constexpr const char* kAlternation = "Conversation roles must alternate user/assistant/user/assistant/...";

class Gemma3Routes : public ::testing::Test {
 protected:
  Gemma3Routes() : model(testing::fake_model()), router(gemma3(), model, "", engine, metrics, ServerLimits{}) {}

  // Loaded once per process: the 262k-token vocabulary takes a moment.
  static const Frontend& gemma3() {
    static const std::unique_ptr<Frontend> frontend =
        make_text_frontend(testing::fixture_assets("gemma3", "Gemma3ForCausalLM"));
    return *frontend;
  }

  RouteResult post(const std::string& path, const std::string& body) {
    return router.route({"POST", path, {{"anthropic-version", "2023-06-01"}}, body});
  }

  // A 400 without a job whose message carries the template's raise text; returns the body.
  json expect_template_400(const std::string& path, const std::string& body) {
    RouteResult result = post(path, body);
    EXPECT_FALSE(result.job.has_value()) << body;
    EXPECT_EQ(result.response.status, 400) << result.response.body;
    EXPECT_EQ(result.response.content_type, "application/json");
    json error = json::parse(result.response.body);
    std::string message = error["error"]["message"].get<std::string>();
    EXPECT_NE(message.find(kAlternation), std::string::npos) << message;
    EXPECT_NE(message.find("the chat template rejected the conversation"), std::string::npos) << message;
    EXPECT_EQ(error["error"]["type"], "invalid_request_error") << error;
    return error;
  }

  void expect_openai_template_400(const std::string& path, const std::string& body, const std::string& param) {
    json error = expect_template_400(path, body);
    EXPECT_FALSE(error.contains("type")) << error;  // OpenAI shape: {"error": {...}} only
    EXPECT_EQ(error["error"]["param"], param) << error;
    EXPECT_TRUE(error["error"]["code"].is_null()) << error;
  }

  void expect_anthropic_template_400(const std::string& body) {
    json error = expect_template_400("/v1/messages", body);
    EXPECT_EQ(error["type"], "error") << error;
    EXPECT_FALSE(error["error"].contains("param")) << error;
  }

  // The prompt a successful request hands the engine, decoded with its special tokens.
  std::string prompt_of(const std::string& path, const std::string& body) {
    RouteResult result = post(path, body);
    EXPECT_TRUE(result.job.has_value()) << result.response.body;
    if (!result.job) return {};
    return gemma3().decode(result.job->requests.at(0).prompt_token_ids, false);
  }

  ModelInfo model;
  testing::ScriptedEngine engine;
  Metrics metrics;
  Router router;
};

TEST_F(Gemma3Routes, ChatCompletionsRejectsRolesThatDoNotAlternate) {
  const std::string path = "/v1/chat/completions";
  expect_openai_template_400(path, R"({"model": "demo", "messages": [
      {"role": "user", "content": "a"}, {"role": "user", "content": "b"}]})", "messages");
  expect_openai_template_400(path, R"({"model": "demo", "messages": [
      {"role": "assistant", "content": "hello"}, {"role": "user", "content": "b"}]})", "messages");
  expect_openai_template_400(path, R"({"model": "demo", "stream": true, "messages": [
      {"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}, {"role": "assistant", "content": "c"}]})",
                             "messages");
  // Only a first system turn is folded in; a second one (developer maps to system) breaks the order.
  expect_openai_template_400(path, R"({"model": "demo", "messages": [
      {"role": "system", "content": "s"}, {"role": "developer", "content": "d"}, {"role": "user", "content": "b"}]})",
                             "messages");
  // The template knows no tool turn: the tool result stands where a user turn must.
  expect_openai_template_400(path, R"({"model": "demo", "messages": [
      {"role": "user", "content": "weather?"},
      {"role": "assistant", "content": null,
       "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "w", "arguments": "{}"}}]},
      {"role": "tool", "tool_call_id": "c1", "content": "sunny"}]})", "messages");
}

TEST_F(Gemma3Routes, ResponsesRejectsRolesThatDoNotAlternate) {
  const std::string path = "/v1/responses";
  expect_openai_template_400(path, R"({"model": "demo", "input": [
      {"role": "user", "content": "a"}, {"role": "user", "content": "b"}]})", "input");
  expect_openai_template_400(path, R"({"model": "demo", "stream": true, "input": [
      {"role": "assistant", "content": [{"type": "output_text", "text": "hi"}]}, {"role": "user", "content": "b"}]})",
                             "input");
  // instructions become the system turn, so a system item after them is a second one
  expect_openai_template_400(path, R"({"model": "demo", "instructions": "be brief", "input": [
      {"role": "developer", "content": "d"}, {"role": "user", "content": "b"}]})", "input");
}

TEST_F(Gemma3Routes, AnthropicMessagesRejectsRolesThatDoNotAlternate) {
  expect_anthropic_template_400(R"({"model": "demo", "max_tokens": 8, "messages": [
      {"role": "user", "content": "a"}, {"role": "user", "content": [{"type": "text", "text": "b"}]}]})");
  expect_anthropic_template_400(R"({"model": "demo", "max_tokens": 8, "stream": true, "system": "s", "messages": [
      {"role": "assistant", "content": "hello"}, {"role": "user", "content": "b"}]})");
}

TEST_F(Gemma3Routes, TokenizeRejectsRolesThatDoNotAlternate) {
  RouteResult result = post("/tokenize", R"({"messages": [{"role": "user", "content": "a"}, {"role": "user", "content": "b"}]})");
  EXPECT_EQ(result.response.status, 400) << result.response.body;
  EXPECT_NE(result.response.body.find(kAlternation), std::string::npos) << result.response.body;
}

TEST_F(Gemma3Routes, SystemTurnIsFoldedIntoTheFirstUserTurn) {
  const std::string expected =
      "<bos><start_of_turn>user\nbe brief\n\nhello<end_of_turn>\n<start_of_turn>model\n";
  EXPECT_EQ(prompt_of("/v1/chat/completions", R"({"model": "demo", "messages": [
      {"role": "system", "content": "be brief"}, {"role": "user", "content": "hello"}]})"), expected);
  EXPECT_EQ(prompt_of("/v1/chat/completions", R"({"model": "demo", "messages": [
      {"role": "developer", "content": [{"type": "text", "text": "be brief"}]}, {"role": "user", "content": " hello "}]})"),
            expected);  // developer is system; content parts join; the template trims turns
  EXPECT_EQ(prompt_of("/v1/responses", R"({"model": "demo", "instructions": "be brief", "input": "hello"})"), expected);
  EXPECT_EQ(prompt_of("/v1/messages", R"({"model": "demo", "max_tokens": 8, "system": [{"type": "text", "text": "be brief"}],
      "messages": [{"role": "user", "content": "hello"}]})"), expected);
  // Later turns: assistant is written as "model", and the system text is only in the first user turn.
  EXPECT_EQ(prompt_of("/v1/chat/completions", R"({"model": "demo", "messages": [
      {"role": "system", "content": "s"}, {"role": "user", "content": "a"},
      {"role": "assistant", "content": "b"}, {"role": "user", "content": "c"}]})"),
            "<bos><start_of_turn>user\ns\n\na<end_of_turn>\n<start_of_turn>model\nb<end_of_turn>\n"
            "<start_of_turn>user\nc<end_of_turn>\n<start_of_turn>model\n");
}

TEST_F(Gemma3Routes, SystemTurnAloneLeavesOnlyTheGenerationPrompt) {
  // As transformers renders it: the template puts the system text into a first user turn, and
  // with none the text is dropped. Not an error, so the request goes through.
  EXPECT_EQ(prompt_of("/v1/chat/completions", R"({"model": "demo", "messages": [{"role": "system", "content": "s"}]})"),
            "<bos><start_of_turn>model\n");
}

}  // namespace
}  // namespace flare::server
