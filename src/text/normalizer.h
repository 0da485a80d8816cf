// Normalizers of tokenizer.json ("normalizer"): NFC, NFD, NFKC, NFKD, Lowercase, Strip, Replace,
// Prepend and Sequence. Each rewrites valid UTF-8 text; built once at load, then const.
// Unsupported types (BertNormalizer, Precompiled, StripAccents...) are rejected at load.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include <nlohmann/json_fwd.hpp>

namespace flare::text {

class Normalizer {
 public:
  virtual ~Normalizer() = default;
  virtual std::string normalize(std::string_view text) const = 0;
};

// Builds the normalizer described by `config`; null when `config` is JSON null. Throws
// flare::Error for an unknown or unsupported type.
std::unique_ptr<Normalizer> make_normalizer(const nlohmann::json& config);

}  // namespace flare::text
