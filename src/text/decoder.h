// Decoders of tokenizer.json ("decoder"): ByteLevel, ByteFallback, Fuse, Strip, Replace,
// Metaspace and Sequence. A decoder rewrites the list of token strings of an id sequence; the
// tokenizer joins the result. Built once at load, then const and thread-safe.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace flare::text {

// Token strings being decoded, with a flag per token: true for added tokens, which the ByteLevel
// decoder passes through verbatim instead of mapping them back to bytes.
struct DecodeTokens {
  std::vector<std::string> tokens;
  std::vector<char> added;
};

class Decoder {
 public:
  virtual ~Decoder() = default;
  virtual void decode_chain(DecodeTokens& tokens) const = 0;
};

// Builds the decoder described by `config` (JSON null gives none). Throws flare::Error for an
// unknown or unsupported type.
std::unique_ptr<Decoder> make_decoder(const nlohmann::json& config);

}  // namespace flare::text
