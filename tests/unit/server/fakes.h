// Test doubles for the server tests: a byte-level Frontend (token id = byte, 256 = <eos>,
// 257 = <bos>) with a tiny chat template and a <think>/<tool_call> output parser, and a
// scripted Engine that emits a fixed token sequence on its own thread (one engine thread,
// like the real one). Tests only.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <set>
#include <thread>

#include <nlohmann/json.hpp>

#include "common/error.h"
#include "server/frontend.h"

namespace flare::server::testing {

constexpr TokenId kEos = 256;
constexpr TokenId kBos = 257;

inline std::vector<TokenId> bytes_to_ids(const std::string& text) {
  std::vector<TokenId> ids;
  for (unsigned char c : text) ids.push_back(c);
  return ids;
}

class ByteDetokenizer final : public Detokenizer {
 public:
  explicit ByteDetokenizer(bool skip) : skip_(skip) {}
  std::string push(TokenId id) override {
    if (id < 256) return std::string(1, static_cast<char>(id));
    return skip_ ? "" : (id == kEos ? "<eos>" : "<bos>");
  }
  std::string flush() override { return {}; }

 private:
  bool skip_;
};

// <think>reasoning</think>content<tool_call>{"name": ..., "arguments": {...}}</tool_call>
class TagParser final : public OutputParser {
 public:
  explicit TagParser(ParserOptions options) : options_(options) {}
  std::vector<ParsedEvent> push(std::string_view text) override {
    buffer_ += text;
    return drain(false);
  }
  std::vector<ParsedEvent> finish() override { return drain(true); }

 private:
  std::vector<ParsedEvent> drain(bool final) {
    std::vector<ParsedEvent> events;
    while (!buffer_.empty()) {
      if (state_ == 0) {
        size_t think = options_.parse_reasoning ? buffer_.find("<think>") : std::string::npos;
        size_t tool = options_.parse_tool_calls ? buffer_.find("<tool_call>") : std::string::npos;
        size_t at = std::min(think, tool);
        if (at == std::string::npos) {
          size_t lt = final ? std::string::npos : buffer_.rfind('<');
          size_t emit = lt == std::string::npos ? buffer_.size() : lt;
          if (emit > 0) events.push_back({ParsedEvent::Kind::content, buffer_.substr(0, emit), {}});
          buffer_.erase(0, emit);
          break;
        }
        if (at > 0) events.push_back({ParsedEvent::Kind::content, buffer_.substr(0, at), {}});
        state_ = at == think ? 1 : 2;
        buffer_.erase(0, at + (at == think ? 7 : 11));
      } else if (state_ == 1) {
        size_t end = buffer_.find("</think>");
        if (end == std::string::npos) {
          size_t lt = final ? std::string::npos : buffer_.rfind('<');
          size_t emit = lt == std::string::npos ? buffer_.size() : lt;
          if (emit > 0) events.push_back({ParsedEvent::Kind::reasoning, buffer_.substr(0, emit), {}});
          buffer_.erase(0, emit);
          break;
        }
        if (end > 0) events.push_back({ParsedEvent::Kind::reasoning, buffer_.substr(0, end), {}});
        buffer_.erase(0, end + 8);
        state_ = 0;
      } else {
        size_t end = buffer_.find("</tool_call>");
        if (end == std::string::npos) {
          if (final) buffer_.clear();
          break;
        }
        auto call = nlohmann::json::parse(buffer_.substr(0, end), nullptr, false);
        buffer_.erase(0, end + 12);
        state_ = 0;
        if (call.is_discarded() || !call.is_object()) continue;
        events.push_back({ParsedEvent::Kind::tool_call_begin, {}, call.value("name", "")});
        events.push_back({ParsedEvent::Kind::tool_call_arguments, call.value("arguments", nlohmann::json::object()).dump(), {}});
        events.push_back({ParsedEvent::Kind::tool_call_end, {}, {}});
      }
    }
    return events;
  }

  ParserOptions options_;
  std::string buffer_;
  int state_ = 0;  // 0 content, 1 reasoning, 2 tool call
};

class FakeFrontend final : public Frontend {
 public:
  std::vector<TokenId> encode(std::string_view text, bool add_special_tokens) const override {
    std::vector<TokenId> ids;
    if (add_special_tokens) ids.push_back(kBos);
    for (unsigned char c : text) ids.push_back(c);
    return ids;
  }
  std::string decode(std::span<const TokenId> ids, bool skip_special_tokens) const override {
    std::string text;
    ByteDetokenizer detokenizer(skip_special_tokens);
    for (TokenId id : ids) text += detokenizer.push(id);
    return text;
  }
  std::string token_text(TokenId id) const override { return ByteDetokenizer(false).push(id); }
  int32_t vocab_size() const override { return 258; }
  std::string render_chat(const nlohmann::ordered_json& messages, const nlohmann::ordered_json& tools,
                          const nlohmann::ordered_json& kwargs,
                          bool add_generation_prompt) const override {
    std::string prompt;
    for (const auto& message : messages) {
      std::string content = message.value("content", "");
      if (content.find("TEMPLATE_ERROR") != std::string::npos) fail_input("template raised an exception");
      prompt += message["role"].get<std::string>() + ": " + content + "\n";
      if (message.contains("reasoning_content")) prompt += "[reasoning " + message["reasoning_content"].get<std::string>() + "]\n";
      if (message.contains("tool_calls")) prompt += "[calls " + message["tool_calls"].dump() + "]\n";
    }
    for (const auto& tool : tools) prompt += "[tool " + tool["function"]["name"].get<std::string>() + "]\n";
    if (kwargs.contains("enable_thinking") && kwargs["enable_thinking"] == false) prompt += "/no_think\n";
    if (add_generation_prompt) prompt += "assistant:";
    last_messages = messages;
    return prompt;
  }
  std::unique_ptr<Detokenizer> make_detokenizer(bool skip) const override { return std::make_unique<ByteDetokenizer>(skip); }
  std::unique_ptr<OutputParser> make_parser(const ParserOptions& options) const override {
    return std::make_unique<TagParser>(options);
  }
  std::string tool_call_format() const override { return "hermes"; }
  bool is_control_token(TokenId id) const override { return id >= 256; }
  mutable nlohmann::ordered_json last_messages;
};

inline ModelInfo fake_model() {
  ModelInfo model;
  model.canonical_id = "flare/demo-15m";
  model.served_names = {"demo"};
  model.max_context_tokens = 512;
  model.max_concurrency = 4;
  return model;
}

// Emits `script` (as byte tokens) for every choice, one token per step, then stop (<eos>) or
// length. Cancel produces a final abort output.
class ScriptedEngine final : public engine::Engine {
 public:
  std::string script = "Hello world";
  int step_ms = 1;
  bool finish_with_eos = true;
  std::optional<engine::AdmissionError> reject;
  std::string malformed;  // non-empty: submit() throws flare::Error (usage) with this text, as LocalEngine does

  ScriptedEngine() : thread_([this] { loop(); }) {}
  ~ScriptedEngine() override {
    {
      std::lock_guard lock(mutex_);
      quit_ = true;
    }
    wake_.notify_all();
    thread_.join();
  }

  SubmitResult submit(engine::GenerationRequest request, std::shared_ptr<engine::OutputSink> sink) override {
    if (!malformed.empty()) fail_usage("{}", malformed);
    std::lock_guard lock(mutex_);
    if (reject) return {0, reject};
    auto handle = ++next_handle_;
    queue_.push_back({handle, std::move(request), std::move(sink)});
    submitted.push_back(queue_.back().request);
    wake_.notify_all();
    return {handle, std::nullopt};
  }
  void cancel(engine::RequestHandle handle) override {
    std::lock_guard lock(mutex_);
    cancelled_.insert(handle);
    n_cancel_calls++;
  }
  engine::EngineStats stats() const override {
    engine::EngineStats stats;
    stats.n_running = running_.load();
    stats.n_kv_pages_free = 100;
    return stats;
  }
  bool was_cancelled(engine::RequestHandle handle) {
    std::lock_guard lock(mutex_);
    return cancelled_.count(handle) > 0;
  }

  std::atomic<int> n_cancel_calls{0};
  std::atomic<int> n_aborted{0};
  std::atomic<int> n_finished{0};
  std::vector<engine::GenerationRequest> submitted;  // guarded by mutex_ while running

 private:
  struct Job {
    engine::RequestHandle handle;
    engine::GenerationRequest request;
    std::shared_ptr<engine::OutputSink> sink;
  };

  void loop() {
    for (;;) {
      Job job;
      {
        std::unique_lock lock(mutex_);
        wake_.wait(lock, [&] { return quit_ || !queue_.empty(); });
        if (quit_) return;
        job = std::move(queue_.front());
        queue_.pop_front();
      }
      running_++;
      run(job);
      running_--;
    }
  }

  void run(Job& job) {
    std::vector<TokenId> tokens = bytes_to_ids(script);
    if (finish_with_eos) tokens.push_back(kEos);
    engine::Usage usage;
    usage.n_prompt_tokens = static_cast<int32_t>(job.request.prompt_token_ids.size());
    int32_t n_steps = std::min<int32_t>(static_cast<int32_t>(tokens.size()), job.request.max_tokens);
    for (int32_t step = 0; step < n_steps; ++step) {
      std::this_thread::sleep_for(std::chrono::milliseconds(step_ms));
      if (was_cancelled(job.handle)) {
        engine::StepOutput output;
        output.finish_reason = engine::FinishReason::abort;
        output.request_finished = true;
        output.usage = usage;
        job.sink->on_output(output);
        n_aborted++;
        return;
      }
      for (int32_t choice = 0; choice < job.request.n; ++choice) {
        engine::StepOutput output;
        output.choice_index = choice;
        engine::TokenOutput token{tokens[step], -0.5f, {}};
        for (int32_t k = 0; k < job.request.top_logprobs; ++k) token.top_logprobs.push_back({tokens[step], -0.5f});
        output.tokens.push_back(token);
        usage.n_generated_tokens++;
        bool last = step + 1 == n_steps;
        if (last) {
          bool eos = tokens[step] == kEos;
          output.finish_reason = eos ? engine::FinishReason::stop : engine::FinishReason::length;
          output.stop_token_id = eos ? kEos : -1;
          output.request_finished = choice + 1 == job.request.n;
        }
        output.usage = usage;
        job.sink->on_output(output);
      }
    }
    n_finished++;
  }

  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<Job> queue_;
  std::set<engine::RequestHandle> cancelled_;
  engine::RequestHandle next_handle_ = 0;
  bool quit_ = false;
  std::atomic<int> running_{0};
  std::thread thread_;
};

}  // namespace flare::server::testing
