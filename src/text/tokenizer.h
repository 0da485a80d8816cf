// A Hugging Face tokenizer loaded from tokenizer.json (+ tokenizer_config.json): byte-level BPE
// (Qwen3, Llama 3, DeepSeek V3) and SentencePiece-style BPE with byte fallback (Gemma 3).
// Encoding gives the same ids as the reference implementation; decoding the same text.
// Constructs the tokenizer.json features are rejected at load with a flare::Error naming them.
//
// Input text that is not valid UTF-8 is repaired first: each maximal invalid subpart becomes
// U+FFFD (what a JavaScript TextDecoder or Python's errors="replace" produce), then encoded.
//
// Thread safety: a loaded Tokenizer is immutable apart from an internal, synchronized word
// cache; encode/decode may run concurrently from any number of threads.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace flare::text {

class Tokenizer {
 public:
  // Reads `dir`/tokenizer.json and, when present, `dir`/tokenizer_config.json (and
  // `dir`/chat_template.jinja when the config carries no template).
  static std::shared_ptr<const Tokenizer> load(const std::filesystem::path& dir);
  // Same from in-memory file contents; `tokenizer_config_json` may be empty.
  static std::shared_ptr<const Tokenizer> load_from_json(std::string_view tokenizer_json,
                                                         std::string_view tokenizer_config_json);
  ~Tokenizer();
  Tokenizer(const Tokenizer&) = delete;
  Tokenizer& operator=(const Tokenizer&) = delete;

  // `add_special_tokens`: apply the post-processor template (e.g. a leading BOS).
  std::vector<int32_t> encode(std::string_view text, bool add_special_tokens) const;
  // Decodes ids; ids outside the vocabulary are skipped. Applies the config's
  // clean_up_tokenization_spaces (as the reference does).
  std::string decode(std::span<const int32_t> ids, bool skip_special_tokens) const;
  // Same with an explicit choice of the clean-up (the streaming detokenizer never cleans up).
  std::string decode(std::span<const int32_t> ids, bool skip_special_tokens, bool clean_up_spaces) const;

  std::optional<int32_t> token_to_id(std::string_view token) const;
  // The token string as written in tokenizer.json ("" for an id without a token).
  std::string id_to_token(int32_t id) const;
  // One more than the largest token id (model vocabulary and added tokens).
  size_t vocab_size() const;
  // Special tokens: added tokens marked special, plus additional_special_tokens of the config.
  bool is_special(int32_t id) const;
  // Whether `id` is an added token (special or not).
  bool is_added(int32_t id) const;

  // tokenizer_config.json fields needed to render chats and to stop generation.
  std::optional<int32_t> bos_token_id() const;
  std::optional<int32_t> eos_token_id() const;
  std::optional<int32_t> pad_token_id() const;
  std::optional<int32_t> unk_token_id() const;
  const std::string& bos_token() const;  // "" when absent
  const std::string& eos_token() const;
  const std::string& pad_token() const;
  const std::string& unk_token() const;
  bool add_bos_token() const;
  bool add_eos_token() const;
  bool clean_up_tokenization_spaces() const;
  bool split_special_tokens() const;
  const std::string& tokenizer_class() const;
  // The default chat template ("" when none), and every named template (name, source) when the
  // config lists several ("default" is the default one).
  const std::string& chat_template() const;
  const std::vector<std::pair<std::string, std::string>>& chat_templates() const;
  const std::vector<std::string>& additional_special_tokens() const;
  // The raw tokenizer_config.json text ("" when none), for fields not exposed above.
  const std::string& config_json() const;

  struct Impl;

 private:
  explicit Tokenizer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace flare::text
