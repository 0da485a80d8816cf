// Builds a Tokenizer::Impl from tokenizer.json and tokenizer_config.json: model, pipeline
// components, added tokens, the single-sequence post-processor template and config fields.
#include <algorithm>

#include <nlohmann/json.hpp>

#include "common/error.h"
#include "text/tokenizer_impl.h"
#include "text/tokenizer_json.h"

namespace flare::text {
namespace {

nlohmann::json parse_json(std::string_view text, std::string_view what) {
  nlohmann::json parsed = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (parsed.is_discarded()) fail_input("{} is not valid JSON", what);
  if (!parsed.is_object()) fail_input("{} must hold a JSON object", what);
  return parsed;
}

std::vector<AddedToken> parse_added_tokens(const nlohmann::json& root) {
  std::vector<AddedToken> tokens;
  auto it = root.find("added_tokens");
  if (it == root.end() || it->is_null()) return tokens;
  if (!it->is_array()) fail_input("tokenizer.json: added_tokens must be an array");
  for (const auto& entry : *it) {
    if (!entry.is_object() || !entry.contains("id") || !entry["id"].is_number_integer() ||
        !entry.contains("content") || !entry["content"].is_string()) {
      fail_input("tokenizer.json: every added token needs an integer id and a string content");
    }
    AddedToken token;
    token.content = entry["content"].get<std::string>();
    int64_t id = entry["id"].get<int64_t>();
    if (id < 0 || id > INT32_MAX / 2) fail_input("tokenizer.json: added token id {} is out of range", id);
    if (token.content.empty()) fail_input("tokenizer.json: added token {} has empty content", id);
    token.id = static_cast<int32_t>(id);
    token.special = json_bool(entry, "special", false);
    token.lstrip = json_bool(entry, "lstrip", false);
    token.rstrip = json_bool(entry, "rstrip", false);
    token.single_word = json_bool(entry, "single_word", false);
    token.normalized = json_bool(entry, "normalized", !token.special);
    tokens.push_back(std::move(token));
  }
  return tokens;
}

// The ids a TemplateProcessing "single" template puts before and after the sequence.
void parse_template(const nlohmann::json& config, Tokenizer::Impl& m) {
  const auto& single = json_array(config, "single", "post_processor TemplateProcessing");
  const nlohmann::json& specials = config.contains("special_tokens") ? config["special_tokens"] : nlohmann::json::object();
  bool seen_sequence = false;
  for (const auto& item : single) {
    if (item.contains("Sequence")) {
      if (seen_sequence || json_string(item["Sequence"], "id", "A") != "A") {
        fail_input("tokenizer.json: TemplateProcessing single template must contain $A exactly once");
      }
      seen_sequence = true;
      continue;
    }
    if (!item.contains("SpecialToken")) fail_input("tokenizer.json: unknown TemplateProcessing item");
    std::string name = json_string(item["SpecialToken"], "id", "");
    auto special = specials.find(name);
    if (special == specials.end() || !special->contains("ids") || !(*special)["ids"].is_array()) {
      fail_input("tokenizer.json: TemplateProcessing special token {:?} has no ids", name);
    }
    for (const auto& id : (*special)["ids"]) {
      if (!id.is_number_integer()) fail_input("tokenizer.json: TemplateProcessing ids must be integers");
      (seen_sequence ? m.suffix_ids : m.prefix_ids).push_back(id.get<int32_t>());
    }
  }
  if (!seen_sequence) fail_input("tokenizer.json: TemplateProcessing single template has no $A");
}

int32_t pair_id(const nlohmann::json& config, const char* key) {
  auto it = config.find(key);
  if (it == config.end() || !it->is_array() || it->size() != 2 || !(*it)[1].is_number_integer()) {
    fail_input("tokenizer.json: post_processor field {:?} must be [token, id]", key);
  }
  return (*it)[1].get<int32_t>();
}

void parse_post_processor(const nlohmann::json& config, Tokenizer::Impl& m) {
  if (config.is_null()) return;
  std::string type = json_type(config, "post_processor");
  if (type == "ByteLevel") return;  // affects offsets only
  if (type == "TemplateProcessing") return parse_template(config, m);
  if (type == "BertProcessing" || type == "RobertaProcessing") {
    m.prefix_ids.push_back(pair_id(config, "cls"));
    m.suffix_ids.insert(m.suffix_ids.begin(), pair_id(config, "sep"));
    return;
  }
  if (type == "Sequence") {
    for (const auto& step : json_array(config, "processors", "post_processor Sequence")) parse_post_processor(step, m);
    return;
  }
  fail_input("tokenizer.json: post_processor type {:?} is not supported", type);
}

// A token field of tokenizer_config.json: a string or an AddedToken object.
std::string config_token(const nlohmann::json& config, const char* key) {
  auto it = config.find(key);
  if (it == config.end() || it->is_null()) return {};
  if (it->is_string()) return it->get<std::string>();
  if (it->is_object() && it->contains("content") && (*it)["content"].is_string()) return (*it)["content"].get<std::string>();
  fail_input("tokenizer_config.json: {:?} must be a string or an object with \"content\"", key);
}

void parse_chat_templates(const nlohmann::json& config, Tokenizer::Impl& m) {
  auto it = config.find("chat_template");
  if (it == config.end() || it->is_null()) return;
  if (it->is_string()) {
    m.chat_template = it->get<std::string>();
    m.chat_templates.emplace_back("default", m.chat_template);
    return;
  }
  if (!it->is_array()) fail_input("tokenizer_config.json: chat_template must be a string or a list");
  for (const auto& entry : *it) {
    if (!entry.is_object() || !entry.contains("name") || !entry["name"].is_string() || !entry.contains("template") ||
        !entry["template"].is_string()) {
      fail_input("tokenizer_config.json: chat_template entries need a string name and template");
    }
    m.chat_templates.emplace_back(entry["name"].get<std::string>(), entry["template"].get<std::string>());
    if (m.chat_templates.back().first == "default") m.chat_template = m.chat_templates.back().second;
  }
}

bool config_bool(const nlohmann::json& config, const char* key, bool fallback) {
  auto it = config.find(key);
  if (it == config.end() || it->is_null()) return fallback;
  if (!it->is_boolean()) fail_input("tokenizer_config.json: {:?} must be a boolean", key);
  return it->get<bool>();
}

void parse_config(const nlohmann::json& config, Tokenizer::Impl& m) {
  m.tokenizer_class = config.contains("tokenizer_class") && config["tokenizer_class"].is_string()
                          ? config["tokenizer_class"].get<std::string>()
                          : std::string();
  m.bos_token = config_token(config, "bos_token");
  m.eos_token = config_token(config, "eos_token");
  m.pad_token = config_token(config, "pad_token");
  m.unk_token = config_token(config, "unk_token");
  m.clean_up_tokenization_spaces = config_bool(config, "clean_up_tokenization_spaces", true);
  m.split_special_tokens = config_bool(config, "split_special_tokens", false);
  if (auto it = config.find("additional_special_tokens"); it != config.end() && it->is_array()) {
    for (const auto& entry : *it) {
      if (entry.is_string()) m.additional_special_tokens.push_back(entry.get<std::string>());
      else if (entry.is_object() && entry.contains("content") && entry["content"].is_string())
        m.additional_special_tokens.push_back(entry["content"].get<std::string>());
    }
  }
  parse_chat_templates(config, m);
  // transformers' Llama and Gemma tokenizer classes rebuild the post-processor from
  // add_bos_token / add_eos_token (bos defaults on); other classes only record the flags.
  static constexpr std::string_view kBosClasses[] = {"LlamaTokenizer",     "LlamaTokenizerFast",
                                                     "CodeLlamaTokenizer", "CodeLlamaTokenizerFast",
                                                     "GemmaTokenizer",     "GemmaTokenizerFast"};
  bool rebuilds = std::find(std::begin(kBosClasses), std::end(kBosClasses), m.tokenizer_class) != std::end(kBosClasses);
  m.add_bos_token = config_bool(config, "add_bos_token", rebuilds);
  m.add_eos_token = config_bool(config, "add_eos_token", false);
  if (rebuilds) {
    m.prefix_ids.clear();
    m.suffix_ids.clear();
    if (m.add_bos_token && m.bos_id) m.prefix_ids.push_back(*m.bos_id);
    if (m.add_eos_token && m.eos_id) m.suffix_ids.push_back(*m.eos_id);
  }
}

void build_vocabulary(Tokenizer::Impl& m) {
  const auto& model_tokens = m.model->tokens();
  size_t size = model_tokens.size();
  for (const auto& t : m.added_tokens) size = std::max(size, static_cast<size_t>(t.id) + 1);
  m.id_tokens.assign(size, std::string());
  m.id_flags.assign(size, 0);
  for (size_t id = 0; id < model_tokens.size(); ++id) m.id_tokens[id] = model_tokens[id];
  for (const auto& t : m.added_tokens) {
    m.id_tokens[static_cast<size_t>(t.id)] = t.content;
    m.id_flags[static_cast<size_t>(t.id)] |= Tokenizer::Impl::kAdded | (t.special ? Tokenizer::Impl::kSpecial : 0);
    m.token_ids.insert_or_assign(t.content, t.id);
  }
}

void build_matchers(Tokenizer::Impl& m) {
  std::vector<std::string> raw_patterns, normalized_patterns;
  std::vector<AddedToken> raw_tokens, normalized_tokens;
  for (const auto& t : m.added_tokens) {
    if (m.split_special_tokens && t.special) continue;
    if (t.normalized && m.normalizer) {
      normalized_patterns.push_back(m.normalizer->normalize(t.content));
      normalized_tokens.push_back(t);
    } else {
      raw_patterns.push_back(t.content);
      raw_tokens.push_back(t);
    }
  }
  m.raw_matcher = AddedTokenMatcher(std::move(raw_patterns), std::move(raw_tokens));
  m.normalized_matcher = AddedTokenMatcher(std::move(normalized_patterns), std::move(normalized_tokens));
}

}  // namespace

std::unique_ptr<Tokenizer::Impl> build_tokenizer(std::string_view tokenizer_json, std::string_view config_json) {
  auto m = std::make_unique<Tokenizer::Impl>();
  BpeData bpe_data;
  nlohmann::json root = parse_tokenizer_document(tokenizer_json, bpe_data);
  nlohmann::json config = config_json.empty() ? nlohmann::json::object() : parse_json(config_json, "tokenizer_config.json");
  m->config_json = std::string(config_json);

  if (!root.contains("model")) fail_input("tokenizer.json has no model");
  std::string model_type = json_string(root["model"], "type", "BPE");
  if (model_type != "BPE") fail_input("tokenizer.json: model type {:?} is not supported (only BPE)", model_type);
  for (const char* key : {"truncation", "padding"}) {
    if (root.contains(key) && !root[key].is_null()) fail_input("tokenizer.json: {:?} is not supported", key);
  }
  m->normalizer = make_normalizer(root.value("normalizer", nlohmann::json()));
  m->pre = make_pre_tokenizer(root.value("pre_tokenizer", nlohmann::json()));
  m->decoder = make_decoder(root.value("decoder", nlohmann::json()));
  parse_post_processor(root.value("post_processor", nlohmann::json()), *m);
  m->model = std::make_unique<BpeModel>(root["model"], std::move(bpe_data), m->pre.byte_level);
  m->added_tokens = parse_added_tokens(root);
  root = nlohmann::json();  // release the parsed document before building the maps

  build_vocabulary(*m);
  auto lookup = [&](const std::string& token) -> std::optional<int32_t> {
    if (token.empty()) return std::nullopt;
    return m->token_id(token);
  };
  m->bos_token = config_token(config, "bos_token");
  m->eos_token = config_token(config, "eos_token");
  m->bos_id = lookup(m->bos_token);
  m->eos_id = lookup(m->eos_token);
  parse_config(config, *m);
  m->pad_id = lookup(m->pad_token);
  m->unk_id = lookup(m->unk_token);
  if (!m->unk_id) m->unk_id = m->model->unk_id();
  for (const auto& name : m->additional_special_tokens) {
    if (auto id = lookup(name)) m->id_flags[static_cast<size_t>(*id)] |= Tokenizer::Impl::kSpecial;
  }
  build_matchers(*m);
  return m;
}

}  // namespace flare::text
