// Internal state of flare::text::Tokenizer, shared by tokenizer.cpp (encode/decode) and
// tokenizer_load.cpp (building it from JSON). Not part of the public API.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "text/added_tokens.h"
#include "text/bpe.h"
#include "text/decoder.h"
#include "text/normalizer.h"
#include "text/pre_tokenizer.h"
#include "text/tokenizer.h"

namespace flare::text {

struct Tokenizer::Impl {
  std::unique_ptr<Normalizer> normalizer;
  PreTokenizerSpec pre;
  std::unique_ptr<BpeModel> model;
  std::unique_ptr<Decoder> decoder;

  std::vector<AddedToken> added_tokens;   // tokenizer.json order
  AddedTokenMatcher raw_matcher;          // matched on the input text
  AddedTokenMatcher normalized_matcher;   // matched on normalized sections
  std::vector<int32_t> prefix_ids;        // post-processor, single sequence: before / after
  std::vector<int32_t> suffix_ids;

  std::vector<std::string> id_tokens;     // id -> token string (vocabulary and added tokens)
  std::vector<uint8_t> id_flags;          // kSpecial | kAdded
  StringTable token_ids;                  // added token content -> id (the model has the rest)
  static constexpr uint8_t kSpecial = 1;
  static constexpr uint8_t kAdded = 2;

  // tokenizer_config.json
  std::string config_json;
  std::string tokenizer_class;
  std::string bos_token, eos_token, pad_token, unk_token;
  std::optional<int32_t> bos_id, eos_id, pad_id, unk_id;
  bool add_bos_token = false;
  bool add_eos_token = false;
  bool clean_up_tokenization_spaces = true;
  bool split_special_tokens = false;
  std::string chat_template;
  std::vector<std::pair<std::string, std::string>> chat_templates;
  std::vector<std::string> additional_special_tokens;

  std::optional<int32_t> token_id(std::string_view token) const;
  void encode_section(std::string_view text, bool first_section, std::vector<int32_t>& out) const;
};

// Builds the whole tokenizer (tokenizer_load.cpp).
std::unique_ptr<Tokenizer::Impl> build_tokenizer(std::string_view tokenizer_json, std::string_view config_json);

}  // namespace flare::text
