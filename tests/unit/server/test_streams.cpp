// Engine outputs -> API responses: OpenAI chunks, Anthropic's exact event order, Responses
// events, stop strings, logprobs and non-streaming bodies.
#include <algorithm>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "fakes.h"
#include "server/choice_stream.h"
#include "server/router.h"

namespace flare::server {
namespace {

using json = nlohmann::ordered_json;
using testing::FakeFrontend;

struct SseEvent {
  std::string name;
  std::string data;
  json payload() const { return data == "[DONE]" ? json("[DONE]") : json::parse(data); }
};

std::vector<SseEvent> parse_sse(const std::string& text) {
  std::vector<SseEvent> events;
  size_t at = 0;
  while (at < text.size()) {
    size_t end = text.find("\n\n", at);
    EXPECT_NE(end, std::string::npos) << "unterminated event: " << text.substr(at);
    if (end == std::string::npos) break;
    SseEvent event;
    std::string block = text.substr(at, end - at);
    size_t line_start = 0;
    while (line_start <= block.size()) {
      size_t line_end = block.find('\n', line_start);
      std::string line = block.substr(line_start, line_end == std::string::npos ? std::string::npos : line_end - line_start);
      if (line.rfind("event: ", 0) == 0) event.name = line.substr(7);
      if (line.rfind("data: ", 0) == 0) event.data = line.substr(6);
      if (line_end == std::string::npos) break;
      line_start = line_end + 1;
    }
    events.push_back(event);
    at = end + 2;
  }
  return events;
}

// Feeds `text` as byte tokens (optionally `per_step` at a time) and a final stop.
std::string feed(GenerationResponder& responder, const std::string& text, int32_t choice = 0, size_t per_step = 3,
                 engine::FinishReason finish = engine::FinishReason::stop, bool finish_request = true) {
  std::string out;
  engine::Usage usage{10, 4, 0};
  for (size_t i = 0; i < text.size(); i += per_step) {
    engine::StepOutput output;
    output.choice_index = choice;
    for (size_t j = i; j < std::min(text.size(), i + per_step); ++j) {
      output.tokens.push_back({static_cast<unsigned char>(text[j]), -0.25f, {{static_cast<unsigned char>(text[j]), -0.25f}}});
    }
    usage.n_generated_tokens += static_cast<int32_t>(output.tokens.size());
    output.usage = usage;
    out += responder.on_output(0, output);
  }
  engine::StepOutput last;
  last.choice_index = choice;
  last.tokens.push_back({testing::kEos, -0.1f, {}});
  last.finish_reason = finish;
  last.stop_token_id = finish == engine::FinishReason::stop ? testing::kEos : -1;
  last.request_finished = finish_request;
  usage.n_generated_tokens += 1;
  last.usage = usage;
  out += responder.on_output(0, last);
  return out;
}

class StreamTest : public ::testing::Test {
 protected:
  StreamTest() : model(testing::fake_model()), router(frontend, model, "", engine, metrics, ServerLimits{}) {}
  GenerationJob job(const std::string& path, const std::string& body) {
    auto result = router.route({"POST", path, {}, body});
    EXPECT_TRUE(result.job.has_value()) << result.response.body;
    return std::move(*result.job);
  }
  FakeFrontend frontend;
  ModelInfo model;
  testing::ScriptedEngine engine;
  Metrics metrics;
  Router router;
};

TEST(ChoiceStreamTest, StopStringsAcrossTokensAreHeldBackAndCut) {
  FakeFrontend frontend;
  ChoiceOptions options;
  options.parse = false;
  options.stop_strings = {"STOP", "xyz"};
  ChoiceStream stream(frontend, options);
  std::string visible;
  bool stopped = false;
  std::string text = "abcSTxSTOPdef";
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    engine::StepOutput output;
    output.tokens.push_back({static_cast<unsigned char>(c), 0.0f, {}});
    ChoiceDelta delta = stream.push(output);
    visible += delta.raw_text;
    if (i == 3) EXPECT_TRUE(delta.raw_text.empty());  // "S" may start "STOP"
    stopped = stopped || delta.stopped_by_string;
  }
  EXPECT_TRUE(stopped);
  EXPECT_EQ(visible, "abcSTx");
  EXPECT_EQ(stream.matched_stop_string(), "STOP");
  EXPECT_EQ(stream.finish_reason(), engine::FinishReason::stop);
}

TEST(ChoiceStreamTest, HeldTextIsReleasedAtTheEnd) {
  FakeFrontend frontend;
  ChoiceOptions options;
  options.parse = false;
  options.stop_strings = {"STOP"};
  options.include_stop_string = true;
  ChoiceStream stream(frontend, options);
  engine::StepOutput output;
  output.tokens = {{'a', 0, {}}, {'S', 0, {}}, {'T', 0, {}}};
  output.finish_reason = engine::FinishReason::length;
  ChoiceDelta delta = stream.push(output);
  EXPECT_EQ(delta.raw_text, "aST");
  EXPECT_TRUE(delta.finished);
}

TEST_F(StreamTest, ChatStreamChunks) {
  auto chat = job("/v1/chat/completions", R"({"messages": [{"role": "user", "content": "hi"}], "stream": true,
      "stream_options": {"include_usage": true}, "tools": [{"type": "function", "function": {"name": "f"}}]})");
  auto& responder = *chat.responder;
  ASSERT_TRUE(responder.streaming());
  std::string out = responder.stream_start();
  out += feed(responder, "<think>plan</think>Hi!<tool_call>{\"name\": \"f\", \"arguments\": {\"a\": 1}}</tool_call>");
  auto events = parse_sse(out);
  ASSERT_GE(events.size(), 6u);
  EXPECT_EQ(events.front().payload()["choices"][0]["delta"]["role"], "assistant");
  std::string reasoning, content, arguments, name, finish;
  for (const auto& event : events) {
    if (event.data == "[DONE]") continue;
    json payload = event.payload();
    EXPECT_EQ(payload["object"], "chat.completion.chunk");
    EXPECT_TRUE(payload.contains("usage"));
    if (payload["choices"].empty()) continue;
    const json& delta = payload["choices"][0]["delta"];
    if (delta.contains("reasoning_content")) reasoning += delta["reasoning_content"].get<std::string>();
    if (delta.contains("content")) content += delta["content"].get<std::string>();
    if (delta.contains("tool_calls")) {
      const json& call = delta["tool_calls"][0];
      EXPECT_EQ(call["index"], 0);
      if (call.contains("id")) name = call["function"]["name"];
      arguments += call["function"]["arguments"].get<std::string>();
    }
    if (!payload["choices"][0]["finish_reason"].is_null()) finish = payload["choices"][0]["finish_reason"];
  }
  EXPECT_EQ(reasoning, "plan");
  EXPECT_EQ(content, "Hi!");
  EXPECT_EQ(name, "f");
  EXPECT_EQ(json::parse(arguments), json({{"a", 1}}));
  EXPECT_EQ(finish, "tool_calls");
  json usage_chunk = events[events.size() - 2].payload();
  EXPECT_TRUE(usage_chunk["choices"].empty());
  EXPECT_EQ(usage_chunk["usage"]["prompt_tokens"], 10);
  EXPECT_EQ(usage_chunk["usage"]["prompt_tokens_details"]["cached_tokens"], 4);
  EXPECT_EQ(events.back().data, "[DONE]");
}

TEST_F(StreamTest, ChatNonStreamingWithLogprobsAndTwoChoices) {
  auto chat = job("/v1/chat/completions", R"({"messages": [{"role": "user", "content": "hi"}], "n": 2,
      "logprobs": true, "top_logprobs": 1})");
  auto& responder = *chat.responder;
  feed(responder, "one", 0, 1, engine::FinishReason::stop, false);
  feed(responder, "two", 1, 1, engine::FinishReason::length, true);
  ASSERT_TRUE(responder.done());
  HttpResponse response = responder.final_response();
  ASSERT_EQ(response.status, 200);
  json body = json::parse(response.body);
  EXPECT_EQ(body["object"], "chat.completion");
  ASSERT_EQ(body["choices"].size(), 2u);
  EXPECT_EQ(body["choices"][0]["message"]["content"], "one");
  EXPECT_EQ(body["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(body["choices"][1]["finish_reason"], "length");
  const json& logprobs = body["choices"][0]["logprobs"]["content"];
  ASSERT_EQ(logprobs.size(), 4u);  // three letters and the end token
  EXPECT_EQ(logprobs[0]["token"], "o");
  EXPECT_EQ(logprobs[0]["bytes"], json({'o'}));
  EXPECT_EQ(logprobs[0]["top_logprobs"].size(), 1u);
}

TEST_F(StreamTest, AnthropicExactEventSequence) {
  auto messages = job("/v1/messages", R"({"model": "demo", "max_tokens": 50, "stream": true,
      "messages": [{"role": "user", "content": "hi"}], "tools": [{"name": "f", "input_schema": {"type": "object"}}]})");
  auto& responder = *messages.responder;
  std::string out = responder.stream_start();
  out += feed(responder, "<think>hm</think>Sure.<tool_call>{\"name\": \"f\", \"arguments\": {\"x\": 2}}</tool_call>");
  std::vector<std::string> names;
  for (const auto& event : parse_sse(out)) {
    json payload = event.payload();
    EXPECT_EQ(payload["type"], event.name);
    std::string label = event.name;
    if (event.name == "content_block_start") label += ":" + payload["content_block"]["type"].get<std::string>();
    if (event.name == "content_block_delta") label += ":" + payload["delta"]["type"].get<std::string>();
    if (names.empty() || names.back() != label) names.push_back(label);
    if (event.name == "message_delta") {
      EXPECT_EQ(payload["delta"]["stop_reason"], "tool_use");
      EXPECT_EQ(payload["usage"]["output_tokens"], 82);
    }
    if (event.name == "message_start") {
      EXPECT_EQ(payload["message"]["usage"]["output_tokens"], 0);
    }
  }
  std::vector<std::string> expected = {
      "message_start",
      "content_block_start:thinking", "content_block_delta:thinking_delta", "content_block_delta:signature_delta",
      "content_block_stop",
      "content_block_start:text", "content_block_delta:text_delta", "content_block_stop",
      "content_block_start:tool_use", "content_block_delta:input_json_delta", "content_block_stop",
      "message_delta", "message_stop"};
  EXPECT_EQ(names, expected);
}

TEST_F(StreamTest, AnthropicNonStreamingStopSequence) {
  auto messages = job("/v1/messages", R"({"model": "demo", "max_tokens": 50, "stop_sequences": ["##"],
      "messages": [{"role": "user", "content": "hi"}]})");
  auto& responder = *messages.responder;
  feed(responder, "abc##def");
  auto cancelled = responder.take_cancelled_choices();
  ASSERT_EQ(cancelled.size(), 1u);
  HttpResponse response = responder.final_response();
  json body = json::parse(response.body);
  EXPECT_EQ(body["type"], "message");
  EXPECT_EQ(body["content"][0]["text"], "abc");
  EXPECT_EQ(body["stop_reason"], "stop_sequence");
  EXPECT_EQ(body["stop_sequence"], "##");
  EXPECT_EQ(body["usage"]["input_tokens"], 6);  // 10 prompt tokens, 4 from the prefix cache
  EXPECT_EQ(body["usage"]["cache_read_input_tokens"], 4);
}

TEST_F(StreamTest, ResponsesStreamEvents) {
  auto response_job = job("/v1/responses", R"({"input": "hi", "stream": true,
      "tools": [{"type": "function", "name": "f", "parameters": {"type": "object"}}]})");
  auto& responder = *response_job.responder;
  std::string out = responder.stream_start();
  out += feed(responder, "<think>r</think>Text<tool_call>{\"name\": \"f\", \"arguments\": {}}</tool_call>");
  std::vector<std::string> names;
  int64_t sequence = 0;
  json completed;
  for (const auto& event : parse_sse(out)) {
    json payload = event.payload();
    EXPECT_EQ(payload["type"], event.name);
    EXPECT_EQ(payload["sequence_number"], sequence++);
    if (names.empty() || names.back() != event.name) names.push_back(event.name);
    if (event.name == "response.completed") completed = payload["response"];
  }
  std::vector<std::string> expected = {
      "response.created", "response.in_progress",
      "response.output_item.added", "response.reasoning_text.delta", "response.reasoning_text.done",
      "response.output_item.done",
      "response.output_item.added", "response.content_part.added", "response.output_text.delta",
      "response.output_text.done", "response.content_part.done", "response.output_item.done",
      "response.output_item.added", "response.function_call_arguments.delta",
      "response.function_call_arguments.done", "response.output_item.done", "response.completed"};
  EXPECT_EQ(names, expected);
  ASSERT_EQ(completed["output"].size(), 3u);
  EXPECT_EQ(completed["output"][1]["content"][0]["text"], "Text");
  EXPECT_EQ(completed["output"][2]["type"], "function_call");
  EXPECT_EQ(completed["status"], "completed");
}

TEST_F(StreamTest, ResponsesIncompleteAtLength) {
  auto response_job = job("/v1/responses", R"({"input": "hi", "max_output_tokens": 3})");
  auto& responder = *response_job.responder;
  feed(responder, "ab", 0, 1, engine::FinishReason::length);
  json body = json::parse(responder.final_response().body);
  EXPECT_EQ(body["status"], "incomplete");
  EXPECT_EQ(body["incomplete_details"]["reason"], "max_output_tokens");
  EXPECT_EQ(body["output"][0]["content"][0]["text"], "ab");
}

TEST_F(StreamTest, CompletionsEchoAndLegacyLogprobs) {
  auto completion = job("/v1/completions", R"({"prompt": "pq", "echo": true, "logprobs": 1})");
  auto& responder = *completion.responder;
  engine::StepOutput first;
  first.prompt_tokens = {{testing::kBos, 0, {}}, {'p', -1, {{'p', -1}}}, {'q', -2, {{'q', -2}}}};
  first.tokens = {{'z', -0.5f, {{'z', -0.5f}}}};
  first.finish_reason = engine::FinishReason::length;
  first.request_finished = true;
  responder.on_output(0, first);
  json body = json::parse(responder.final_response().body);
  EXPECT_EQ(body["choices"][0]["text"], "pqz");
  const json& logprobs = body["choices"][0]["logprobs"];
  EXPECT_EQ(logprobs["tokens"], json({"<bos>", "p", "q", "z"}));
  EXPECT_TRUE(logprobs["token_logprobs"][0].is_null());
  EXPECT_EQ(logprobs["token_logprobs"][3], -0.5);
  EXPECT_EQ(logprobs["text_offset"], json({0, 5, 6, 7}));
  EXPECT_EQ(body["choices"][0]["finish_reason"], "length");
}

TEST_F(StreamTest, EngineErrorBecomesStreamError) {
  auto chat = job("/v1/chat/completions", R"({"messages": [{"role": "user", "content": "hi"}], "stream": true})");
  engine::StepOutput failure;
  failure.finish_reason = engine::FinishReason::error;
  failure.error_message = "device lost";
  failure.request_finished = true;
  std::string out = chat.responder->on_output(0, failure);
  EXPECT_NE(out.find("device lost"), std::string::npos);
  EXPECT_NE(out.find("[DONE]"), std::string::npos);
}

TEST_F(StreamTest, EngineCapacityErrorIsARetryableCapacityAnswer) {
  engine::StepOutput failure;
  failure.finish_reason = engine::FinishReason::error;
  failure.error_message = "needs 32 tokens of KV cache (8 pages) for this request alone; has 16 tokens of KV cache. "
                          "Options: --kv-cache-limit.";
  failure.capacity_error = true;
  failure.request_finished = true;

  auto chat = job("/v1/chat/completions", R"({"messages": [{"role": "user", "content": "hi"}]})");
  chat.responder->on_output(0, failure);
  HttpResponse response = chat.responder->final_response();
  EXPECT_EQ(response.status, 503);
  EXPECT_NE(std::find(response.headers.begin(), response.headers.end(), std::pair<std::string, std::string>{"Retry-After", "1"}),
            response.headers.end());
  json body = json::parse(response.body);
  EXPECT_EQ(body["error"]["message"], failure.error_message);  // the capacity form, no "generation failed"
  EXPECT_EQ(body["error"]["code"], "server_busy");

  auto messages = job("/v1/messages", R"({"model": "demo", "max_tokens": 8, "messages": [{"role": "user", "content": "hi"}]})");
  messages.responder->on_output(0, failure);
  HttpResponse anthropic = messages.responder->final_response();
  EXPECT_EQ(anthropic.status, 529);
  EXPECT_EQ(json::parse(anthropic.body)["error"]["type"], "overloaded_error");

  auto streamed = job("/v1/completions", R"({"prompt": "hi", "stream": true})");
  std::string out = streamed.responder->on_output(0, failure);
  EXPECT_NE(out.find("service_unavailable"), std::string::npos) << out;
  EXPECT_EQ(out.find("generation failed"), std::string::npos) << out;

  auto responses = job("/v1/responses", R"({"input": "hi", "stream": true})");
  const std::string events = responses.responder->on_output(0, failure);
  EXPECT_NE(events.find("\"code\":\"server_busy\""), std::string::npos) << events;
  auto responses_whole = job("/v1/responses", R"({"input": "hi"})");
  responses_whole.responder->on_output(0, failure);
  EXPECT_EQ(responses_whole.responder->final_response().status, 503);

  failure.capacity_error = false;  // any other engine error stays a 500
  auto other = job("/v1/chat/completions", R"({"messages": [{"role": "user", "content": "hi"}]})");
  other.responder->on_output(0, failure);
  EXPECT_EQ(other.responder->final_response().status, 500);
  auto other_responses = job("/v1/responses", R"({"input": "hi", "stream": true})");
  const std::string other_events = other_responses.responder->on_output(0, failure);
  EXPECT_NE(other_events.find("\"code\":\"server_error\""), std::string::npos) << other_events;
}

TEST(AdmissionErrors, CapacityForm) {
  engine::AdmissionError busy{true, "a request slot", "4 of 4 running and 8 waiting", "--max-concurrency"};
  HttpResponse response = admission_error_response(ApiStyle::anthropic, busy);
  EXPECT_EQ(response.status, 529);  // Anthropic's "overloaded" status
  json body = json::parse(response.body);
  EXPECT_EQ(body["type"], "error");
  EXPECT_EQ(body["error"]["type"], "overloaded_error");
  EXPECT_EQ(body["error"]["message"], "needs a request slot; has 4 of 4 running and 8 waiting. Options: --max-concurrency.");

  HttpResponse openai = admission_error_response(ApiStyle::openai, busy);
  EXPECT_EQ(openai.status, 503);
  json openai_body = json::parse(openai.body);
  EXPECT_EQ(openai_body["error"]["type"], "service_unavailable");
  EXPECT_EQ(openai_body["error"]["code"], "server_busy");

  engine::AdmissionError never{false, "9,001 tokens", "a context limit of 8,192 tokens", "--kv-cache-limit"};
  EXPECT_EQ(admission_error_response(ApiStyle::anthropic, never).status, 400);
  EXPECT_EQ(json::parse(admission_error_response(ApiStyle::anthropic, never).body)["error"]["type"],
            "invalid_request_error");
}

}  // namespace
}  // namespace flare::server
