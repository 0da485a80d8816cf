// The on-disk kernel cache (see kernel_cache.h). Entry file: "FLKC" magic, 32-byte SHA-256 of the
// payload, then the payload.
#include "helios/kernel_cache.h"

#include <fcntl.h>
#include <unistd.h>

#include <openssl/evp.h>

#include <array>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <random>

#include "common/atomic_file.h"
#include "common/error.h"

namespace flare::helios {
namespace {

constexpr std::string_view k_magic = "FLKC";
constexpr std::size_t k_digest_bytes = 32;

class Sha256 {
 public:
  Sha256() : ctx_(EVP_MD_CTX_new()) {
    if (!ctx_ || EVP_DigestInit_ex(ctx_, EVP_sha256(), nullptr) != 1) fail(ExitCode::failure, "SHA-256 unavailable");
  }
  ~Sha256() { EVP_MD_CTX_free(ctx_); }
  Sha256(const Sha256&) = delete;
  Sha256& operator=(const Sha256&) = delete;
  void update(std::string_view bytes) { EVP_DigestUpdate(ctx_, bytes.data(), bytes.size()); }
  void update_field(std::string_view bytes) {  // length-prefixed, so field boundaries are unambiguous
    const std::uint64_t n = bytes.size();
    update(std::string_view(reinterpret_cast<const char*>(&n), sizeof n));
    update(bytes);
  }
  std::array<unsigned char, k_digest_bytes> finish() {
    std::array<unsigned char, k_digest_bytes> digest{};
    unsigned int n = 0;
    EVP_DigestFinal_ex(ctx_, digest.data(), &n);
    return digest;
  }

 private:
  EVP_MD_CTX* ctx_;
};

std::string hex(std::span<const unsigned char> bytes) {
  static constexpr char digits[] = "0123456789abcdef";
  std::string out;
  for (const unsigned char b : bytes) {
    out.push_back(digits[b >> 4]);
    out.push_back(digits[b & 15]);
  }
  return out;
}

bool valid_key(const std::string& key) {
  if (key.size() != 2 * k_digest_bytes) return false;
  for (const char c : key) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

}  // namespace

KernelCache::KernelCache(std::filesystem::path dir) : dir_(std::move(dir)) {}

std::string KernelCache::key(std::string_view source, std::string_view arch, std::span<const std::string> options,
                             std::string_view compiler_version) {
  Sha256 h;
  h.update_field("flare kernel cache v1");
  h.update_field(source);
  h.update_field(arch);
  h.update_field(std::to_string(options.size()));
  for (const std::string& o : options) h.update_field(o);
  h.update_field(compiler_version);
  return hex(h.finish());
}

std::filesystem::path KernelCache::entry_path(const std::string& key) const {
  if (!valid_key(key)) fail(ExitCode::failure, "internal: malformed kernel cache key '{}'", key);
  return dir_ / key.substr(0, 2) / (key + ".cubin");
}

std::optional<std::string> KernelCache::load(const std::string& key) {
  const std::filesystem::path path = entry_path(key);
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    ++n_misses_;
    return std::nullopt;
  }
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::size_t header = k_magic.size() + k_digest_bytes;
  bool ok = !in.bad() && bytes.size() > header && std::string_view(bytes).substr(0, k_magic.size()) == k_magic;
  if (ok) {
    Sha256 h;
    h.update(std::string_view(bytes).substr(header));
    const auto digest = h.finish();
    ok = std::memcmp(digest.data(), bytes.data() + k_magic.size(), k_digest_bytes) == 0;
  }
  if (!ok) {
    ++n_damaged_;
    ++n_misses_;
    return std::nullopt;
  }
  ++n_hits_;
  return bytes.substr(header);
}

void KernelCache::store(const std::string& key, std::string_view binary) {
  const std::filesystem::path path = entry_path(key);
  std::error_code ec;
  std::filesystem::create_directories(path.parent_path(), ec);
  if (ec) fail(ExitCode::failure, "cannot create kernel cache folder {}: {}", path.parent_path().string(), ec.message());
  Sha256 h;
  h.update(binary);
  const auto digest = h.finish();
  std::string entry(k_magic);
  entry.append(reinterpret_cast<const char*>(digest.data()), digest.size());
  entry.append(binary);
  write_file_atomic(path, entry);
}

std::string KernelCache::get_or_build(const std::string& key, const std::function<std::string()>& build) {
  if (std::optional<std::string> hit = load(key)) return std::move(*hit);
  std::string binary = build();
  ++n_builds_;
  store(key, binary);
  return binary;
}

}  // namespace flare::helios
