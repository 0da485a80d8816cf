// Detokenize, stop-string matching and output parsing for one choice (choice_stream.h).
#include "server/choice_stream.h"

#include <random>

namespace flare::server {

std::string make_random_id(const std::string& prefix, size_t n_chars) {
  static constexpr char alphabet[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
  thread_local std::mt19937_64 generator{std::random_device{}()};
  std::uniform_int_distribution<size_t> pick(0, sizeof(alphabet) - 2);
  std::string id = prefix;
  for (size_t i = 0; i < n_chars; ++i) id += alphabet[pick(generator)];
  return id;
}

ChoiceStream::ChoiceStream(const Frontend& frontend, ChoiceOptions options)
    : frontend_(frontend), options_(std::move(options)) {
  const bool keep_specials = options_.parse && frontend_.parser_reads_special_tokens();
  detokenizer_ = frontend_.make_detokenizer(options_.skip_special_tokens && !keep_specials);
  if (options_.parse) parser_ = frontend_.make_parser(options_.parser);
}

LogprobEntry ChoiceStream::logprob_entry(const engine::TokenOutput& token) const {
  LogprobEntry entry;
  entry.token_id = token.token_id;
  entry.token = frontend_.token_text(token.token_id);
  entry.logprob = token.logprob;
  for (const auto& top : token.top_logprobs) {
    entry.top.emplace_back(frontend_.token_text(top.token_id), top.logprob);
    entry.top_ids.push_back(top.token_id);
  }
  return entry;
}

ChoiceDelta ChoiceStream::push(const engine::StepOutput& output) {
  ChoiceDelta delta;
  if (finished()) return delta;  // tokens after a stop string, before the cancel took effect
  if (options_.prompt_logprobs) {
    for (const auto& token : output.prompt_tokens) delta.prompt_logprobs.push_back(logprob_entry(token));
    prompt_logprobs_.insert(prompt_logprobs_.end(), delta.prompt_logprobs.begin(), delta.prompt_logprobs.end());
  }
  for (const auto& token : output.tokens) {
    if (finished()) break;
    ++n_generated_tokens_;
    if (options_.logprobs) {
      delta.logprobs.push_back(logprob_entry(token));
      logprobs_.push_back(delta.logprobs.back());
    }
    bool is_final_stop_token = output.finish_reason == engine::FinishReason::stop &&
                               token.token_id == output.stop_token_id && &token == &output.tokens.back();
    if (!is_final_stop_token) append_text(detokenizer_->push(token.token_id), delta);
  }
  if (!finished() && output.finish_reason != engine::FinishReason::none) {
    append_text(detokenizer_->flush(), delta);
    if (!finished()) {
      // Release text held back for a stop string that never completed.
      std::string rest = std::move(held_);
      held_.clear();
      emit_visible(rest, delta);
      finish_reason_ = output.finish_reason;
      stop_token_id_ = output.stop_token_id;
      error_message_ = output.error_message;
      capacity_error_ = output.capacity_error;
    }
  }
  if (finished() && parser_) {
    add_events(parser_->finish(), delta);
    parser_.reset();
  }
  delta.finished = finished();
  return delta;
}

void ChoiceStream::append_text(std::string text, ChoiceDelta& delta) {
  if (text.empty()) return;
  if (options_.stop_strings.empty()) {
    emit_visible(text, delta);
    return;
  }
  held_ += text;
  size_t best = std::string::npos;
  const std::string* best_stop = nullptr;
  for (const auto& stop : options_.stop_strings) {
    size_t at = held_.find(stop);
    if (at != std::string::npos && (best == std::string::npos || at < best)) {
      best = at;
      best_stop = &stop;
    }
  }
  if (best_stop) {
    std::string visible = held_.substr(0, best + (options_.include_stop_string ? best_stop->size() : 0));
    held_.clear();
    emit_visible(visible, delta);
    matched_stop_ = *best_stop;
    finish_reason_ = engine::FinishReason::stop;
    delta.stopped_by_string = true;
    return;
  }
  // Hold back the longest suffix that is a proper prefix of some stop string.
  size_t keep = 0;
  for (const auto& stop : options_.stop_strings) {
    for (size_t length = std::min(stop.size() - 1, held_.size()); length > keep; --length) {
      if (held_.compare(held_.size() - length, length, stop, 0, length) == 0) {
        keep = length;
        break;
      }
    }
  }
  std::string visible = held_.substr(0, held_.size() - keep);
  held_.erase(0, held_.size() - keep);
  emit_visible(visible, delta);
}

void ChoiceStream::emit_visible(const std::string& text, ChoiceDelta& delta) {
  if (text.empty()) return;
  delta.raw_text += text;
  raw_text_ += text;
  if (parser_) {
    add_events(parser_->push(text), delta);
  } else {
    add_events({ParsedEvent{ParsedEvent::Kind::content, text, {}}}, delta);
  }
}

void ChoiceStream::add_events(std::vector<ParsedEvent> events, ChoiceDelta& delta) {
  using Kind = ParsedEvent::Kind;
  for (auto& event : events) {
    int32_t tool_index = -1;
    switch (event.kind) {
      case Kind::content: content_ += event.text; break;
      case Kind::reasoning: reasoning_ += event.text; break;
      case Kind::tool_call_begin:
        tool_calls_.push_back({make_random_id(options_.tool_call_id_prefix), event.tool_name, {}});
        tool_index = static_cast<int32_t>(tool_calls_.size()) - 1;
        event.text = event.tool_name;
        break;
      case Kind::tool_call_arguments:
        if (tool_calls_.empty()) continue;  // arguments without a call: parser fault, drop
        tool_calls_.back().arguments += event.text;
        tool_index = static_cast<int32_t>(tool_calls_.size()) - 1;
        break;
      case Kind::tool_call_end:
        if (tool_calls_.empty()) continue;
        tool_index = static_cast<int32_t>(tool_calls_.size()) - 1;
        break;
    }
    if (event.kind != Kind::tool_call_begin && event.kind != Kind::tool_call_end && event.text.empty()) continue;
    auto& list = delta.events;
    bool mergeable = !list.empty() && list.back().kind == event.kind &&
                     (event.kind == Kind::content || event.kind == Kind::reasoning ||
                      (event.kind == Kind::tool_call_arguments && list.back().tool_index == tool_index));
    if (mergeable) list.back().text += event.text;
    else list.push_back({event.kind, std::move(event.text), tool_index});
  }
}

}  // namespace flare::server
