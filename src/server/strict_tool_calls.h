// Tools with "strict": true under tool_choice "auto": the model writes freely and may or may not
// call a tool, but a call it begins is written under the grammar. The text is watched for the
// format's opener (text/tool_call_forcing.h: hermes "<tool_call>", deepseek_v3
// "<｜tool▁call▁begin｜>", harmony "to=functions." in a message header); from there a
// ToolCallConstraint writes the rest of the call (the name among the declared functions, the
// arguments under the function's schema, the closing text) and then lets go, so the model may
// answer, call again or stop. Formats without such an opener (llama3_json: a call is a bare JSON
// object) are not enforced. Between calls the choice ends on EOS and stop tokens as usual
// (decides_end() is false there).
// Built on an HTTP thread; the engine clones it per choice.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "engine/request.h"
#include "engine/token_constraint.h"
#include "server/frontend.h"
#include "server/opener_watch.h"
#include "server/tool_call_constraint.h"
#include "text/tool_call_forcing.h"

namespace flare::server {

class StrictToolCallConstraint final : public engine::TokenConstraint {
 public:
  // call: the rest of a call after the opener; call_after_marker: the same when opening.marker
  // was seen since arming (may equal call).
  StrictToolCallConstraint(std::shared_ptr<const OpenerWatch> watch, std::shared_ptr<const TokenVocabulary> vocabulary,
                           text::ToolCallOpening opening, std::shared_ptr<const ToolCallConstraint> call,
                           std::shared_ptr<const ToolCallConstraint> call_after_marker);

  std::unique_ptr<engine::TokenConstraint> clone() const override;
  engine::TokenRule next(std::int32_t n_tokens_left) override;
  void accept(TokenId token) override;
  bool finished() const override { return false; }
  bool decides_end() const override { return call_.has_value(); }

  bool in_call() const { return call_.has_value(); }

 private:
  void watch_markers(const std::string& bytes);

  std::shared_ptr<const OpenerWatch> watch_;
  std::shared_ptr<const TokenVocabulary> vocabulary_;
  text::ToolCallOpening opening_;
  std::shared_ptr<const ToolCallConstraint> call_template_, call_after_marker_template_;
  std::optional<ToolCallConstraint> call_;  // the call being written
  bool armed_ = true;
  bool marker_seen_ = false;
  std::uint32_t state_ = 0;  // the opener watch's state
  std::string tail_;         // the last bytes since a marker, to find arming markers across tokens
};

// Sets request.constraint when tool_choice is "auto" and a function in `tools` (the adapters'
// OpenAI-shaped list) says "strict": true, for a model whose format has an opener; otherwise
// leaves the request alone. `prompt_opened_reasoning`: calls count only after the reasoning
// block closes ("</think>"). 400s as force_tool_call's, naming `tools_field`.
void enforce_strict_tools(const Frontend& frontend, const nlohmann::ordered_json& tools, bool prompt_opened_reasoning,
                          const std::string& tools_field, engine::GenerationRequest& request);

// Whether a function in `tools` says "strict": true.
bool has_strict_tool(const nlohmann::ordered_json& tools);

}  // namespace flare::server
