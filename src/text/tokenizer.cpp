// Tokenizer encode/decode and accessors (see tokenizer.h); loading is in tokenizer_load.cpp.
#include "text/tokenizer.h"

#include <fstream>
#include <sstream>

#include "common/error.h"
#include "text/tokenizer_impl.h"
#include "text/unicode.h"

namespace flare::text {
namespace {

std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail_input("cannot read {}", path.string());
  std::ostringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

void replace_all(std::string& text, std::string_view from, std::string_view to) {
  if (text.find(from) == std::string::npos) return;
  std::string out;
  out.reserve(text.size());
  size_t pos = 0;
  for (size_t hit; (hit = text.find(from, pos)) != std::string::npos; pos = hit + from.size()) {
    out.append(text, pos, hit - pos);
    out.append(to);
  }
  out.append(text, pos);
  text = std::move(out);
}

// transformers' clean_up_tokenization: spaces before punctuation and English contractions.
void clean_up_tokenization(std::string& text) {
  static constexpr std::pair<std::string_view, std::string_view> kRules[] = {
      {" .", "."}, {" ?", "?"}, {" !", "!"}, {" ,", ","}, {" ' ", "'"},
      {" n't", "n't"}, {" 'm", "'m"}, {" 's", "'s"}, {" 've", "'ve"}, {" 're", "'re"}};
  for (auto [from, to] : kRules) replace_all(text, from, to);
}

}  // namespace

void Tokenizer::Impl::encode_section(std::string_view text, bool first_section, std::vector<int32_t>& out) const {
  std::string normalized_storage;
  if (normalizer) {
    normalized_storage = normalizer->normalize(text);
    text = normalized_storage;
  }
  if (text.empty()) return;
  std::vector<TextSection> subsections;
  if (normalized_matcher.empty()) {
    subsections.push_back({text, -1});
  } else {
    normalized_matcher.split(text, subsections);
  }
  PreTokens tokens;
  for (size_t j = 0; j < subsections.size(); ++j) {
    if (subsections[j].token >= 0) {
      out.push_back(normalized_matcher.token(subsections[j].token).id);
      continue;
    }
    tokens.clear();
    tokens.pieces.push_back(subsections[j].text);
    if (pre.pre_tokenizer) pre.pre_tokenizer->pre_tokenize(tokens, first_section && j == 0);
    for (std::string_view piece : tokens.pieces) model->encode(piece, out);
  }
}

std::optional<int32_t> Tokenizer::Impl::token_id(std::string_view token) const {
  if (auto id = token_ids.find(token)) return id;
  return model->token_to_id(token);
}

Tokenizer::Tokenizer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Tokenizer::~Tokenizer() = default;

std::shared_ptr<const Tokenizer> Tokenizer::load(const std::filesystem::path& dir) {
  std::filesystem::path json_path = dir / "tokenizer.json";
  if (!std::filesystem::exists(json_path)) fail_input("no tokenizer.json in {}", dir.string());
  std::string tokenizer_json = read_file(json_path);
  std::string config_json;
  if (std::filesystem::exists(dir / "tokenizer_config.json")) config_json = read_file(dir / "tokenizer_config.json");
  auto impl = build_tokenizer(tokenizer_json, config_json);
  if (impl->chat_template.empty() && std::filesystem::exists(dir / "chat_template.jinja")) {
    impl->chat_template = read_file(dir / "chat_template.jinja");
    impl->chat_templates.emplace_back("default", impl->chat_template);
  }
  return std::shared_ptr<const Tokenizer>(new Tokenizer(std::move(impl)));
}

std::shared_ptr<const Tokenizer> Tokenizer::load_from_json(std::string_view tokenizer_json,
                                                           std::string_view tokenizer_config_json) {
  return std::shared_ptr<const Tokenizer>(new Tokenizer(build_tokenizer(tokenizer_json, tokenizer_config_json)));
}

std::vector<int32_t> Tokenizer::encode(std::string_view input, bool add_special_tokens) const {
  const Impl& m = *impl_;
  std::string repaired;
  std::string_view text = input;
  if (!utf8_is_valid(input)) {
    repaired = utf8_repair(input);
    text = repaired;
  }
  std::vector<int32_t> out;
  out.reserve(text.size() / 3 + 8);
  if (add_special_tokens) out.insert(out.end(), m.prefix_ids.begin(), m.prefix_ids.end());
  std::vector<TextSection> sections;
  if (m.raw_matcher.empty()) {
    if (!text.empty()) sections.push_back({text, -1});
  } else {
    m.raw_matcher.split(text, sections);
  }
  for (size_t i = 0; i < sections.size(); ++i) {
    if (sections[i].token >= 0) {
      out.push_back(m.raw_matcher.token(sections[i].token).id);
    } else {
      m.encode_section(sections[i].text, i == 0, out);
    }
  }
  if (add_special_tokens) out.insert(out.end(), m.suffix_ids.begin(), m.suffix_ids.end());
  return out;
}

std::string Tokenizer::decode(std::span<const int32_t> ids, bool skip_special_tokens) const {
  return decode(ids, skip_special_tokens, impl_->clean_up_tokenization_spaces);
}

std::string Tokenizer::decode(std::span<const int32_t> ids, bool skip_special_tokens, bool clean_up_spaces) const {
  const Impl& m = *impl_;
  DecodeTokens tokens;
  tokens.tokens.reserve(ids.size());
  tokens.added.reserve(ids.size());
  for (int32_t id : ids) {
    if (id < 0 || static_cast<size_t>(id) >= m.id_tokens.size() || m.id_tokens[static_cast<size_t>(id)].empty()) continue;
    uint8_t flags = m.id_flags[static_cast<size_t>(id)];
    if (skip_special_tokens && (flags & Impl::kSpecial)) continue;
    tokens.tokens.push_back(m.id_tokens[static_cast<size_t>(id)]);
    tokens.added.push_back((flags & Impl::kAdded) ? 1 : 0);
  }
  std::string text;
  if (m.decoder) {
    m.decoder->decode_chain(tokens);
    for (const auto& t : tokens.tokens) text.append(t);
  } else {
    for (size_t i = 0; i < tokens.tokens.size(); ++i) {
      if (i > 0) text.push_back(' ');
      text.append(tokens.tokens[i]);
    }
  }
  if (clean_up_spaces) clean_up_tokenization(text);
  return text;
}

std::optional<int32_t> Tokenizer::token_to_id(std::string_view token) const {
  return impl_->token_id(token);
}

std::string Tokenizer::id_to_token(int32_t id) const {
  if (id < 0 || static_cast<size_t>(id) >= impl_->id_tokens.size()) return {};
  return impl_->id_tokens[static_cast<size_t>(id)];
}

size_t Tokenizer::vocab_size() const { return impl_->id_tokens.size(); }

bool Tokenizer::is_special(int32_t id) const {
  return id >= 0 && static_cast<size_t>(id) < impl_->id_flags.size() &&
         (impl_->id_flags[static_cast<size_t>(id)] & Impl::kSpecial);
}

bool Tokenizer::is_added(int32_t id) const {
  return id >= 0 && static_cast<size_t>(id) < impl_->id_flags.size() &&
         (impl_->id_flags[static_cast<size_t>(id)] & Impl::kAdded);
}

std::optional<int32_t> Tokenizer::bos_token_id() const { return impl_->bos_id; }
std::optional<int32_t> Tokenizer::eos_token_id() const { return impl_->eos_id; }
std::optional<int32_t> Tokenizer::pad_token_id() const { return impl_->pad_id; }
std::optional<int32_t> Tokenizer::unk_token_id() const { return impl_->unk_id; }
const std::string& Tokenizer::bos_token() const { return impl_->bos_token; }
const std::string& Tokenizer::eos_token() const { return impl_->eos_token; }
const std::string& Tokenizer::pad_token() const { return impl_->pad_token; }
const std::string& Tokenizer::unk_token() const { return impl_->unk_token; }
bool Tokenizer::add_bos_token() const { return impl_->add_bos_token; }
bool Tokenizer::add_eos_token() const { return impl_->add_eos_token; }
bool Tokenizer::clean_up_tokenization_spaces() const { return impl_->clean_up_tokenization_spaces; }
bool Tokenizer::split_special_tokens() const { return impl_->split_special_tokens; }
const std::string& Tokenizer::tokenizer_class() const { return impl_->tokenizer_class; }
const std::string& Tokenizer::chat_template() const { return impl_->chat_template; }
const std::vector<std::pair<std::string, std::string>>& Tokenizer::chat_templates() const {
  return impl_->chat_templates;
}
const std::vector<std::string>& Tokenizer::additional_special_tokens() const {
  return impl_->additional_special_tokens;
}
const std::string& Tokenizer::config_json() const { return impl_->config_json; }

}  // namespace flare::text
