// Pre-tokenizer implementations (see pre_tokenizer.h). Semantics follow the tokenizers library.
#include "text/pre_tokenizer.h"

#include <nlohmann/json.hpp>

#include "common/error.h"
#include "text/tokenizer_json.h"
#include "text/unicode.h"
#include "text/unicode_regex.h"

namespace flare::text {
namespace {

// The GPT-2 pattern ByteLevel applies when use_regex is true. The reference runs it as a JavaScript
// regex, so its \s follows JavaScript (see RegexFlavour).
constexpr std::string_view kByteLevelPattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

// Splits every piece with `regex` following `behavior`.
void split_pieces(PreTokens& tokens, const Regex& regex, SplitBehavior behavior, bool invert) {
  std::vector<std::string_view> out;
  out.reserve(tokens.pieces.size() * 4);
  std::vector<Span> matches;
  std::vector<Span> spans;
  for (std::string_view piece : tokens.pieces) {
    matches.clear();
    spans.clear();
    regex.find_all(piece, matches);
    split_by_matches(piece.size(), matches, behavior, invert, spans);
    for (const Span& s : spans) out.push_back(piece.substr(s.begin, s.end - s.begin));
  }
  tokens.pieces = std::move(out);
}

class SplitPreTokenizer final : public PreTokenizer {
 public:
  SplitPreTokenizer(Regex regex, SplitBehavior behavior, bool invert)
      : regex_(std::move(regex)), behavior_(behavior), invert_(invert) {}
  void pre_tokenize(PreTokens& tokens, bool) const override { split_pieces(tokens, regex_, behavior_, invert_); }

 private:
  Regex regex_;
  SplitBehavior behavior_;
  bool invert_;
};

class ByteLevelPreTokenizer final : public PreTokenizer {
 public:
  ByteLevelPreTokenizer(bool add_prefix_space, bool use_regex)
      : add_prefix_space_(add_prefix_space), regex_(use_regex ? std::make_unique<Regex>(kByteLevelPattern, RegexFlavour::javascript) : nullptr) {}
  void pre_tokenize(PreTokens& tokens, bool) const override {
    if (add_prefix_space_) {
      for (std::string_view& piece : tokens.pieces) {
        if (!piece.empty() && piece.front() != ' ') piece = tokens.storage.emplace_back(" " + std::string(piece));
      }
    }
    if (regex_) split_pieces(tokens, *regex_, SplitBehavior::isolated, false);
  }

 private:
  bool add_prefix_space_;
  std::unique_ptr<Regex> regex_;
};

enum class PrependScheme { always, first, never };

class MetaspacePreTokenizer final : public PreTokenizer {
 public:
  MetaspacePreTokenizer(std::string replacement, PrependScheme scheme, bool split)
      : replacement_(std::move(replacement)), scheme_(scheme), split_(split), regex_(Regex::literal(replacement_)) {}
  void pre_tokenize(PreTokens& tokens, bool first_section) const override {
    for (size_t i = 0; i < tokens.pieces.size(); ++i) {
      std::string text;
      text.reserve(tokens.pieces[i].size() + replacement_.size());
      bool prepend = scheme_ == PrependScheme::always || (scheme_ == PrependScheme::first && first_section && i == 0);
      for (char c : tokens.pieces[i]) {
        if (c == ' ') {
          text.append(replacement_);
        } else {
          text.push_back(c);
        }
      }
      if (prepend && !text.starts_with(replacement_)) text.insert(0, replacement_);
      tokens.pieces[i] = tokens.storage.emplace_back(std::move(text));
    }
    if (split_) split_pieces(tokens, regex_, SplitBehavior::merged_with_next, false);
  }

 private:
  std::string replacement_;
  PrependScheme scheme_;
  bool split_;
  Regex regex_;
};

class DigitsPreTokenizer final : public PreTokenizer {
 public:
  explicit DigitsPreTokenizer(bool individual) : individual_(individual) {}
  void pre_tokenize(PreTokens& tokens, bool) const override {
    std::vector<std::string_view> out;
    for (std::string_view piece : tokens.pieces) {
      size_t start = 0;
      bool in_digits = false;
      for (size_t pos = 0; pos < piece.size();) {
        size_t next = pos;
        bool digit = unicode_is_numeric(utf8_next(piece, next));
        bool cut = pos > start && (digit != in_digits || (digit && individual_));
        if (cut) {
          out.push_back(piece.substr(start, pos - start));
          start = pos;
        }
        in_digits = digit;
        pos = next;
      }
      if (start < piece.size()) out.push_back(piece.substr(start));
    }
    tokens.pieces = std::move(out);
  }

 private:
  bool individual_;
};

class SequencePreTokenizer final : public PreTokenizer {
 public:
  explicit SequencePreTokenizer(std::vector<std::unique_ptr<PreTokenizer>> steps) : steps_(std::move(steps)) {}
  void pre_tokenize(PreTokens& tokens, bool first_section) const override {
    for (const auto& step : steps_) step->pre_tokenize(tokens, first_section);
  }

 private:
  std::vector<std::unique_ptr<PreTokenizer>> steps_;
};

SplitBehavior parse_behavior(const nlohmann::json& config) {
  std::string name = json_string(config, "behavior", "Isolated");
  if (name == "Removed") return SplitBehavior::removed;
  if (name == "Isolated") return SplitBehavior::isolated;
  if (name == "MergedWithPrevious") return SplitBehavior::merged_with_previous;
  if (name == "MergedWithNext") return SplitBehavior::merged_with_next;
  if (name == "Contiguous") return SplitBehavior::contiguous;
  fail_input("tokenizer.json: Split behavior {:?} is not supported", name);
}

PrependScheme parse_prepend_scheme(const nlohmann::json& config) {
  std::string name = json_string(config, "prepend_scheme", "");
  if (name.empty()) return json_bool(config, "add_prefix_space", true) ? PrependScheme::always : PrependScheme::never;
  if (name == "always") return PrependScheme::always;
  if (name == "first") return PrependScheme::first;
  if (name == "never") return PrependScheme::never;
  fail_input("tokenizer.json: Metaspace prepend_scheme {:?} is not supported", name);
}

std::unique_ptr<PreTokenizer> make_step(const nlohmann::json& config, bool last, bool& byte_level) {
  std::string type = json_type(config, "pre_tokenizer");
  if (byte_level) fail_input("tokenizer.json: a {} pre-tokenizer after ByteLevel is not supported", type);
  if (type == "Split") {
    return std::make_unique<SplitPreTokenizer>(json_pattern(config, "pre_tokenizer Split"), parse_behavior(config),
                                               json_bool(config, "invert", false));
  }
  if (type == "ByteLevel") {
    if (!last) fail_input("tokenizer.json: ByteLevel must be the last pre-tokenizer of a Sequence");
    byte_level = true;
    return std::make_unique<ByteLevelPreTokenizer>(json_bool(config, "add_prefix_space", true),
                                                   json_bool(config, "use_regex", true));
  }
  if (type == "Metaspace") {
    return std::make_unique<MetaspacePreTokenizer>(json_string(config, "replacement", "\xE2\x96\x81"),
                                                   parse_prepend_scheme(config), json_bool(config, "split", true));
  }
  if (type == "Digits") return std::make_unique<DigitsPreTokenizer>(json_bool(config, "individual_digits", false));
  if (type == "Whitespace") {
    return std::make_unique<SplitPreTokenizer>(Regex(R"(\w+|[^\w\s]+)"), SplitBehavior::removed, true);
  }
  if (type == "WhitespaceSplit") {
    return std::make_unique<SplitPreTokenizer>(Regex(R"(\s+)"), SplitBehavior::removed, false);
  }
  if (type == "Sequence") {
    const auto& steps_json = json_array(config, "pretokenizers", "pre_tokenizer Sequence");
    std::vector<std::unique_ptr<PreTokenizer>> steps;
    for (size_t i = 0; i < steps_json.size(); ++i) {
      steps.push_back(make_step(steps_json[i], last && i + 1 == steps_json.size(), byte_level));
    }
    return std::make_unique<SequencePreTokenizer>(std::move(steps));
  }
  fail_input("tokenizer.json: pre_tokenizer type {:?} is not supported", type);
}

}  // namespace

PreTokenizerSpec make_pre_tokenizer(const nlohmann::json& config) {
  PreTokenizerSpec spec;
  if (config.is_null()) return spec;
  spec.pre_tokenizer = make_step(config, true, spec.byte_level);
  return spec;
}

}  // namespace flare::text
