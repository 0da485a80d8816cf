// Decoder implementations (see decoder.h). Invalid UTF-8 produced by byte tokens becomes U+FFFD
// per maximal invalid subpart, like the reference's TextDecoder.
#include "text/decoder.h"

#include <nlohmann/json.hpp>

#include "common/error.h"
#include "text/tokenizer_json.h"
#include "text/unicode.h"
#include "text/unicode_regex.h"

namespace flare::text {
namespace {

class ByteLevelDecoder final : public Decoder {
 public:
  void decode_chain(DecodeTokens& in) const override {
    DecodeTokens out;
    std::string bytes;
    bool pending = false;
    auto flush = [&] {
      if (!pending) return;
      out.tokens.push_back(utf8_repair(bytes));
      out.added.push_back(0);
      bytes.clear();
      pending = false;
    };
    for (size_t i = 0; i < in.tokens.size(); ++i) {
      if (in.added[i]) {
        flush();
        out.tokens.push_back(std::move(in.tokens[i]));
        out.added.push_back(1);
      } else {
        byte_level_decode(in.tokens[i], bytes);
        pending = true;
      }
    }
    flush();
    in = std::move(out);
  }
};

bool parse_byte_token(const std::string& token, unsigned char& byte) {
  if (token.size() != 6 || !token.starts_with("<0x") || token.back() != '>') return false;
  auto hex = [](char c) {
    return c >= '0' && c <= '9' ? c - '0' : c >= 'A' && c <= 'F' ? c - 'A' + 10 : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
  };
  int high = hex(token[3]);
  int low = hex(token[4]);
  if (high < 0 || low < 0) return false;
  byte = static_cast<unsigned char>(high * 16 + low);
  return true;
}

class ByteFallbackDecoder final : public Decoder {
 public:
  void decode_chain(DecodeTokens& in) const override {
    DecodeTokens out;
    std::string bytes;
    auto flush = [&] {
      if (bytes.empty()) return;
      out.tokens.push_back(utf8_repair(bytes));
      out.added.push_back(0);
      bytes.clear();
    };
    for (size_t i = 0; i < in.tokens.size(); ++i) {
      unsigned char byte = 0;
      if (parse_byte_token(in.tokens[i], byte)) {
        bytes.push_back(static_cast<char>(byte));
        continue;
      }
      flush();
      out.tokens.push_back(std::move(in.tokens[i]));
      out.added.push_back(in.added[i]);
    }
    flush();
    in = std::move(out);
  }
};

class FuseDecoder final : public Decoder {
 public:
  void decode_chain(DecodeTokens& in) const override {
    std::string joined;
    for (const auto& t : in.tokens) joined.append(t);
    in.tokens.assign(1, std::move(joined));
    in.added.assign(1, 0);
  }
};

class StripDecoder final : public Decoder {
 public:
  StripDecoder(char32_t content, size_t start, size_t stop) : content_(content), start_(start), stop_(stop) {}
  void decode_chain(DecodeTokens& in) const override {
    for (auto& token : in.tokens) {
      std::vector<size_t> offsets;  // code point starts, plus the end
      std::vector<char32_t> cps;
      for (size_t pos = 0; pos < token.size();) {
        offsets.push_back(pos);
        cps.push_back(utf8_next(token, pos));
      }
      offsets.push_back(token.size());
      size_t begin = 0;
      while (begin < start_ && begin < cps.size() && cps[begin] == content_) ++begin;
      size_t end = cps.size();
      for (size_t i = 0; i < stop_ && end > begin && cps[end - 1] == content_; ++i) --end;
      token = token.substr(offsets[begin], offsets[end] - offsets[begin]);
    }
  }

 private:
  char32_t content_;
  size_t start_;
  size_t stop_;
};

class ReplaceDecoder final : public Decoder {
 public:
  ReplaceDecoder(Regex pattern, std::string content) : pattern_(std::move(pattern)), content_(std::move(content)) {}
  void decode_chain(DecodeTokens& in) const override {
    for (auto& token : in.tokens) token = pattern_.replace_all(token, content_);
  }

 private:
  Regex pattern_;
  std::string content_;
};

class MetaspaceDecoder final : public Decoder {
 public:
  MetaspaceDecoder(std::string replacement, bool strip_first) : replacement_(std::move(replacement)), strip_first_(strip_first) {}
  void decode_chain(DecodeTokens& in) const override {
    for (size_t i = 0; i < in.tokens.size(); ++i) {
      std::string& token = in.tokens[i];
      std::string out;
      for (size_t pos = 0; pos < token.size();) {
        if (token.compare(pos, replacement_.size(), replacement_) == 0) {
          out.push_back(' ');
          pos += replacement_.size();
        } else {
          out.push_back(token[pos++]);
        }
      }
      if (i == 0 && strip_first_ && out.starts_with(' ')) out.erase(0, 1);
      token = std::move(out);
    }
  }

 private:
  std::string replacement_;
  bool strip_first_;
};

class SequenceDecoder final : public Decoder {
 public:
  explicit SequenceDecoder(std::vector<std::unique_ptr<Decoder>> steps) : steps_(std::move(steps)) {}
  void decode_chain(DecodeTokens& in) const override {
    for (const auto& step : steps_) step->decode_chain(in);
  }

 private:
  std::vector<std::unique_ptr<Decoder>> steps_;
};

size_t json_size(const nlohmann::json& config, const char* key) {
  auto it = config.find(key);
  if (it == config.end() || it->is_null()) return 0;
  if (!it->is_number_unsigned() || it->get<uint64_t>() > 1024) fail_input("tokenizer.json: decoder field {:?} is invalid", key);
  return it->get<size_t>();
}

}  // namespace

std::unique_ptr<Decoder> make_decoder(const nlohmann::json& config) {
  if (config.is_null()) return nullptr;
  std::string type = json_type(config, "decoder");
  if (type == "ByteLevel") return std::make_unique<ByteLevelDecoder>();
  if (type == "ByteFallback") return std::make_unique<ByteFallbackDecoder>();
  if (type == "Fuse") return std::make_unique<FuseDecoder>();
  if (type == "Strip") {
    std::string content = json_string(config, "content", " ");
    size_t pos = 0;
    char32_t cp = content.empty() ? 0 : utf8_next(content, pos);
    if (content.empty() || pos != content.size()) fail_input("tokenizer.json: Strip decoder content must be one character");
    return std::make_unique<StripDecoder>(cp, json_size(config, "start"), json_size(config, "stop"));
  }
  if (type == "Replace") {
    return std::make_unique<ReplaceDecoder>(json_pattern(config, "decoder Replace"), json_string(config, "content", ""));
  }
  if (type == "Metaspace") {
    std::string scheme = json_string(config, "prepend_scheme", "always");
    bool strip_first = scheme != "never" && json_bool(config, "add_prefix_space", true);
    return std::make_unique<MetaspaceDecoder>(json_string(config, "replacement", "\xE2\x96\x81"), strip_first);
  }
  if (type == "Sequence") {
    std::vector<std::unique_ptr<Decoder>> steps;
    for (const auto& step : json_array(config, "decoders", "decoder Sequence")) {
      if (auto decoder = make_decoder(step)) steps.push_back(std::move(decoder));
    }
    return std::make_unique<SequenceDecoder>(std::move(steps));
  }
  fail_input("tokenizer.json: decoder type {:?} is not supported", type);
}

}  // namespace flare::text
