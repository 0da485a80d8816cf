// OpenSSL 3 implementation of package hashing and Ed25519 keys (see crypto.h).
#include "package/crypto.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/err.h>

#include <cerrno>
#include <cstring>
#include <fstream>

#include <nlohmann/json.hpp>

#include "common/error.h"

namespace flare::package {
namespace {

std::string openssl_error() {
  unsigned long code = ERR_get_error();
  if (code == 0) return "unknown OpenSSL error";
  char buffer[256];
  ERR_error_string_n(code, buffer, sizeof(buffer));
  ERR_clear_error();
  return buffer;
}

struct BioCloser {
  void operator()(BIO* bio) const { BIO_free(bio); }
};

}  // namespace

Sha256::Sha256() : context_(EVP_MD_CTX_new()) {
  if (context_ == nullptr || EVP_DigestInit_ex(static_cast<EVP_MD_CTX*>(context_), EVP_sha256(), nullptr) != 1) {
    throw Error(ExitCode::failure, "SHA-256 unavailable: " + openssl_error());
  }
}
Sha256::~Sha256() { EVP_MD_CTX_free(static_cast<EVP_MD_CTX*>(context_)); }
void Sha256::update(std::span<const std::byte> bytes) {
  EVP_DigestUpdate(static_cast<EVP_MD_CTX*>(context_), bytes.data(), bytes.size());
}
Sha256Digest Sha256::finish() {
  Sha256Digest digest{};
  unsigned int n = 0;
  EVP_DigestFinal_ex(static_cast<EVP_MD_CTX*>(context_), digest.data(), &n);
  return digest;
}

Sha256Digest sha256(std::span<const std::byte> bytes) {
  Sha256 hasher;
  hasher.update(bytes);
  return hasher.finish();
}

std::string to_hex(std::span<const std::uint8_t> bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  out.reserve(bytes.size() * 2);
  for (auto b : bytes) {
    out.push_back(kDigits[b >> 4]);
    out.push_back(kDigits[b & 15]);
  }
  return out;
}

std::string sha256_hex(std::span<const std::byte> bytes) { return to_hex(sha256(bytes)); }

std::string base64_encode(std::span<const std::byte> bytes) {
  std::string out(4 * ((bytes.size() + 2) / 3), '\0');
  int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                          reinterpret_cast<const unsigned char*>(bytes.data()), static_cast<int>(bytes.size()));
  out.resize(static_cast<std::size_t>(n));
  return out;
}

std::optional<std::vector<std::byte>> base64_decode(std::string_view text) {
  auto value = [](char c) -> int {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+') return 62;
    if (c == '/') return 63;
    return -1;
  };
  if (text.size() % 4 != 0) return std::nullopt;
  std::vector<std::byte> out;
  out.reserve(text.size() / 4 * 3);
  for (std::size_t i = 0; i < text.size(); i += 4) {
    bool last = i + 4 == text.size();
    int v[4];
    int n_pad = 0;
    for (int j = 0; j < 4; ++j) {
      char c = text[i + j];
      if (c == '=' && last && j >= 2) {
        v[j] = 0;
        ++n_pad;
        continue;
      }
      if (n_pad > 0) return std::nullopt;  // data after padding
      v[j] = value(c);
      if (v[j] < 0) return std::nullopt;
    }
    std::uint32_t triple = (v[0] << 18) | (v[1] << 12) | (v[2] << 6) | v[3];
    out.push_back(static_cast<std::byte>(triple >> 16));
    if (n_pad < 2) out.push_back(static_cast<std::byte>((triple >> 8) & 0xff));
    if (n_pad < 1) out.push_back(static_cast<std::byte>(triple & 0xff));
    if ((n_pad == 1 && (v[2] & 3) != 0) || (n_pad == 2 && (v[1] & 15) != 0)) return std::nullopt;
  }
  return out;
}

std::string key_fingerprint(const PublicKey& key) { return to_hex(sha256(std::as_bytes(std::span(key)))); }

bool ed25519_verify(const PublicKey& key, std::span<const std::byte> message, const Signature& signature) {
  EVP_PKEY* pkey = EVP_PKEY_new_raw_public_key(EVP_PKEY_ED25519, nullptr, key.data(), key.size());
  if (pkey == nullptr) return false;
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  bool ok = ctx != nullptr && EVP_DigestVerifyInit(ctx, nullptr, nullptr, nullptr, pkey) == 1 &&
            EVP_DigestVerify(ctx, signature.data(), signature.size(),
                             reinterpret_cast<const unsigned char*>(message.data()), message.size()) == 1;
  EVP_MD_CTX_free(ctx);
  EVP_PKEY_free(pkey);
  ERR_clear_error();
  return ok;
}

SigningKey::SigningKey(SigningKey&& other) noexcept : pkey_(other.pkey_), public_key_(other.public_key_) {
  other.pkey_ = nullptr;
}
SigningKey& SigningKey::operator=(SigningKey&& other) noexcept {
  std::swap(pkey_, other.pkey_);
  std::swap(public_key_, other.public_key_);
  return *this;
}
SigningKey::~SigningKey() { EVP_PKEY_free(static_cast<EVP_PKEY*>(pkey_)); }

SigningKey SigningKey::generate() {
  SigningKey key;
  EVP_PKEY_CTX* ctx = EVP_PKEY_CTX_new_id(EVP_PKEY_ED25519, nullptr);
  EVP_PKEY* pkey = nullptr;
  if (ctx == nullptr || EVP_PKEY_keygen_init(ctx) != 1 || EVP_PKEY_keygen(ctx, &pkey) != 1) {
    EVP_PKEY_CTX_free(ctx);
    throw Error(ExitCode::failure, "cannot generate an Ed25519 key: " + openssl_error());
  }
  EVP_PKEY_CTX_free(ctx);
  key.pkey_ = pkey;
  std::size_t n = key.public_key_.size();
  EVP_PKEY_get_raw_public_key(pkey, key.public_key_.data(), &n);
  return key;
}

bool key_file_is_encrypted(const std::filesystem::path& path) {
  std::string text = read_small_file(path, 1 << 20);
  return text.find("-----BEGIN ENCRYPTED PRIVATE KEY-----") != std::string::npos;
}

SigningKey SigningKey::load(const std::filesystem::path& path, const PassphraseSource& passphrase) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    fail_usage("signing key {}: {}", path.string(), std::strerror(errno));
  }
  if ((st.st_mode & 077) != 0) {
    fail_usage("signing key {} is readable by other users (mode {:o}); run: chmod 600 {}", path.string(),
               st.st_mode & 0777, path.string());
  }
  std::string text = read_small_file(path, 1 << 20);
  std::string secret;
  if (text.find("ENCRYPTED PRIVATE KEY") != std::string::npos) {
    if (!passphrase) fail_usage("signing key {} is encrypted and no passphrase can be asked", path.string());
    secret = passphrase(path);
  }
  std::unique_ptr<BIO, BioCloser> bio(BIO_new_mem_buf(text.data(), static_cast<int>(text.size())));
  EVP_PKEY* pkey = PEM_read_bio_PrivateKey(bio.get(), nullptr, nullptr,
                                           secret.empty() ? nullptr : secret.data());
  OPENSSL_cleanse(secret.data(), secret.size());
  if (pkey == nullptr) {
    fail_usage("signing key {} cannot be read (wrong passphrase or not a PKCS#8 PEM key): {}",
               path.string(), openssl_error());
  }
  if (EVP_PKEY_get_id(pkey) != EVP_PKEY_ED25519) {
    EVP_PKEY_free(pkey);
    fail_usage("signing key {} is not an Ed25519 key", path.string());
  }
  SigningKey key;
  key.pkey_ = pkey;
  std::size_t n = key.public_key_.size();
  EVP_PKEY_get_raw_public_key(pkey, key.public_key_.data(), &n);
  return key;
}

void SigningKey::save(const std::filesystem::path& path, const std::string& passphrase) const {
  std::unique_ptr<BIO, BioCloser> bio(BIO_new(BIO_s_mem()));
  const EVP_CIPHER* cipher = passphrase.empty() ? nullptr : EVP_aes_256_cbc();
  int ok = PEM_write_bio_PKCS8PrivateKey(
      bio.get(), static_cast<EVP_PKEY*>(pkey_), cipher,
      passphrase.empty() ? nullptr : const_cast<char*>(passphrase.data()),
      static_cast<int>(passphrase.size()), nullptr, nullptr);
  if (ok != 1) fail_input("cannot encode the signing key: {}", openssl_error());
  char* data = nullptr;
  long n = BIO_get_mem_data(bio.get(), &data);
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) fail_usage("cannot create signing key {}: {}", path.string(), std::strerror(errno));
  bool written = ::write(fd, data, static_cast<std::size_t>(n)) == n && ::fsync(fd) == 0;
  ::close(fd);
  if (!written) fail_input("cannot write signing key {}", path.string());
}

Signature SigningKey::sign(std::span<const std::byte> message) const {
  Signature signature{};
  std::size_t n = signature.size();
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  bool ok = ctx != nullptr &&
            EVP_DigestSignInit(ctx, nullptr, nullptr, nullptr, static_cast<EVP_PKEY*>(pkey_)) == 1 &&
            EVP_DigestSign(ctx, signature.data(), &n, reinterpret_cast<const unsigned char*>(message.data()),
                           message.size()) == 1;
  EVP_MD_CTX_free(ctx);
  if (!ok) throw Error(ExitCode::failure, "Ed25519 signing failed: " + openssl_error());
  return signature;
}

const PublicKey* PublisherProfile::find(std::string_view fingerprint) const {
  for (const auto& key : keys) {
    if (key_fingerprint(key) == fingerprint) return &key;
  }
  return nullptr;
}

PublisherProfile parse_publisher_profile(std::string_view json_text, const std::string& source_name) {
  PublisherProfile profile;
  try {
    auto json = nlohmann::json::parse(json_text);
    profile.namespace_name = json.at("namespace").get<std::string>();
    profile.official_source = json.value("official_source", std::string());
    for (const auto& entry : json.at("keys")) {
      if (entry.value("algorithm", std::string("ed25519")) != "ed25519") {
        fail_input("publisher profile {}: unsupported key algorithm", source_name);
      }
      auto raw = base64_decode(entry.at("public_key").get<std::string>());
      if (!raw || raw->size() != 32) fail_input("publisher profile {}: malformed public key", source_name);
      PublicKey key{};
      std::memcpy(key.data(), raw->data(), 32);
      if (entry.contains("fingerprint") && entry["fingerprint"].get<std::string>() != key_fingerprint(key)) {
        fail_input("publisher profile {}: fingerprint does not match its public key", source_name);
      }
      profile.keys.push_back(key);
    }
  } catch (const nlohmann::json::exception& e) {
    fail_input("publisher profile {} is invalid: {}", source_name, e.what());
  }
  if (profile.namespace_name.empty()) fail_input("publisher profile {} has no namespace", source_name);
  return profile;
}

PublisherProfile load_publisher_profile(const std::filesystem::path& path) {
  return parse_publisher_profile(read_small_file(path, 1 << 20), path.string());
}

std::string render_publisher_profile(const PublisherProfile& profile) {
  nlohmann::json keys = nlohmann::json::array();
  for (const auto& key : profile.keys) {
    keys.push_back({{"algorithm", "ed25519"},
                    {"public_key", base64_encode(std::as_bytes(std::span(key)))},
                    {"fingerprint", key_fingerprint(key)}});
  }
  nlohmann::json json = {{"format", 1},
                         {"namespace", profile.namespace_name},
                         {"official_source", profile.official_source},
                         {"keys", keys}};
  return json.dump(2) + "\n";
}

std::string read_small_file(const std::filesystem::path& path, std::uint64_t max_bytes) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail_input("cannot read {}: {}", path.string(), std::strerror(errno));
  std::string text;
  char buffer[65536];
  while (in.read(buffer, sizeof(buffer)) || in.gcount() > 0) {
    text.append(buffer, static_cast<std::size_t>(in.gcount()));
    if (text.size() > max_bytes) fail_input("{} is larger than {} bytes", path.string(), max_bytes);
  }
  return text;
}

}  // namespace flare::package
