// gpt-oss chat on the server: the harmony prompt encoder (src/text/harmony.h) in place of a Jinja
// template, and the harmony streaming parser (src/text/harmony_parser.h) as the OutputParser.
// TextFrontend (text_frontend.cpp) uses these when uses_harmony() says the package speaks harmony.
// Conversations are checked before rendering, so a malformed one is a 400, never a prompt the
// model was not trained on: every tool result answers a call of the assistant message before it,
// and every call is answered before the conversation moves on.
// Pure functions; the parser is per choice.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "server/frontend.h"

namespace flare::text {
class Tokenizer;
}

namespace flare::server {

// The reasoning_effort values harmony's system message takes.
std::span<const std::string> harmony_reasoning_efforts();

// A package speaks harmony when its architecture is GptOssForCausalLM (whatever template it ships:
// the native encoder is the reference), or when it ships no chat template and its tokenizer has
// harmony's <|start|>, <|channel|>, <|message|>, <|end|> and <|return|> tokens.
bool uses_harmony(std::string_view architecture, std::string_view chat_template, const text::Tokenizer& tokenizer);

// Renders normalized OpenAI-shaped messages and tools (chat_messages.h) as a harmony prompt.
// kwargs: reasoning_effort (low|medium|high, default medium), current_date (YYYY-MM-DD, default
// today in UTC, as gpt-oss's own template writes it), model_identity. Throws flare::Error for a
// conversation harmony cannot express (see the header block) and for bad kwargs.
std::string harmony_render_chat(const nlohmann::ordered_json& messages, const nlohmann::ordered_json& tools,
                                const nlohmann::ordered_json& kwargs, bool add_generation_prompt);

// analysis -> reasoning, final and preambles -> content, to=functions.NAME -> tool calls (held
// until the call closes, then checked as JSON; without declared tools, calls are shown as
// content). Reads the special tokens, so the detokenizer must keep them.
std::unique_ptr<OutputParser> make_harmony_output_parser(const ParserOptions& options);

}  // namespace flare::server
