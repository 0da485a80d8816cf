// The server's Frontend over src/text (see text_frontend.h): tokenizer, chat template with the
// special-token variables transformers passes, incremental detokenizer, and an output parser that
// chains the reasoning parser (<think>) and the model family's tool-call parser. gpt-oss packages
// render and parse with harmony instead (harmony_chat.h).
// One TextFrontend is shared by all HTTP threads: it is immutable after construction, and the
// tokenizer and template it holds are thread-safe. Detokenizers and parsers are per choice.
#include "server/text_frontend.h"

#include <algorithm>
#include <mutex>
#include <optional>

#include <nlohmann/json.hpp>

#include "common/error.h"
#include "server/harmony_chat.h"
#include "text/chat_template.h"
#include "text/detokenizer.h"
#include "text/harmony.h"
#include "text/parser_reasoning.h"
#include "text/parser_tool_call.h"
#include "text/tokenizer.h"

namespace flare::server {

namespace {

using json = nlohmann::json;
using ordered_json = nlohmann::ordered_json;

constexpr std::string_view kThinkStart = "<think>";
constexpr std::string_view kThinkEnd = "</think>";
// Prompt tokens decoded to find an open reasoning block at the end of the generation prompt.
constexpr size_t kPromptTailTokens = 8;

bool contains(std::string_view text, std::string_view part) { return text.find(part) != std::string_view::npos; }

// The tool-call format of the model: template markers first (most specific), then architecture.
std::string choose_tool_format(std::string_view architecture, std::string_view chat_template) {
  if (contains(chat_template, "<｜tool▁calls▁begin｜>") || contains(chat_template, "tool▁calls▁begin")) return "deepseek_v3";
  if (contains(chat_template, "<tool_call>")) return "hermes";
  if (contains(chat_template, "<|python_tag|>")) return "llama3_json";
  if (contains(architecture, "Deepseek") || contains(architecture, "DeepSeek")) return "deepseek_v3";
  if (architecture.starts_with("Qwen2") || architecture.starts_with("Qwen3")) return "hermes";
  if (contains(architecture, "Llama")) return "llama3_json";
  if (contains(chat_template, "<|im_start|>")) return "hermes";  // ChatML
  return {};
}

// GPT-2 byte-level alphabet: the byte a code point of a byte-level token stands for, or -1.
int byte_level_byte(uint32_t code_point) {
  auto printable = [](uint32_t b) { return (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255); };
  if (code_point < 256) return printable(code_point) ? static_cast<int>(code_point) : -1;
  if (code_point >= 256 + 68) return -1;
  uint32_t n = 0;  // the (code_point - 256)-th byte that is not printable
  for (uint32_t b = 0; b < 256; ++b) {
    if (printable(b)) continue;
    if (n++ == code_point - 256) return static_cast<int>(b);
  }
  return -1;
}

// Decodes UTF-8 `text` into code points; false on invalid input.
bool utf8_code_points(std::string_view text, std::vector<uint32_t>& out) {
  for (size_t i = 0; i < text.size();) {
    auto c = static_cast<unsigned char>(text[i]);
    size_t n = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
    if (n == 0 || i + n > text.size()) return false;
    uint32_t cp = n == 1 ? c : c & (0xFF >> (n + 1));
    for (size_t k = 1; k < n; ++k) {
      auto cc = static_cast<unsigned char>(text[i + k]);
      if ((cc & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (cc & 0x3F);
    }
    out.push_back(cp);
    i += n;
  }
  return true;
}

// The raw bytes of a token whose decoded text is an incomplete character: byte-level tokens map
// back through the GPT-2 alphabet, byte-fallback tokens are "<0xNN>". Empty when neither.
std::string raw_token_bytes(const std::string& token) {
  if (token.size() == 6 && token.starts_with("<0x") && token.back() == '>') {
    unsigned value = 0;
    for (size_t i = 3; i < 5; ++i) {
      char c = token[i];
      int digit = c >= '0' && c <= '9' ? c - '0' : c >= 'A' && c <= 'F' ? c - 'A' + 10 : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
      if (digit < 0) return {};
      value = value * 16 + static_cast<unsigned>(digit);
    }
    return std::string(1, static_cast<char>(value));
  }
  std::vector<uint32_t> code_points;
  if (!utf8_code_points(token, code_points)) return {};
  std::string bytes;
  for (uint32_t cp : code_points) {
    int b = byte_level_byte(cp);
    if (b < 0) return {};
    bytes.push_back(static_cast<char>(b));
  }
  return bytes;
}

class TextDetokenizer final : public Detokenizer {
 public:
  TextDetokenizer(std::shared_ptr<const text::Tokenizer> tokenizer, bool skip_special_tokens)
      : inner_(std::move(tokenizer), skip_special_tokens) {}
  std::string push(TokenId id) override { return inner_.push(id); }
  std::string flush() override { return inner_.flush(); }

 private:
  text::IncrementalDetokenizer inner_;
};

// Reasoning first (text between the think tags), then tool calls in the content that remains.
class TextOutputParser final : public OutputParser {
 public:
  TextOutputParser(std::optional<text::ReasoningParserOptions> reasoning, const std::string& tool_format) {
    if (reasoning) reasoning_.emplace(std::move(*reasoning));
    if (!tool_format.empty()) {
      text::ToolCallParserOptions options;
      options.make_id = [](int) { return std::string(); };  // the server names the calls
      tools_ = text::make_tool_call_parser(tool_format, std::move(options));
    }
  }

  std::vector<ParsedEvent> push(std::string_view text) override {
    std::vector<ParsedEvent> events;
    if (!reasoning_) {
      route_content(text, false, events);
      return events;
    }
    text::ReasoningDelta delta = reasoning_->feed(text);
    add_reasoning(delta, false, events);
    return events;
  }

  std::vector<ParsedEvent> finish() override {
    std::vector<ParsedEvent> events;
    if (reasoning_) add_reasoning(reasoning_->finish(), true, events);
    else route_content({}, true, events);
    return events;
  }

 private:
  void add_reasoning(const text::ReasoningDelta& delta, bool final, std::vector<ParsedEvent>& events) {
    if (!delta.reasoning.empty()) events.push_back({ParsedEvent::Kind::reasoning, delta.reasoning, {}});
    route_content(delta.content, final, events);
  }

  void route_content(std::string_view text, bool final, std::vector<ParsedEvent>& events) {
    if (!tools_) {
      if (!text.empty()) events.push_back({ParsedEvent::Kind::content, std::string(text), {}});
      return;
    }
    std::vector<text::ToolCallEvent> tool_events;
    if (!text.empty()) tool_events = tools_->feed(text);
    if (final) {
      auto rest = tools_->finish();
      tool_events.insert(tool_events.end(), std::make_move_iterator(rest.begin()), std::make_move_iterator(rest.end()));
    }
    for (auto& event : tool_events) {
      switch (event.kind) {
        case text::ToolCallEvent::Kind::content:
          events.push_back({ParsedEvent::Kind::content, std::move(event.text), {}});
          break;
        case text::ToolCallEvent::Kind::tool_call_start:
          events.push_back({ParsedEvent::Kind::tool_call_begin, {}, std::move(event.name)});
          break;
        case text::ToolCallEvent::Kind::arguments_delta:
          events.push_back({ParsedEvent::Kind::tool_call_arguments, std::move(event.text), {}});
          break;
        case text::ToolCallEvent::Kind::tool_call_end:
          events.push_back({ParsedEvent::Kind::tool_call_end, {}, {}});
          break;
      }
    }
  }

  std::optional<text::ReasoningParser> reasoning_;
  std::unique_ptr<text::ToolCallParser> tools_;
};

class TextFrontend final : public Frontend {
 public:
  explicit TextFrontend(const TextFrontendAssets& assets) {
    if (assets.tokenizer_json.empty()) fail_input("the model package has no tokenizer.json");
    tokenizer_ = text::Tokenizer::load_from_json(assets.tokenizer_json, assets.tokenizer_config_json);
    std::string source = !assets.chat_template.empty() ? assets.chat_template : tokenizer_->chat_template();
    harmony_ = uses_harmony(assets.architecture, source, *tokenizer_);
    if (harmony_) {
      tool_format_ = "harmony";  // forced calls (tool_call_constraint.h); the output parser is harmony's own
      return;  // the template, if any, is not used: the encoder writes the prompt
    }
    if (!source.empty()) chat_.emplace(text::ChatTemplate::compile(source));
    base_kwargs_ = special_token_variables(*tokenizer_);
    supports_reasoning_ = contains(source, kThinkStart) && contains(source, kThinkEnd);
    tool_format_ = choose_tool_format(assets.architecture, source);
    needs_special_tokens_ = chat_ && compute_needs_special_tokens();
  }

  std::vector<TokenId> encode(std::string_view text, bool add_special_tokens) const override {
    return tokenizer_->encode(text, add_special_tokens);
  }

  std::string decode(std::span<const TokenId> ids, bool skip_special_tokens) const override {
    return tokenizer_->decode(ids, skip_special_tokens);
  }

  std::string token_text(TokenId id) const override {
    TokenId one[] = {id};
    std::string text = tokenizer_->decode(one, false, false);
    if (!contains(text, "\xEF\xBF\xBD") || tokenizer_->is_added(id)) return text;
    std::string bytes = raw_token_bytes(tokenizer_->id_to_token(id));
    return bytes.empty() ? text : bytes;
  }

  int32_t vocab_size() const override { return static_cast<int32_t>(tokenizer_->vocab_size()); }

  std::string render_chat(const ordered_json& messages, const ordered_json& tools, const ordered_json& template_kwargs,
                          bool add_generation_prompt) const override {
    if (harmony_) return harmony_render_chat(messages, tools, template_kwargs, add_generation_prompt);
    if (!chat_) fail_input("this model has no chat template; use the completions API with a plain prompt");
    ordered_json kwargs = base_kwargs_;
    if (template_kwargs.is_object()) {
      for (auto it = template_kwargs.begin(); it != template_kwargs.end(); ++it) {
        if (it.key() == "messages" || it.key() == "tools" || it.key() == "add_generation_prompt") continue;
        kwargs[it.key()] = it.value();
      }
    } else if (!template_kwargs.is_null()) {
      fail_input("chat template arguments must be a JSON object");
    }
    // transformers passes tools=None when the request declares none; templates test `tools is not none`.
    ordered_json tool_list = tools.is_array() && !tools.empty() ? tools : ordered_json();
    return chat_->render_chat(messages, tool_list, add_generation_prompt, kwargs);
  }

  bool chat_prompt_needs_special_tokens() const override { return needs_special_tokens_; }

  bool prompt_opens_reasoning(std::span<const TokenId> prompt_token_ids) const override {
    if (!supports_reasoning_ || prompt_token_ids.empty()) return false;
    size_t n = std::min(prompt_token_ids.size(), kPromptTailTokens);
    std::string tail = tokenizer_->decode(prompt_token_ids.subspan(prompt_token_ids.size() - n), false, false);
    // Templates that open the block end the generation prompt with it ("<think>\n"); a <think>
    // further back is conversation text (a user asking about the tag), not an open block.
    size_t last = tail.find_last_not_of(" \t\r\n");
    return last != std::string::npos && std::string_view(tail).substr(0, last + 1).ends_with(kThinkStart);
  }

  std::unique_ptr<Detokenizer> make_detokenizer(bool skip_special_tokens) const override {
    return std::make_unique<TextDetokenizer>(tokenizer_, skip_special_tokens);
  }

  std::unique_ptr<OutputParser> make_parser(const ParserOptions& options) const override {
    if (harmony_) return make_harmony_output_parser(options);
    std::optional<text::ReasoningParserOptions> reasoning;
    if (supports_reasoning_ && options.parse_reasoning) {
      reasoning.emplace();
      reasoning->start_tag = std::string(kThinkStart);
      reasoning->end_tag = std::string(kThinkEnd);
      reasoning->started_in_prompt = options.prompt_opened_reasoning;
    }
    return std::make_unique<TextOutputParser>(std::move(reasoning), options.parse_tool_calls ? tool_format_ : std::string());
  }

  bool parser_reads_special_tokens() const override { return harmony_; }
  std::vector<std::string> reasoning_efforts() const override {
    if (!harmony_) return {};
    auto efforts = harmony_reasoning_efforts();
    return {efforts.begin(), efforts.end()};
  }

  std::string tool_call_format() const override { return tool_format_; }
  bool is_control_token(TokenId id) const override { return tokenizer_->is_added(id); }
  // Built on first use (a pass over the vocabulary), then shared by every constrained request.
  std::shared_ptr<const TokenVocabulary> token_vocabulary() const override {
    std::call_once(vocabulary_once_, [&] { vocabulary_ = build_token_vocabulary(*this); });
    return vocabulary_;
  }

  const text::Tokenizer& tokenizer() const { return *tokenizer_; }
  bool supports_reasoning() const { return supports_reasoning_; }
  const std::string& tool_format() const { return tool_format_; }
  bool harmony() const { return harmony_; }

 private:
  // The special-token variables transformers' apply_chat_template passes (special_tokens_map).
  static ordered_json special_token_variables(const text::Tokenizer& tokenizer) {
    ordered_json variables = ordered_json::object();
    auto put = [&](const char* name, const std::string& value) {
      if (!value.empty()) variables[name] = value;
    };
    put("bos_token", tokenizer.bos_token());
    put("eos_token", tokenizer.eos_token());
    put("unk_token", tokenizer.unk_token());
    put("pad_token", tokenizer.pad_token());
    if (!tokenizer.additional_special_tokens().empty()) {
      variables["additional_special_tokens"] = tokenizer.additional_special_tokens();
    }
    return variables;
  }

  // Special tokens are added to a chat prompt only when the tokenizer prepends a BOS that the
  // template does not write itself (transformers never adds them; a template that writes the BOS
  // would get it twice).
  bool compute_needs_special_tokens() const {
    auto with = tokenizer_->encode("x", true);
    auto without = tokenizer_->encode("x", false);
    if (with.size() <= without.size() || !std::equal(without.rbegin(), without.rend(), with.rbegin())) return false;
    std::string rendered;
    try {
      ordered_json probe = ordered_json::array({ordered_json{{"role", "user"}, {"content", "x"}}});
      rendered = render_chat(probe, ordered_json(), ordered_json::object(), true);
    } catch (const Error&) {
      return false;  // a template that rejects the probe writes its own structure
    }
    std::string prefix = tokenizer_->decode(std::span(with).first(with.size() - without.size()), false, false);
    return !rendered.starts_with(prefix);
  }

  std::shared_ptr<const text::Tokenizer> tokenizer_;
  std::optional<text::ChatTemplate> chat_;
  ordered_json base_kwargs_;
  bool harmony_ = false;
  bool supports_reasoning_ = false;
  bool needs_special_tokens_ = false;
  std::string tool_format_;
  mutable std::once_flag vocabulary_once_;
  mutable std::shared_ptr<const TokenVocabulary> vocabulary_;
};

}  // namespace

std::unique_ptr<Frontend> make_text_frontend(const TextFrontendAssets& assets) {
  return std::make_unique<TextFrontend>(assets);
}

std::vector<TokenId> eos_token_ids(const TextFrontendAssets& assets, const Frontend& frontend) {
  std::vector<TokenId> ids;
  auto add = [&](const json& value) {
    if (!value.is_number_integer()) fail_input("generation_config.json eos_token_id must be an integer or a list of them");
    auto id = value.get<int64_t>();
    if (id < 0 || id >= frontend.vocab_size()) {
      fail_input("generation_config.json eos_token_id {} is outside the vocabulary (size {})", id, frontend.vocab_size());
    }
    if (std::find(ids.begin(), ids.end(), static_cast<TokenId>(id)) == ids.end()) ids.push_back(static_cast<TokenId>(id));
  };
  if (!assets.generation_config_json.empty()) {
    json config = json::parse(assets.generation_config_json, nullptr, false);
    if (config.is_discarded() || !config.is_object()) fail_input("generation_config.json is not a JSON object");
    if (auto it = config.find("eos_token_id"); it != config.end() && !it->is_null()) {
      if (it->is_array()) {
        for (const auto& value : *it) add(value);
      } else {
        add(*it);
      }
    }
  }
  const auto* text_frontend = dynamic_cast<const TextFrontend*>(&frontend);
  if (ids.empty() && text_frontend) {
    if (auto eos = text_frontend->tokenizer().eos_token_id()) ids.push_back(*eos);
  }
  // Harmony ends a reply with <|return|> and a tool call with <|call|>: both stop generation even
  // where generation_config.json leaves one out (gpt-oss's lists both, and <|endoftext|>).
  if (text_frontend && text_frontend->harmony()) {
    for (std::string_view token : {text::kHarmonyReturn, text::kHarmonyCall}) {
      auto id = text_frontend->tokenizer().token_to_id(token);
      if (id && std::find(ids.begin(), ids.end(), *id) == ids.end()) ids.push_back(*id);
    }
  }
  return ids;
}

}  // namespace flare::server
