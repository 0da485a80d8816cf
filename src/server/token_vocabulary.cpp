// The token table for constrained decoding (TokenVocabulary in frontend.h).
#include "server/frontend.h"

namespace flare::server {

std::shared_ptr<const TokenVocabulary> build_token_vocabulary(const Frontend& frontend) {
  auto vocabulary = std::make_shared<TokenVocabulary>();
  const auto n = static_cast<size_t>(std::max(frontend.vocab_size(), 0));
  vocabulary->bytes.resize(n);
  vocabulary->control.assign(n, 0);
  vocabulary->byte_token.fill(-1);
  for (size_t id = 0; id < n; ++id) {
    const auto token = static_cast<TokenId>(id);
    std::string& bytes = vocabulary->bytes[id];
    bytes = frontend.token_text(token);
    vocabulary->control[id] = frontend.is_control_token(token) ? 1 : 0;
    if (!bytes.empty()) vocabulary->by_bytes.emplace(bytes, token);
    vocabulary->max_token_bytes = std::max(vocabulary->max_token_bytes, bytes.size());
    if (vocabulary->control[id]) continue;
    if (bytes.size() == 1) {
      TokenId& single = vocabulary->byte_token[static_cast<unsigned char>(bytes[0])];
      if (single < 0) single = token;
    }
  }
  return vocabulary;
}

}  // namespace flare::server
