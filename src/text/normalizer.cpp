// Normalizer implementations (see normalizer.h). Semantics follow the tokenizers library.
#include "text/normalizer.h"

#include <vector>

#include <nlohmann/json.hpp>

#include "common/error.h"
#include "text/tokenizer_json.h"
#include "text/unicode.h"
#include "text/unicode_regex.h"

namespace flare::text {
namespace {

class UnicodeNormalizer final : public Normalizer {
 public:
  explicit UnicodeNormalizer(NormalForm form) : form_(form) {}
  std::string normalize(std::string_view text) const override { return unicode_normalize(text, form_); }

 private:
  NormalForm form_;
};

class LowercaseNormalizer final : public Normalizer {
 public:
  std::string normalize(std::string_view text) const override { return unicode_lowercase(text); }
};

class StripNormalizer final : public Normalizer {
 public:
  StripNormalizer(bool left, bool right) : left_(left), right_(right) {}
  std::string normalize(std::string_view text) const override {
    size_t begin = 0;
    size_t end = text.size();
    if (left_) {
      while (begin < end) {
        size_t next = begin;
        if (!unicode_is_whitespace(utf8_next(text, next))) break;
        begin = next;
      }
    }
    if (right_) {
      while (end > begin) {
        size_t start = end - 1;
        while (start > begin && (static_cast<unsigned char>(text[start]) & 0xC0) == 0x80) --start;
        size_t probe = start;
        if (!unicode_is_whitespace(utf8_next(text, probe))) break;
        end = start;
      }
    }
    return std::string(text.substr(begin, end - begin));
  }

 private:
  bool left_;
  bool right_;
};

class ReplaceNormalizer final : public Normalizer {
 public:
  ReplaceNormalizer(Regex pattern, std::string content) : pattern_(std::move(pattern)), content_(std::move(content)) {}
  std::string normalize(std::string_view text) const override { return pattern_.replace_all(text, content_); }

 private:
  Regex pattern_;
  std::string content_;
};

class PrependNormalizer final : public Normalizer {
 public:
  explicit PrependNormalizer(std::string prefix) : prefix_(std::move(prefix)) {}
  std::string normalize(std::string_view text) const override {
    // The tokenizers library prepends only to non-empty text.
    if (text.empty()) return {};
    std::string out = prefix_;
    out.append(text);
    return out;
  }

 private:
  std::string prefix_;
};

class SequenceNormalizer final : public Normalizer {
 public:
  explicit SequenceNormalizer(std::vector<std::unique_ptr<Normalizer>> steps) : steps_(std::move(steps)) {}
  std::string normalize(std::string_view text) const override {
    std::string current(text);
    for (const auto& step : steps_) current = step->normalize(current);
    return current;
  }

 private:
  std::vector<std::unique_ptr<Normalizer>> steps_;
};

}  // namespace

std::unique_ptr<Normalizer> make_normalizer(const nlohmann::json& config) {
  if (config.is_null()) return nullptr;
  std::string type = json_type(config, "normalizer");
  if (type == "NFC") return std::make_unique<UnicodeNormalizer>(NormalForm::nfc);
  if (type == "NFD") return std::make_unique<UnicodeNormalizer>(NormalForm::nfd);
  if (type == "NFKC") return std::make_unique<UnicodeNormalizer>(NormalForm::nfkc);
  if (type == "NFKD") return std::make_unique<UnicodeNormalizer>(NormalForm::nfkd);
  if (type == "Lowercase") return std::make_unique<LowercaseNormalizer>();
  if (type == "Strip") {
    return std::make_unique<StripNormalizer>(json_bool(config, "strip_left", true),
                                             json_bool(config, "strip_right", true));
  }
  if (type == "Replace") {
    return std::make_unique<ReplaceNormalizer>(json_pattern(config, "normalizer Replace"),
                                               json_string(config, "content", ""));
  }
  if (type == "Prepend") return std::make_unique<PrependNormalizer>(json_string(config, "prepend", ""));
  if (type == "Sequence") {
    std::vector<std::unique_ptr<Normalizer>> steps;
    for (const auto& step : json_array(config, "normalizers", "normalizer Sequence")) {
      if (auto normalizer = make_normalizer(step)) steps.push_back(std::move(normalizer));
    }
    return std::make_unique<SequenceNormalizer>(std::move(steps));
  }
  fail_input("tokenizer.json: normalizer type {:?} is not supported", type);
}

}  // namespace flare::text
