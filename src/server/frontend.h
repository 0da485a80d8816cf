// The text frontend as the HTTP adapters see it: chat rendering, tokenization, incremental
// detokenization and output parsing (reasoning, tool calls). The server calls these from its
// HTTP threads; one Frontend is shared by all threads (const methods must be thread-safe),
// while detokenizers and parsers are per choice and used by one thread at a time.
// text_frontend.cpp connects this interface to src/text; tests supply their own.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "engine/request.h"

namespace flare::server {

using engine::TokenId;

class Frontend;

// What every token writes, for token masks (constrained decoding). Built once per frontend.
struct TokenVocabulary {
  std::vector<std::string> bytes;          // [vocab_size] the bytes each token stands for
  std::vector<std::uint8_t> control;       // [vocab_size] 1: an added/control token (<tool_call>, <|im_end|>)
  std::array<TokenId, 256> byte_token{};   // the non-control token writing exactly this one byte, -1: none
  std::unordered_map<std::string, TokenId> by_bytes;  // a token writing exactly these bytes (lowest id)
  std::size_t max_token_bytes = 0;
};
// Builds the table from Frontend::token_text and Frontend::is_control_token.
std::shared_ptr<const TokenVocabulary> build_token_vocabulary(const Frontend& frontend);

// What the server knows about the served model.
struct ModelInfo {
  std::string canonical_id;               // the signed model id; always accepted
  std::vector<std::string> served_names;  // aliases, or --served-model-name; first is primary
  int64_t created_unix_s = 0;
  std::string owned_by = "flare";
  int32_t max_context_tokens = 4096;      // prompt + generated tokens per request
  int32_t max_concurrency = 32;
  std::string context_limit_option = "--kv-cache-limit";  // the setting that raises the limit
  engine::SamplingDefaults sampling_defaults;
  engine::SamplingRanges sampling_ranges;
  int32_t default_max_tokens = 0;         // 0: up to the context limit
  std::vector<TokenId> eos_token_ids;     // end a constrained text where its grammar may end

  const std::string& primary_name() const { return served_names.empty() ? canonical_id : served_names[0]; }
  bool accepts_name(std::string_view name) const;
};

// Turns generated token ids into text, one id at a time, holding back incomplete UTF-8.
class Detokenizer {
 public:
  virtual ~Detokenizer() = default;
  virtual std::string push(TokenId id) = 0;
  virtual std::string flush() = 0;
};

// One event of the structured output: visible text, reasoning text, or a tool call.
struct ParsedEvent {
  enum class Kind : uint8_t { content, reasoning, tool_call_begin, tool_call_arguments, tool_call_end };
  Kind kind = Kind::content;
  std::string text;       // content / reasoning / argument JSON fragment
  std::string tool_name;  // tool_call_begin
};

struct ParserOptions {
  bool parse_reasoning = true;    // split <think>-style reasoning from content
  bool thinking_enabled = true;   // the request asked for thinking (template kwargs)
  bool parse_tool_calls = false;  // the request declared tools
  // The rendered prompt ends inside an open reasoning block (the template wrote <think>), so the
  // output starts as reasoning. Set from Frontend::prompt_opens_reasoning.
  bool prompt_opened_reasoning = false;
};

// Splits detokenized text into events. Streaming: push text as it arrives; finish at the end.
class OutputParser {
 public:
  virtual ~OutputParser() = default;
  virtual std::vector<ParsedEvent> push(std::string_view text) = 0;
  virtual std::vector<ParsedEvent> finish() = 0;
};

class Frontend {
 public:
  virtual ~Frontend() = default;
  virtual std::vector<TokenId> encode(std::string_view text, bool add_special_tokens) const = 0;
  virtual std::string decode(std::span<const TokenId> ids, bool skip_special_tokens) const = 0;
  // The bytes one token stands for (logprobs); may be partial UTF-8.
  virtual std::string token_text(TokenId id) const = 0;
  virtual int32_t vocab_size() const = 0;
  // Renders a conversation (OpenAI-shaped messages, tools, template kwargs) to prompt text.
  // Key order is the client's and is kept (templates print schemas with `tojson`).
  // Throws flare::Error on messages the template rejects.
  virtual std::string render_chat(const nlohmann::ordered_json& messages, const nlohmann::ordered_json& tools,
                                  const nlohmann::ordered_json& template_kwargs,
                                  bool add_generation_prompt) const = 0;
  // Whether encoding a rendered chat prompt adds special tokens (templates usually write BOS).
  virtual bool chat_prompt_needs_special_tokens() const { return false; }
  // Whether an encoded chat prompt ends inside an open reasoning block (e.g. "...<think>\n").
  virtual bool prompt_opens_reasoning(std::span<const TokenId> prompt_token_ids) const {
    (void)prompt_token_ids;
    return false;
  }
  virtual std::unique_ptr<Detokenizer> make_detokenizer(bool skip_special_tokens) const = 0;
  virtual std::unique_ptr<OutputParser> make_parser(const ParserOptions& options) const = 0;
  // Whether the output parser reads special tokens (harmony's <|channel|>...): the detokenizer of a
  // parsed choice then keeps them whatever skip_special_tokens says, and the parser drops them.
  virtual bool parser_reads_special_tokens() const { return false; }
  // The reasoning_effort values the prompt format accepts (others are a 400 naming the field);
  // empty: the value goes to the chat template unchecked.
  virtual std::vector<std::string> reasoning_efforts() const { return {}; }

  // Constrained decoding (tool_choice required / named):
  // The model family's tool-call format ("hermes", "llama3_json", "deepseek_v3", "harmony"), or empty.
  virtual std::string tool_call_format() const { return {}; }
  // Added/control tokens, never allowed inside generated JSON.
  virtual bool is_control_token(TokenId id) const {
    (void)id;
    return false;
  }
  // The token table for masks; implementations may cache it (it is the same for every request).
  virtual std::shared_ptr<const TokenVocabulary> token_vocabulary() const { return build_token_vocabulary(*this); }
};

}  // namespace flare::server
