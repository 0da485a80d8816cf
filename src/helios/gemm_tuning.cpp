// The GEMM tuning table (see gemm_tuning.h): bucketing, the byte format and its file.
#include "helios/gemm_tuning.h"

#include <fcntl.h>
#include <unistd.h>

#include <openssl/evp.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <random>

#include "common/atomic_file.h"
#include "common/error.h"

namespace flare::helios {
namespace {

constexpr std::string_view k_magic = "FLGT";
// 2: each entry says its kind; 3: and its weight dtype; 4: and whether it feeds a norm
constexpr std::uint32_t k_format_version = 5;
constexpr std::uint32_t k_oldest_format_version = 4;  // the same bytes, without the swiglu fusion
constexpr std::size_t k_digest_bytes = 32;
constexpr std::size_t k_max_arch_bytes = 16;
constexpr std::int64_t k_max_dim = std::int64_t(1) << 31;  // cuBLASLt dimensions are int32-sized
// The smallest entry: arch "sm_NN" (5) + length byte + the fixed fields.
constexpr std::size_t k_fixed_entry_bytes = 1 + 8 + 8 + 8 + 8 + 1 + 1 + 1 + 1 + 1 + 1 + 64 + 4 + 2;

std::array<unsigned char, k_digest_bytes> sha256(std::string_view bytes) {
  std::array<unsigned char, k_digest_bytes> digest{};
  unsigned int n = 0;
  if (EVP_Digest(bytes.data(), bytes.size(), digest.data(), &n, EVP_sha256(), nullptr) != 1 || n != k_digest_bytes) {
    fail(ExitCode::failure, "SHA-256 unavailable");
  }
  return digest;
}

template <typename T>
void put(std::string& out, T value) {  // little-endian, fixed width
  static_assert(std::is_integral_v<T>);
  using U = std::make_unsigned_t<T>;
  const U u = U(value);
  for (std::size_t i = 0; i < sizeof(T); ++i) out.push_back(char((u >> (8 * i)) & 0xff));
}

// Reads fixed-width little-endian fields, failing with one message when the bytes run out.
class Reader {
 public:
  explicit Reader(std::string_view bytes) : bytes_(bytes) {}
  template <typename T>
  T get(const char* what) {
    using U = std::make_unsigned_t<T>;
    need(sizeof(T), what);
    U u = 0;
    for (std::size_t i = 0; i < sizeof(T); ++i) u |= U(U(static_cast<unsigned char>(bytes_[pos_ + i])) << (8 * i));
    pos_ += sizeof(T);
    return T(u);
  }
  std::string_view take(std::size_t n, const char* what) {
    need(n, what);
    const std::string_view s = bytes_.substr(pos_, n);
    pos_ += n;
    return s;
  }
  std::size_t remaining() const { return bytes_.size() - pos_; }

 private:
  void need(std::size_t n, const char* what) const {
    if (bytes_.size() - pos_ < n) fail_input("GEMM tuning table is truncated (reading {})", what);
  }
  std::string_view bytes_;
  std::size_t pos_ = 0;
};

bool valid_arch(std::string_view arch) {
  if (arch.size() < 5 || arch.size() > k_max_arch_bytes || arch.substr(0, 3) != "sm_") return false;
  for (std::size_t i = 3; i < arch.size(); ++i) {
    const char c = arch[i];
    const bool last_suffix = i + 1 == arch.size() && i > 3 && (c == 'a' || c == 'f');
    if (!(c >= '0' && c <= '9') && !last_suffix) return false;
  }
  return true;
}

std::uint8_t dtype_code(DType d) { return std::uint8_t(d); }

// Sets choice.kind from its code, rejecting a kind this build does not know and a choice the kind
// cannot replay: cuBLASLt has no variants; Flare's kernels have their variants, no algorithm bytes,
// and the m, k and weights they run (gemm_tuning.h).
void check_kind(std::uint32_t i, const GemmShapeKey& key, std::uint8_t kind, GemmChoice& choice) {
  if (kind == std::uint8_t(GemmKind::cublaslt)) {
    if (choice.variant != 0) fail_input("GEMM tuning entry {} is a cuBLASLt choice with variant {}", i, choice.variant);
    choice.kind = GemmKind::cublaslt;
    return;
  }
  if (kind == std::uint8_t(GemmKind::split_partials)) {
    if (key.fusion != GemmFusion::residual_norm || key.weights != DType::bf16 || key.out != DType::bf16 || key.bias ||
        key.m_bucket > k_split_partials_max_m || !split_partials_divides(key.k, choice.variant)) {
      fail_input("GEMM tuning entry {} splits k {} {} ways where that cannot run", i, key.k, choice.variant);
    }
    choice.kind = GemmKind::split_partials;
    return;
  }
  if (kind != std::uint8_t(GemmKind::skinny) && kind != std::uint8_t(GemmKind::skinny_fp8) &&
      kind != std::uint8_t(GemmKind::stream) && kind != std::uint8_t(GemmKind::stream_swiglu)) {
    fail_input("GEMM tuning entry {} has an unknown kind {}", i, kind);
  }
  const bool fp8 = kind == std::uint8_t(GemmKind::skinny_fp8);
  if (fp8 != (key.weights == DType::f8_e4m3)) {
    fail_input("GEMM tuning entry {} names a kernel for other weights than its {}", i, dtype_name(key.weights));
  }
  const bool swiglu = kind == std::uint8_t(GemmKind::stream_swiglu);
  if (swiglu && (key.fusion != GemmFusion::swiglu || key.out != DType::bf16 || key.bias ||
                 key.n % 2 != 0)) {
    fail_input("GEMM tuning entry {} fuses SwiGLU into a GEMM of n {} where that cannot run", i, key.n);
  }
  const bool stream = swiglu || kind == std::uint8_t(GemmKind::stream);
  const std::uint8_t n_variants = stream ? k_stream_gemm_n_variants
                                  : fp8  ? k_fp8_skinny_n_variants
                                         : k_skinny_gemm_n_variants;
  if (choice.variant >= n_variants) {
    fail_input("GEMM tuning entry {} names kernel variant {} of {}", i, choice.variant, n_variants);
  }
  for (const std::uint64_t word : choice.algo) {
    if (word != 0) fail_input("GEMM tuning entry {} is a Flare kernel choice with algorithm bytes", i);
  }
  const bool mma = fp8 && choice.variant >= k_fp8_mma_first_variant;
  const std::int64_t min_m = stream ? k_stream_gemm_min_m : 1;
  const std::int64_t max_m = stream ? k_stream_gemm_max_m
                             : mma  ? k_fp8_mma_max_m
                             : fp8  ? k_fp8_skinny_max_m
                                    : k_skinny_gemm_max_m;
  const std::int64_t k_multiple = stream ? k_stream_gemm_k_multiple
                                  : mma  ? k_fp8_mma_k_multiple
                                  : fp8  ? k_fp8_skinny_k_multiple
                                         : k_skinny_gemm_k_multiple;
  if (key.m_bucket < min_m || key.m_bucket > max_m || key.k % k_multiple != 0 || (fp8 && key.out != DType::bf16)) {
    fail_input("GEMM tuning entry {} is a Flare kernel choice for m {} k {}, which it cannot run", i, key.m_bucket,
               key.k);
  }
  choice.kind = GemmKind(kind);
}

}  // namespace

TuneEffort parse_tune_effort(std::string_view text) {
  if (text == "off") return TuneEffort::off;
  if (text == "default") return TuneEffort::normal;
  if (text == "audit") return TuneEffort::audit;
  fail_usage("autotune effort must be off, default or audit, not '{}'", text);
}

bool split_partials_divides(std::int64_t k, std::int64_t parts) {
  if (std::find(k_split_partials_parts.begin(), k_split_partials_parts.end(), parts) == k_split_partials_parts.end()) {
    return false;
  }
  return k % (parts * k_split_partials_k_multiple) == 0;
}

std::size_t race_weight_copies(std::uint64_t weight_bytes, std::uint64_t l2_bytes) {
  constexpr std::size_t k_max_copies = 64;
  if (l2_bytes == 0 || weight_bytes == 0 || weight_bytes >= 2 * l2_bytes) return 0;
  return std::size_t(std::min<std::uint64_t>(k_max_copies, 3 * l2_bytes / weight_bytes + 1));
}

std::string_view tune_effort_name(TuneEffort effort) {
  switch (effort) {
    case TuneEffort::off: return "off";
    case TuneEffort::normal: return "default";
    case TuneEffort::audit: return "audit";
  }
  return "?";
}

std::int64_t GemmTuning::bucket_m(std::int64_t m) {
  if (m < 1) fail(ExitCode::failure, "internal: GEMM bucket for m = {}", m);
  if (m <= 64) return std::int64_t(std::bit_ceil(std::uint64_t(m)));
  return (m + 63) / 64 * 64;
}

const GemmChoice* GemmTuning::find(const GemmShapeKey& key) const {
  const auto it = entries_.find(key);
  return it == entries_.end() ? nullptr : &it->second;
}

std::size_t GemmTuning::n_fused() const {
  return std::size_t(std::count_if(entries_.begin(), entries_.end(),
                                   [](const auto& entry) { return entry.first.fusion != GemmFusion::none; }));
}

void GemmTuning::insert(const GemmShapeKey& key, const GemmChoice& choice) { entries_[key] = choice; }

std::string GemmTuning::serialize() const {
  std::string out(k_magic);
  put(out, k_format_version);
  put(out, std::uint32_t(entries_.size()));
  for (const auto& [key, choice] : entries_) {
    if (!valid_arch(key.arch)) fail(ExitCode::failure, "internal: GEMM tuning entry for architecture '{}'", key.arch);
    put(out, std::uint8_t(key.arch.size()));
    out += key.arch;
    put(out, key.library_version);
    put(out, key.m_bucket);
    put(out, key.n);
    put(out, key.k);
    put(out, dtype_code(key.out));
    put(out, dtype_code(key.weights));
    put(out, std::uint8_t(key.bias ? 1 : 0));
    put(out, std::uint8_t(key.fusion));
    put(out, std::uint8_t(choice.kind));
    put(out, choice.variant);
    for (const std::uint64_t word : choice.algo) put(out, word);
    put(out, std::bit_cast<std::uint32_t>(choice.time_us));
    put(out, choice.n_candidates);
  }
  const auto digest = sha256(out);
  out.append(reinterpret_cast<const char*>(digest.data()), digest.size());
  return out;
}

GemmTuning GemmTuning::parse(std::string_view bytes) {
  if (bytes.size() < k_magic.size() + 8 + k_digest_bytes || bytes.substr(0, k_magic.size()) != k_magic) {
    fail_input("not a GEMM tuning table (bad magic or too short: {} bytes)", bytes.size());
  }
  const std::string_view body = bytes.substr(0, bytes.size() - k_digest_bytes);
  const auto digest = sha256(body);
  if (std::memcmp(digest.data(), bytes.data() + body.size(), k_digest_bytes) != 0) {
    fail_input("GEMM tuning table is damaged (checksum mismatch)");
  }
  Reader r(body.substr(k_magic.size()));
  const auto version = r.get<std::uint32_t>("format version");
  if (version < k_oldest_format_version || version > k_format_version) {
    fail_input("GEMM tuning table has format version {}, expected {} to {}", version, k_oldest_format_version,
               k_format_version);
  }
  const auto n_entries = r.get<std::uint32_t>("entry count");
  if (n_entries > r.remaining() / k_fixed_entry_bytes) {
    fail_input("GEMM tuning table claims {} entries in {} bytes", n_entries, r.remaining());
  }
  GemmTuning t;
  for (std::uint32_t i = 0; i < n_entries; ++i) {
    GemmShapeKey key;
    GemmChoice choice;
    const auto arch_size = r.get<std::uint8_t>("architecture length");
    key.arch = std::string(r.take(arch_size, "architecture"));
    if (!valid_arch(key.arch)) fail_input("GEMM tuning entry {} has an invalid architecture", i);
    key.library_version = r.get<std::uint64_t>("library version");
    key.m_bucket = r.get<std::int64_t>("m");
    key.n = r.get<std::int64_t>("n");
    key.k = r.get<std::int64_t>("k");
    const auto out = r.get<std::uint8_t>("output dtype");
    const auto weights = r.get<std::uint8_t>("weight dtype");
    const auto bias = r.get<std::uint8_t>("bias");
    const auto fusion = r.get<std::uint8_t>("fusion");
    const auto kind = r.get<std::uint8_t>("kind");
    choice.variant = r.get<std::uint8_t>("variant");
    for (std::uint64_t& word : choice.algo) word = r.get<std::uint64_t>("algorithm");
    choice.time_us = std::bit_cast<float>(r.get<std::uint32_t>("time"));
    choice.n_candidates = r.get<std::uint16_t>("candidate count");
    if (key.m_bucket < 1 || key.m_bucket >= k_max_dim || bucket_m(key.m_bucket) != key.m_bucket || key.n < 1 ||
        key.n >= k_max_dim || key.k < 1 || key.k >= k_max_dim) {
      fail_input("GEMM tuning entry {} has an invalid shape m {} n {} k {}", i, key.m_bucket, key.n, key.k);
    }
    if (out != dtype_code(DType::bf16) && out != dtype_code(DType::f32)) {
      fail_input("GEMM tuning entry {} has an invalid output dtype code {}", i, out);
    }
    key.out = DType(out);
    if (weights != dtype_code(DType::bf16) && weights != dtype_code(DType::f8_e4m3)) {
      fail_input("GEMM tuning entry {} has an invalid weight dtype code {}", i, weights);
    }
    key.weights = DType(weights);
    if (bias > 1) fail_input("GEMM tuning entry {} has an invalid bias flag {}", i, bias);
    key.bias = bias == 1;
    const std::uint8_t last_fusion = std::uint8_t(version == 4 ? GemmFusion::residual_norm : GemmFusion::swiglu);
    if (fusion > last_fusion) fail_input("GEMM tuning entry {} has an invalid fusion {}", i, fusion);
    key.fusion = GemmFusion(fusion);
    check_kind(i, key, kind, choice);
    if (!std::isfinite(choice.time_us) || choice.time_us < 0.0f) fail_input("GEMM tuning entry {} has an invalid time", i);
    if (t.entries_.contains(key)) fail_input("GEMM tuning entry {} repeats a shape", i);
    t.entries_.emplace(std::move(key), choice);
  }
  if (r.remaining() != 0) fail_input("GEMM tuning table has {} trailing bytes", r.remaining());
  return t;
}

void GemmTuning::attach_file(std::filesystem::path path) {
  file_ = std::move(path);
  refresh();
}

bool GemmTuning::refresh() {
  if (file_.empty()) return false;
  bool added = false;
  const GemmTuning saved = load_file(file_);
  for (const auto& [key, choice] : saved.entries()) added = entries_.emplace(key, choice).second || added;
  return added;
}

void GemmTuning::record(const GemmShapeKey& key, const GemmChoice& choice) {
  insert(key, choice);
  if (file_.empty() || frozen_) return;
  refresh();  // keep what other writers saved since our last look
  save_file(file_);
}

std::filesystem::path GemmTuning::file_in(const std::filesystem::path& kernel_cache_dir, std::string_view arch,
                                          std::uint64_t library_version, TuneEffort effort) {
  if (!valid_arch(arch)) fail(ExitCode::failure, "internal: GEMM tuning file for architecture '{}'", arch);
  return kernel_cache_dir / "gemm" /
         fmt::format("{}-cublaslt-{}-{}.tuning", arch, library_version, tune_effort_name(effort));
}

GemmTuning GemmTuning::load_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return {};
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) return {};
  try {
    return parse(bytes);
  } catch (const Error&) {  // a damaged cache file is a miss; the next save rewrites it
    return {};
  }
}

void GemmTuning::save_file(const std::filesystem::path& path) const {
  std::error_code ec;
  std::filesystem::create_directories(path.parent_path(), ec);
  if (ec) fail(ExitCode::failure, "cannot create GEMM tuning folder {}: {}", path.parent_path().string(), ec.message());
  write_file_atomic(path, serialize());
}

}  // namespace flare::helios
