// The serving catalog's step shapes, JSON form and package check (see serving_catalog.h).
#include "helios/serving_catalog.h"

#include <algorithm>
#include <functional>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "common/error.h"

namespace flare::helios {
namespace {

using nlohmann::json;

constexpr int k_format = 1;
constexpr std::size_t k_max_listed_missing = 12;  // the refusal lists this many modules, then a count

constexpr DType k_kv_dtypes[] = {DType::bf16, DType::f8_e4m3};  // what a KV page may hold

json dtype_json(DType dtype) { return std::string(dtype_name(dtype)); }

// Reads the members of one object of the untrusted text, naming `origin` and the member's path in
// every error.
class Reader {
 public:
  Reader(const json& object, std::string origin, std::string path)
      : object_(object), origin_(std::move(origin)), path_(std::move(path)) {
    if (!object_.is_object()) fail_input("{}: {} is not an object", origin_, path_.empty() ? "the catalog" : path_);
  }

  const json& at(const char* name) const {
    const auto it = object_.find(name);
    if (it == object_.end()) fail_input("{}: {} has no \"{}\"", origin_, where(), name);
    return *it;
  }
  std::string where() const { return path_.empty() ? "the catalog" : path_; }
  std::string member(const char* name) const { return path_.empty() ? std::string(name) : path_ + "." + name; }

  std::int32_t int32(const char* name, std::int32_t min, std::int32_t max) const {
    const json& v = at(name);
    if (!v.is_number_integer() || v.get<std::int64_t>() < min || v.get<std::int64_t>() > max) {
      fail_input("{}: {} must be an integer from {} to {}, not {}", origin_, member(name), min, max, v.dump());
    }
    return std::int32_t(v.get<std::int64_t>());
  }
  std::int32_t optional_int32(const char* name, std::int32_t min, std::int32_t max) const {
    return object_.contains(name) ? int32(name, min, max) : 0;
  }
  bool boolean(const char* name) const {
    const json& v = at(name);
    if (!v.is_boolean()) fail_input("{}: {} must be true or false, not {}", origin_, member(name), v.dump());
    return v.get<bool>();
  }
  DType kv_dtype(const json& v, const std::string& what) const {
    for (const DType dtype : k_kv_dtypes) {
      if (v.is_string() && v.get<std::string>() == dtype_name(dtype)) return dtype;
    }
    fail_input("{}: {} must be \"bf16\" or \"f8_e4m3\", not {}", origin_, what, v.dump());
  }
  const json& array(const char* name) const {
    const json& v = at(name);
    if (!v.is_array()) fail_input("{}: {} must be an array", origin_, member(name));
    return v;
  }
  const std::string& origin() const { return origin_; }

 private:
  const json& object_;
  std::string origin_, path_;
};

constexpr std::int32_t k_max_int = 1 << 30;

KernelPlatform platform_parse(const Reader& r) {
  KernelPlatform p;
  p.compute_major = r.int32("compute_major", 1, 99);
  p.compute_minor = r.int32("compute_minor", 0, 9);
  p.max_shared_bytes_per_block = r.int32("max_shared_bytes_per_block", 1, k_max_int);
  p.cublaslt = r.boolean("cublaslt");
  p.stream_gemm = r.boolean("stream_gemm");
  p.sampler_one_cta = r.boolean("sampler_one_cta");
  return p;
}

KernelNeeds needs_parse(const Reader& r) {
  KernelNeeds n;
  const json& attention = r.array("attention");
  for (std::size_t i = 0; i < attention.size(); ++i) {
    const Reader a(attention[i], r.origin(), fmt::format("needs.attention[{}]", i));
    n.attention.push_back({a.int32("n_heads", 1, k_max_int), a.int32("n_kv_heads", 1, k_max_int),
                           a.int32("head_dim", 1, 65536), a.int32("rotary_half", 1, 32768)});
  }
  n.fp8_linears = r.boolean("fp8_linears");
  n.mixture_of_experts = r.boolean("mixture_of_experts");
  n.vocab_size = r.int32("vocab_size", 1, k_max_int);
  const json& kv = r.array("kv_dtypes");
  for (std::size_t i = 0; i < kv.size(); ++i) n.kv_dtypes.push_back(r.kv_dtype(kv[i], fmt::format("needs.kv_dtypes[{}]", i)));
  n.page_size_tokens = r.int32("page_size_tokens", 1, 65536);
  const json& buckets = r.array("decode_buckets");
  for (std::size_t i = 0; i < buckets.size(); ++i) {
    if (!buckets[i].is_number_integer() || buckets[i].get<std::int64_t>() < 1 || buckets[i].get<std::int64_t>() > k_max_int) {
      fail_input("{}: needs.decode_buckets[{}] must be a positive integer, not {}", r.origin(), i, buckets[i].dump());
    }
    n.decode_buckets.push_back(std::int32_t(buckets[i].get<std::int64_t>()));
  }
  n.prefill_chunk_tokens = r.int32("prefill_chunk_tokens", 1, k_max_int);
  // Catalogs recorded before verify graphs lack these three: no speculation.
  n.max_verify_tokens = r.optional_int32("max_verify_tokens", 0, 65536);
  n.verify_token_capacity = r.optional_int32("verify_token_capacity", 0, k_max_int);
  n.verify_graph_budget = r.optional_int32("verify_graph_budget", 0, k_max_int);
  if (!std::ranges::is_sorted(n.attention) || std::ranges::adjacent_find(n.attention) != n.attention.end() ||
      !std::ranges::is_sorted(n.kv_dtypes) || std::ranges::adjacent_find(n.kv_dtypes) != n.kv_dtypes.end() ||
      !std::ranges::is_sorted(n.decode_buckets) || std::ranges::adjacent_find(n.decode_buckets) != n.decode_buckets.end()) {
    fail_input("{}: needs.attention, needs.kv_dtypes and needs.decode_buckets must be distinct and ascending",
               r.origin());
  }
  return n;
}

StepShape shape_parse(const Reader& r) {
  StepShape s;
  s.n_rows = r.int32("n_rows", 1, k_max_int);
  s.tokens_per_row = r.int32("tokens_per_row", 1, k_max_int);
  s.logits_per_row = r.int32("logits_per_row", 0, s.tokens_per_row);
  s.kv_dtype = r.kv_dtype(r.at("kv_dtype"), r.member("kv_dtype"));
  return s;
}

std::string yes_no(bool b) { return b ? "yes" : "no"; }

template <typename T, typename F>
std::string list_text(const std::vector<T>& values, F&& text) {
  std::string out;
  for (const T& v : values) out += (out.empty() ? "" : ", ") + text(v);
  return out.empty() ? "none" : out;
}

std::string attention_text(const AttentionNeeds& a) {
  return fmt::format("{}/{} heads x {} (rotary {})", a.n_heads, a.n_kv_heads, a.head_dim, 2 * a.rotary_half);
}

}  // namespace

std::string KernelPlatform::arch() const { return fmt::format("sm_{}{}", compute_major, compute_minor); }

std::vector<std::int32_t> serving_decode_buckets(std::int32_t max_concurrency) {
  std::vector<std::int32_t> buckets;
  for (std::int32_t bucket = 1;; bucket *= 2) {
    buckets.push_back(bucket);
    if (bucket >= max_concurrency) break;
  }
  return buckets;
}

std::vector<StepShape> serving_verify_shapes(std::span<const std::int32_t> decode_buckets, std::int32_t max_verify_tokens,
                                             std::int32_t token_capacity, std::int32_t budget, DType kv_dtype) {
  std::vector<std::int32_t> buckets(decode_buckets.begin(), decode_buckets.end());
  std::ranges::sort(buckets);
  buckets.erase(std::unique(buckets.begin(), buckets.end()), buckets.end());
  std::vector<StepShape> shapes;
  for (const std::int32_t rows : buckets) {
    for (std::int32_t width = max_verify_tokens; width >= 2; --width) {
      if (std::int32_t(shapes.size()) >= budget) break;
      if (std::int64_t(rows) * width <= token_capacity) shapes.push_back({rows, width, width, kv_dtype});
    }
  }
  std::ranges::sort(shapes, [](const StepShape& a, const StepShape& b) {
    return a.n_tokens() != b.n_tokens() ? a.n_tokens() > b.n_tokens() : a.n_rows > b.n_rows;
  });
  return shapes;
}

std::vector<StepShape> serving_step_shapes(std::span<const std::int32_t> decode_buckets,
                                           std::int32_t prefill_chunk_tokens, std::span<const DType> kv_dtypes,
                                           std::int32_t max_verify_tokens, std::int32_t verify_token_capacity,
                                           std::int32_t verify_graph_budget) {
  std::vector<std::int32_t> buckets(decode_buckets.begin(), decode_buckets.end());
  std::ranges::sort(buckets, std::greater<>());
  buckets.erase(std::unique(buckets.begin(), buckets.end()), buckets.end());
  std::vector<StepShape> shapes;
  for (const DType kv : kv_dtypes) {
    if (prefill_chunk_tokens >= 2) {
      for (const std::int32_t n_logits : {0, 1}) shapes.push_back({1, prefill_chunk_tokens, n_logits, kv});
    }
    for (const StepShape& verify :
         serving_verify_shapes(buckets, max_verify_tokens, verify_token_capacity, verify_graph_budget, kv)) {
      shapes.push_back(verify);
    }
    for (const std::int32_t rows : buckets) shapes.push_back({rows, 1, 1, kv});
  }
  return shapes;
}

std::vector<StepShape> serving_step_shapes(const KernelNeeds& needs) {
  return serving_step_shapes(needs.decode_buckets, needs.prefill_chunk_tokens, needs.kv_dtypes, needs.max_verify_tokens,
                             needs.verify_token_capacity, needs.verify_graph_budget);
}

std::string serving_catalog_serialize(const ServingCatalog& c) {
  const KernelPlatform& p = c.platform;
  const KernelNeeds& n = c.needs;
  json attention = json::array(), kv = json::array(), graphs = json::array();
  for (const AttentionNeeds& a : n.attention) {
    attention.push_back(
        {{"n_heads", a.n_heads}, {"n_kv_heads", a.n_kv_heads}, {"head_dim", a.head_dim}, {"rotary_half", a.rotary_half}});
  }
  for (const DType dtype : n.kv_dtypes) kv.push_back(dtype_json(dtype));
  for (const StepShape& s : c.graphs) {
    graphs.push_back({{"n_rows", s.n_rows},
                      {"tokens_per_row", s.tokens_per_row},
                      {"logits_per_row", s.logits_per_row},
                      {"kv_dtype", dtype_json(s.kv_dtype)}});
  }
  const json out = {
      {"format", k_format},
      {"platform",
       {{"compute_major", p.compute_major},
        {"compute_minor", p.compute_minor},
        {"max_shared_bytes_per_block", p.max_shared_bytes_per_block},
        {"cublaslt", p.cublaslt},
        {"stream_gemm", p.stream_gemm},
        {"sampler_one_cta", p.sampler_one_cta}}},
      {"needs",
       {{"attention", attention},
        {"fp8_linears", n.fp8_linears},
        {"mixture_of_experts", n.mixture_of_experts},
        {"vocab_size", n.vocab_size},
        {"kv_dtypes", kv},
        {"page_size_tokens", n.page_size_tokens},
        {"decode_buckets", n.decode_buckets},
        {"prefill_chunk_tokens", n.prefill_chunk_tokens},
        {"max_verify_tokens", n.max_verify_tokens},
        {"verify_token_capacity", n.verify_token_capacity},
        {"verify_graph_budget", n.verify_graph_budget}}},
      {"modules", c.modules},
      {"graphs", graphs}};
  return out.dump();
}

ServingCatalog serving_catalog_parse(std::string_view text, std::string_view origin_view) {
  const std::string origin(origin_view);
  json doc;
  try {
    doc = json::parse(text);
  } catch (const json::exception& e) {
    fail_input("{}: not JSON ({})", origin, e.what());
  }
  const Reader r(doc, origin, "");
  if (const json& format = r.at("format"); !format.is_number_integer() || format.get<std::int64_t>() != k_format) {
    fail_input("{}: format {} is not {} (export the model again with this build)", origin, format.dump(), k_format);
  }
  ServingCatalog c;
  c.platform = platform_parse(Reader(r.at("platform"), origin, "platform"));
  c.needs = needs_parse(Reader(r.at("needs"), origin, "needs"));
  const json& modules = r.array("modules");
  for (std::size_t i = 0; i < modules.size(); ++i) {
    if (!modules[i].is_string() || modules[i].get<std::string>().empty()) {
      fail_input("{}: modules[{}] must be a module key, not {}", origin, i, modules[i].dump());
    }
    c.modules.push_back(modules[i].get<std::string>());
  }
  if (!std::ranges::is_sorted(c.modules) || std::ranges::adjacent_find(c.modules) != c.modules.end()) {
    fail_input("{}: modules must be distinct and ascending", origin);
  }
  const json& graphs = r.array("graphs");
  for (std::size_t i = 0; i < graphs.size(); ++i) c.graphs.push_back(shape_parse(Reader(graphs[i], origin, fmt::format("graphs[{}]", i))));
  return c;
}

std::vector<std::string> serving_catalog_missing(const ServingCatalog& catalog,
                                                 const std::map<std::string, std::string>& images) {
  std::vector<std::string> missing;
  for (const std::string& key : catalog.modules) {
    if (!images.contains(key)) missing.push_back(key);
  }
  return missing;
}

std::vector<std::string> serving_catalog_differences(const ServingCatalog& recorded, const ServingCatalog& run) {
  std::vector<std::string> out;
  const auto differ = [&](bool differs, std::string what, const std::string& then, const std::string& now) {
    if (differs) out.push_back(fmt::format("{} {}, here {}", what, then, now));
  };
  const KernelPlatform &a = recorded.platform, &b = run.platform;
  differ(a.arch() != b.arch(), "architecture", a.arch(), b.arch());
  differ(a.max_shared_bytes_per_block != b.max_shared_bytes_per_block, "shared memory per CTA",
         fmt::format("{} bytes", a.max_shared_bytes_per_block), fmt::format("{} bytes", b.max_shared_bytes_per_block));
  differ(a.cublaslt != b.cublaslt, "cuBLASLt", yes_no(a.cublaslt), yes_no(b.cublaslt));
  differ(a.stream_gemm != b.stream_gemm, "stream GEMM", yes_no(a.stream_gemm), yes_no(b.stream_gemm));
  differ(a.sampler_one_cta != b.sampler_one_cta, "one-CTA sampler", yes_no(a.sampler_one_cta), yes_no(b.sampler_one_cta));
  const KernelNeeds &x = recorded.needs, &y = run.needs;
  differ(x.attention != y.attention, "attention", list_text(x.attention, attention_text),
         list_text(y.attention, attention_text));
  differ(x.fp8_linears != y.fp8_linears, "FP8 projections", yes_no(x.fp8_linears), yes_no(y.fp8_linears));
  differ(x.mixture_of_experts != y.mixture_of_experts, "mixture of experts", yes_no(x.mixture_of_experts),
         yes_no(y.mixture_of_experts));
  differ(x.vocab_size != y.vocab_size, "vocabulary", std::to_string(x.vocab_size), std::to_string(y.vocab_size));
  const auto dtype_text = [](DType d) { return std::string(dtype_name(d)); };
  differ(x.kv_dtypes != y.kv_dtypes, "KV dtypes", list_text(x.kv_dtypes, dtype_text), list_text(y.kv_dtypes, dtype_text));
  differ(x.page_size_tokens != y.page_size_tokens, "KV page size", fmt::format("{} tokens", x.page_size_tokens),
         fmt::format("{} tokens", y.page_size_tokens));
  const auto int_text = [](std::int32_t v) { return std::to_string(v); };
  differ(x.decode_buckets != y.decode_buckets, "decode buckets", list_text(x.decode_buckets, int_text),
         list_text(y.decode_buckets, int_text));
  differ(x.prefill_chunk_tokens != y.prefill_chunk_tokens, "prefill chunk", fmt::format("{} tokens", x.prefill_chunk_tokens),
         fmt::format("{} tokens", y.prefill_chunk_tokens));
  differ(x.max_verify_tokens != y.max_verify_tokens, "verify rows of up to",
         fmt::format("{} tokens", x.max_verify_tokens), fmt::format("{} tokens", y.max_verify_tokens));
  return out;
}

void serving_catalog_require(const ServingCatalog& run, const std::map<std::string, std::string>& images,
                             std::string_view origin, const ServingCatalog* recorded) {
  const std::vector<std::string> missing = serving_catalog_missing(run, images);
  if (missing.empty()) return;
  std::string listed;
  for (std::size_t i = 0; i < std::min(missing.size(), k_max_listed_missing); ++i) listed += "\n  " + missing[i];
  if (missing.size() > k_max_listed_missing) listed += fmt::format("\n  and {} more", missing.size() - k_max_listed_missing);
  std::string cause = "It was exported before packages recorded their kernel catalog";
  if (recorded) {
    const std::vector<std::string> differences = serving_catalog_differences(*recorded, run);
    cause = differences.empty() ? "Its kernels do not match the catalog it records"
                                : fmt::format("It was exported for other settings: {}", fmt::join(differences, "; "));
  }
  fail_usage("{} lacks {} of the {} kernel modules this run needs on this {} GPU:{}\n{}. Export the model again on "
             "this GPU (ignition export) with the settings it runs with; flare run compiles nothing.",
             origin, missing.size(), run.modules.size(), run.platform.arch(), listed, cause);
}

}  // namespace flare::helios
