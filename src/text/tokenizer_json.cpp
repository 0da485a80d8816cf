// Checked JSON accessors for the tokenizer loaders (see tokenizer_json.h).
#include "text/tokenizer_json.h"

#include "common/error.h"
#include "text/bpe.h"

namespace flare::text {

std::string json_type(const nlohmann::json& config, std::string_view what) {
  if (!config.is_object()) fail_input("tokenizer.json: {} must be an object", what);
  auto it = config.find("type");
  if (it == config.end() || !it->is_string()) fail_input("tokenizer.json: {} has no string \"type\"", what);
  return it->get<std::string>();
}

bool json_bool(const nlohmann::json& config, const char* key, bool fallback) {
  auto it = config.find(key);
  if (it == config.end() || it->is_null()) return fallback;
  if (!it->is_boolean()) fail_input("tokenizer.json: field {:?} must be a boolean", key);
  return it->get<bool>();
}

std::string json_string(const nlohmann::json& config, const char* key, std::string_view fallback) {
  auto it = config.find(key);
  if (it == config.end() || it->is_null()) return std::string(fallback);
  if (!it->is_string()) fail_input("tokenizer.json: field {:?} must be a string", key);
  return it->get<std::string>();
}

const nlohmann::json& json_array(const nlohmann::json& config, const char* key, std::string_view what) {
  auto it = config.find(key);
  if (it == config.end() || !it->is_array()) fail_input("tokenizer.json: {} needs an array {:?}", what, key);
  return *it;
}

Regex json_pattern(const nlohmann::json& config, std::string_view what, std::string* literal) {
  auto it = config.find("pattern");
  if (it == config.end() || !it->is_object()) fail_input("tokenizer.json: {} needs a \"pattern\" object", what);
  if (auto s = it->find("String"); s != it->end() && s->is_string()) {
    if (literal != nullptr) *literal = s->get<std::string>();
    return Regex::literal(s->get<std::string>());
  }
  if (auto r = it->find("Regex"); r != it->end() && r->is_string()) return Regex(r->get<std::string>());
  fail_input("tokenizer.json: {} pattern must be {{\"String\": ...}} or {{\"Regex\": ...}}", what);
}

Regex json_pattern(const nlohmann::json& config, std::string_view what) {
  return json_pattern(config, what, nullptr);
}

}  // namespace flare::text

namespace flare::text {
namespace {

// SAX handler: builds the document through nlohmann's DOM builder except for model.vocab and
// model.merges, which go straight into BpeData.
class TokenizerSax {
 public:
  using json = nlohmann::json;
  TokenizerSax(json& result, BpeData& data) : dom_(result, false), data_(data) {}

  bool null() { return special() ? fail_shape() : dom_.null(); }
  bool boolean(bool v) { return special() ? fail_shape() : dom_.boolean(v); }
  bool number_integer(json::number_integer_t v) {
    if (mode_ == Mode::vocab) return add_vocab(v);
    return special() ? fail_shape() : dom_.number_integer(v);
  }
  bool number_unsigned(json::number_unsigned_t v) {
    if (mode_ == Mode::vocab) return v <= static_cast<json::number_unsigned_t>(INT64_MAX) && add_vocab(static_cast<int64_t>(v));
    return special() ? fail_shape() : dom_.number_unsigned(v);
  }
  bool number_float(json::number_float_t v, const std::string& s) { return special() ? fail_shape() : dom_.number_float(v, s); }
  bool string(std::string& s) {
    if (mode_ == Mode::merges) {
      if (depth_ == mode_depth_) return add_merge_string(s);
      if (depth_ == mode_depth_ + 1 && parts_.size() < 2) {
        parts_.push_back(std::move(s));
        return true;
      }
      return fail_shape();
    }
    return special() ? fail_shape() : dom_.string(s);
  }
  bool binary(json::binary_t& b) { return special() ? fail_shape() : dom_.binary(b); }
  bool key(std::string& k) {
    if (mode_ == Mode::vocab) {
      vocab_key_ = std::move(k);
      return true;
    }
    if (special()) return fail_shape();
    if (depth_ == 1) key1_ = k;
    if (depth_ == 2) key2_ = k;
    return dom_.key(k);
  }
  bool start_object(std::size_t n) {
    if (special()) return fail_shape();
    if (in_model() && key2_ == "vocab") {
      mode_ = Mode::vocab;
      mode_depth_ = ++depth_;
      data_.has_vocab = true;
      return dom_.null();
    }
    ++depth_;
    return dom_.start_object(n);
  }
  bool end_object() {
    if (mode_ == Mode::vocab) {
      --depth_;
      mode_ = Mode::normal;
      return true;
    }
    if (special()) return fail_shape();
    --depth_;
    return dom_.end_object();
  }
  bool start_array(std::size_t n) {
    if (mode_ == Mode::merges) {
      if (depth_ != mode_depth_) return fail_shape();
      ++depth_;
      parts_.clear();
      return true;
    }
    if (special()) return fail_shape();
    if (in_model() && key2_ == "merges") {
      mode_ = Mode::merges;
      mode_depth_ = ++depth_;
      data_.has_merges = true;
      return dom_.null();
    }
    ++depth_;
    return dom_.start_array(n);
  }
  bool end_array() {
    if (mode_ == Mode::merges) {
      if (depth_ == mode_depth_ + 1) {
        --depth_;
        if (parts_.size() != 2) return fail_shape();
        data_.merges.emplace_back(std::move(parts_[0]), std::move(parts_[1]));
        return true;
      }
      --depth_;
      mode_ = Mode::normal;
      return true;
    }
    if (special()) return fail_shape();
    --depth_;
    return dom_.end_array();
  }
  bool parse_error(std::size_t position, const std::string&, const nlohmann::detail::exception& e) {
    error_ = fmt::format("tokenizer.json is not valid JSON (byte {}): {}", position, e.what());
    return false;
  }
  const std::string& error() const { return error_; }

 private:
  enum class Mode { normal, vocab, merges };
  bool special() const { return mode_ != Mode::normal; }
  bool in_model() const { return depth_ == 2 && key1_ == "model"; }
  bool fail_shape() {
    error_ = mode_ == Mode::vocab ? "tokenizer.json: model.vocab must map token strings to integer ids"
                                  : "tokenizer.json: model.merges must hold \"left right\" strings or [left, right] pairs";
    return false;
  }
  bool add_vocab(int64_t id) {
    data_.vocab.emplace_back(std::move(vocab_key_), id);
    return true;
  }
  bool add_merge_string(const std::string& s) {
    size_t space = s.find(' ', 1);
    if (space == std::string::npos) {
      error_ = fmt::format("tokenizer.json: merge {} ({:?}) is not \"left right\"", data_.merges.size(), s);
      return false;
    }
    data_.merges.emplace_back(s.substr(0, space), s.substr(space + 1));
    return true;
  }

  nlohmann::detail::json_sax_dom_parser<json> dom_;
  BpeData& data_;
  Mode mode_ = Mode::normal;
  int depth_ = 0;
  int mode_depth_ = 0;
  std::string key1_, key2_, vocab_key_;
  std::vector<std::string> parts_;
  std::string error_;
};

}  // namespace

nlohmann::json parse_tokenizer_document(std::string_view text, BpeData& data) {
  nlohmann::json result;
  TokenizerSax sax(result, data);
  bool ok = nlohmann::json::sax_parse(text.begin(), text.end(), &sax, nlohmann::json::input_format_t::json, true);
  if (!ok || result.is_discarded()) {
    fail_input("{}", sax.error().empty() ? std::string("tokenizer.json is not valid JSON") : sax.error());
  }
  if (!result.is_object()) fail_input("tokenizer.json must hold a JSON object");
  return result;
}

}  // namespace flare::text
