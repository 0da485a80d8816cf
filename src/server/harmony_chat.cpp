// Harmony prompts and output parsing for gpt-oss packages (harmony_chat.h).
#include "server/harmony_chat.h"

#include <algorithm>
#include <chrono>
#include <ctime>
#include <deque>

#include <fmt/format.h>

#include "common/error.h"
#include "text/harmony.h"
#include "text/harmony_parser.h"
#include "text/tokenizer.h"

namespace flare::server {

namespace {

using nlohmann::ordered_json;

const std::string kEfforts[] = {"low", "medium", "high"};

std::string today_utc() {
  std::time_t now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm utc{};
  gmtime_r(&now, &utc);
  char text[16];
  std::strftime(text, sizeof(text), "%Y-%m-%d", &utc);
  return text;
}

std::string string_kwarg(const ordered_json& kwargs, const char* key, std::string fallback) {
  auto it = kwargs.find(key);
  if (it == kwargs.end() || it->is_null()) return fallback;
  if (!it->is_string()) fail_input("{} must be a string", key);
  return it->get<std::string>();
}

struct PendingCall {
  std::string id;    // empty when the client gave none
  std::string name;
};

std::string describe(size_t index, const ordered_json& message) {
  return fmt::format("message {} ({})", index, message["role"].get<std::string>());
}

// Pairs every tool result with a call of the assistant message before it and returns, per message,
// the function a tool result is from (empty for other roles). Throws for results that answer no
// call and for calls left unanswered when the conversation moves on (or, with a generation prompt,
// ends).
std::vector<std::string> pair_tool_results(const ordered_json& messages, bool add_generation_prompt) {
  std::vector<std::string> names(messages.size());
  std::deque<PendingCall> pending;
  size_t calls_at = 0;  // the assistant message whose calls are pending
  auto unanswered = [&](const std::string& where) {
    const PendingCall& call = pending.front();
    fail_input("the tool call {}'{}' of message {} (assistant) has no tool result {}",
               call.id.empty() ? "" : "'" + call.id + "' to ", call.name, calls_at, where);
  };
  for (size_t i = 0; i < messages.size(); ++i) {
    const ordered_json& message = messages[i];
    const std::string role = message["role"].get<std::string>();
    if (role == "tool") {
      if (pending.empty()) {
        fail_input("{} answers no tool call: a tool result must follow the assistant message that made the call",
                   describe(i, message));
      }
      auto id = message.find("tool_call_id");
      auto match = pending.begin();
      if (id != message.end() && id->is_string()) {
        match = std::find_if(pending.begin(), pending.end(), [&](const PendingCall& c) { return c.id == id->get<std::string>(); });
        if (match == pending.end()) {
          fail_input("{} has tool_call_id '{}', which matches no unanswered call of message {} (assistant)",
                     describe(i, message), id->get<std::string>(), calls_at);
        }
      }
      names[i] = match->name;
      pending.erase(match);
      continue;
    }
    if (!pending.empty()) unanswered(fmt::format("before {}", describe(i, message)));
    if (role == "assistant" && message.contains("tool_calls")) {
      for (const auto& call : message["tool_calls"]) {
        pending.push_back({call.value("id", std::string()), call["function"]["name"].get<std::string>()});
      }
      calls_at = i;
    }
  }
  if (!pending.empty() && add_generation_prompt) unanswered("before the reply it asks for");
  return names;
}

// HarmonyParser events -> the server's events, one to one (the `end` event carries nothing the
// ChoiceStream needs: it finishes choices from the engine's finish reason).
class HarmonyOutputParser final : public OutputParser {
 public:
  explicit HarmonyOutputParser(const ParserOptions& options) : tool_calls_(options.parse_tool_calls) {}

  std::vector<ParsedEvent> push(std::string_view text) override { return convert(parser_.feed(text)); }
  std::vector<ParsedEvent> finish() override { return convert(parser_.finish()); }

 private:
  std::vector<ParsedEvent> convert(std::vector<text::HarmonyEvent> events) const {
    using In = text::HarmonyEvent::Kind;
    using Out = ParsedEvent::Kind;
    std::vector<ParsedEvent> out;
    for (auto& event : events) {
      switch (event.kind) {
        case In::content: out.push_back({Out::content, std::move(event.text), {}}); break;
        case In::reasoning: out.push_back({Out::reasoning, std::move(event.text), {}}); break;
        case In::tool_call_start:
          if (tool_calls_) out.push_back({Out::tool_call_begin, {}, std::move(event.name)});
          break;
        case In::arguments_delta:
          out.push_back({tool_calls_ ? Out::tool_call_arguments : Out::content, std::move(event.text), {}});
          break;
        case In::tool_call_end:
          if (tool_calls_) out.push_back({Out::tool_call_end, {}, {}});
          break;
        case In::end: break;
      }
    }
    return out;
  }

  bool tool_calls_;
  text::HarmonyParser parser_;
};

}  // namespace

std::span<const std::string> harmony_reasoning_efforts() { return kEfforts; }

bool uses_harmony(std::string_view architecture, std::string_view chat_template, const text::Tokenizer& tokenizer) {
  if (architecture == "GptOssForCausalLM") return true;
  if (!chat_template.empty()) return false;
  for (std::string_view token : {text::kHarmonyStart, text::kHarmonyChannel, text::kHarmonyMessage, text::kHarmonyEnd,
                                 text::kHarmonyReturn}) {
    auto id = tokenizer.token_to_id(token);
    if (!id || !tokenizer.is_special(*id)) return false;
  }
  return true;
}

std::string harmony_render_chat(const ordered_json& messages, const ordered_json& tools, const ordered_json& kwargs,
                                bool add_generation_prompt) {
  if (!kwargs.is_null() && !kwargs.is_object()) fail_input("chat template arguments must be a JSON object");
  const ordered_json options_json = kwargs.is_object() ? kwargs : ordered_json::object();
  text::HarmonyPromptOptions options;
  options.reasoning_effort = string_kwarg(options_json, "reasoning_effort", options.reasoning_effort);
  if (std::find(std::begin(kEfforts), std::end(kEfforts), options.reasoning_effort) == std::end(kEfforts)) {
    fail_input("reasoning_effort must be low, medium or high, not '{}'", options.reasoning_effort);
  }
  options.current_date = string_kwarg(options_json, "current_date", today_utc());
  options.model_identity = string_kwarg(options_json, "model_identity", options.model_identity);
  options.add_generation_prompt = add_generation_prompt;

  std::vector<std::string> tool_names = pair_tool_results(messages, add_generation_prompt);
  std::vector<text::HarmonyMessage> harmony = text::harmony_messages_from_openai(messages);
  for (size_t i = 0; i < harmony.size(); ++i) {
    if (harmony[i].role == "tool") harmony[i].tool_name = tool_names[i];
  }
  return text::harmony_render(harmony, text::harmony_tools_from_openai(tools), options);
}

std::unique_ptr<OutputParser> make_harmony_output_parser(const ParserOptions& options) {
  return std::make_unique<HarmonyOutputParser>(options);
}

}  // namespace flare::server
