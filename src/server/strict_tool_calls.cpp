// Strict tools under tool_choice "auto" (strict_tool_calls.h).
#include "server/strict_tool_calls.h"

#include <algorithm>

#include <nlohmann/json.hpp>

namespace flare::server {

StrictToolCallConstraint::StrictToolCallConstraint(std::shared_ptr<const OpenerWatch> watch,
                                                   std::shared_ptr<const TokenVocabulary> vocabulary,
                                                   text::ToolCallOpening opening,
                                                   std::shared_ptr<const ToolCallConstraint> call,
                                                   std::shared_ptr<const ToolCallConstraint> call_after_marker)
    : watch_(std::move(watch)),
      vocabulary_(std::move(vocabulary)),
      opening_(std::move(opening)),
      call_template_(std::move(call)),
      call_after_marker_template_(std::move(call_after_marker)),
      armed_(opening_.armed_at_start) {}

std::unique_ptr<engine::TokenConstraint> StrictToolCallConstraint::clone() const {
  return std::make_unique<StrictToolCallConstraint>(*this);
}

engine::TokenRule StrictToolCallConstraint::next(std::int32_t n_tokens_left) {
  if (call_) return call_->next(n_tokens_left);
  engine::TokenRule rule;  // any token, unless one would write the opener's end inside itself
  if (armed_ && watch_->allowed(state_)) {
    rule.kind = engine::TokenRule::Kind::mask;
    rule.mask = watch_->allowed(state_);
  }
  return rule;
}

void StrictToolCallConstraint::accept(TokenId token) {
  if (call_) {
    call_->accept(token);
    if (call_->finished()) {
      // The call is closed: free text again. Where a marker disarms the watch (harmony: the
      // call's "<|message|>" ended its header) it waits for the next arming; else it watches on.
      call_.reset();
      armed_ = opening_.disarmed_by.empty();
      marker_seen_ = false;
      state_ = 0;
      tail_.clear();
    }
    return;
  }
  if (token < 0 || std::size_t(token) >= vocabulary_->bytes.size()) return;
  const std::string& bytes = vocabulary_->bytes[std::size_t(token)];
  if (armed_) {
    const OpenerWatch::Step step = watch_->advance(state_, bytes);
    state_ = step.state;
    if (step.opened) {
      call_.emplace(marker_seen_ ? *call_after_marker_template_ : *call_template_);
      state_ = 0;
      tail_.clear();
      return;
    }
  }
  watch_markers(bytes);
}

void StrictToolCallConstraint::watch_markers(const std::string& bytes) {
  if (opening_.armed_by.empty() && opening_.disarmed_by.empty()) return;
  tail_ += bytes;
  auto end_of_last = [&](const std::string& marker) -> std::size_t {
    if (marker.empty()) return 0;
    const std::size_t at = tail_.rfind(marker);
    return at == std::string::npos ? 0 : at + marker.size();
  };
  const std::size_t armed_at = end_of_last(opening_.armed_by);
  const std::size_t disarmed_at = end_of_last(opening_.disarmed_by);
  if (armed_at != 0 || disarmed_at != 0) {
    // The later of the two decides; a partial opener match does not survive either.
    armed_ = armed_at > disarmed_at;
    marker_seen_ = false;
    state_ = 0;
  }
  std::size_t cut = std::max(armed_at, disarmed_at);
  const std::size_t marker_at = end_of_last(opening_.marker);
  if (armed_ && marker_at > cut) {
    marker_seen_ = true;
    cut = marker_at;
  }
  tail_.erase(0, cut);  // a marker is counted once
  const std::size_t keep = std::max({opening_.armed_by.size(), opening_.disarmed_by.size(), opening_.marker.size()});
  if (tail_.size() >= keep && keep > 0) tail_.erase(0, tail_.size() - (keep - 1));
}

bool has_strict_tool(const nlohmann::ordered_json& tools) {
  if (!tools.is_array()) return false;
  return std::any_of(tools.begin(), tools.end(), [](const nlohmann::ordered_json& tool) {
    auto function = tool.find("function");
    if (function == tool.end() || !function->is_object()) return false;
    auto strict = function->find("strict");
    return strict != function->end() && strict->is_boolean() && strict->get<bool>();
  });
}

void enforce_strict_tools(const Frontend& frontend, const nlohmann::ordered_json& tools, bool prompt_opened_reasoning,
                          const std::string& tools_field, engine::GenerationRequest& request) {
  if (!has_strict_tool(tools)) return;
  const std::string format = frontend.tool_call_format();
  auto opening = text::tool_call_opening(format);
  if (!opening) return;  // no opener to watch for (docs/structured_outputs.md says which formats)
  if (prompt_opened_reasoning && opening->armed_by.empty()) {
    // A call inside the reasoning block is reasoning text: watch from its close.
    opening->armed_by = "</think>";
    opening->armed_at_start = false;
  }
  // Once a call begins, its name is one of the declared functions.
  std::vector<std::string> names;
  for (const auto& tool : tools) {
    const auto& name = tool["function"]["name"];
    if (name.is_string() && std::find(names.begin(), names.end(), name.get<std::string>()) == names.end()) {
      names.push_back(name.get<std::string>());
    }
  }
  auto call_of = [&](bool marker_seen) {
    return build_tool_call_constraint(
        frontend, names, tools,
        [&](const std::string& name) { return std::optional(text::tool_call_after_opener(format, name, marker_seen)); },
        tools_field);
  };
  std::shared_ptr<const ToolCallConstraint> call = call_of(false);
  std::shared_ptr<const ToolCallConstraint> call_after_marker = opening->marker.empty() ? call : call_of(true);
  auto vocabulary = frontend.token_vocabulary();
  auto watch = opener_watch_for(vocabulary, opening->opener);
  request.constraint = std::make_shared<StrictToolCallConstraint>(std::move(watch), std::move(vocabulary), std::move(*opening),
                                                                  std::move(call), std::move(call_after_marker));
}

}  // namespace flare::server
