// Hashing and signing for packages: SHA-256 (payload ids, key fingerprints), Ed25519 keys in
// PKCS#8 PEM (optionally passphrase-encrypted) through OpenSSL 3, and base64 for metadata.
// A key fingerprint is the lowercase hex SHA-256 of the 32-byte raw public key.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/atomic_file.h"

namespace flare::package {

using Sha256Digest = std::array<std::uint8_t, 32>;
using PublicKey = std::array<std::uint8_t, 32>;     // raw Ed25519 public key
using Signature = std::array<std::uint8_t, 64>;     // raw Ed25519 signature

// Incremental SHA-256.
class Sha256 {
 public:
  Sha256();
  ~Sha256();
  Sha256(const Sha256&) = delete;
  Sha256& operator=(const Sha256&) = delete;
  void update(std::span<const std::byte> bytes);
  Sha256Digest finish();

 private:
  void* context_;
};

Sha256Digest sha256(std::span<const std::byte> bytes);
std::string sha256_hex(std::span<const std::byte> bytes);
std::string to_hex(std::span<const std::uint8_t> bytes);
std::string base64_encode(std::span<const std::byte> bytes);
// Strict standard base64 (padding required, no whitespace); nullopt on anything else.
std::optional<std::vector<std::byte>> base64_decode(std::string_view text);

std::string key_fingerprint(const PublicKey& key);
bool ed25519_verify(const PublicKey& key, std::span<const std::byte> message, const Signature& signature);

// Returns the passphrase for `path`; called only for encrypted keys.
using PassphraseSource = std::function<std::string(const std::filesystem::path& path)>;

class SigningKey {
 public:
  static SigningKey generate();
  // Loads an Ed25519 PKCS#8 PEM. Refuses files readable by group or others.
  static SigningKey load(const std::filesystem::path& path, const PassphraseSource& passphrase);
  // Writes with mode 0600; encrypted with AES-256 when `passphrase` is non-empty. Refuses an
  // existing file.
  void save(const std::filesystem::path& path, const std::string& passphrase) const;

  SigningKey(SigningKey&&) noexcept;
  SigningKey& operator=(SigningKey&&) noexcept;
  ~SigningKey();

  const PublicKey& public_key() const { return public_key_; }
  std::string fingerprint() const { return key_fingerprint(public_key_); }
  Signature sign(std::span<const std::byte> message) const;

 private:
  SigningKey() = default;
  void* pkey_ = nullptr;  // EVP_PKEY*
  PublicKey public_key_{};
};

// True when the PEM at `path` is an encrypted private key.
bool key_file_is_encrypted(const std::filesystem::path& path);

// The public verification profile (`publisher.json`, `development-publisher.json`):
// {"format": 1, "namespace": ..., "official_source": ..., "keys": [{"algorithm": "ed25519",
//  "public_key": base64, "fingerprint": hex}]}
struct PublisherProfile {
  std::string namespace_name;
  std::string official_source;
  std::vector<PublicKey> keys;
  const PublicKey* find(std::string_view fingerprint) const;
};

PublisherProfile parse_publisher_profile(std::string_view json_text, const std::string& source_name);
PublisherProfile load_publisher_profile(const std::filesystem::path& path);
std::string render_publisher_profile(const PublisherProfile& profile);

using flare::write_file_atomic;  // common/atomic_file.h
std::string read_small_file(const std::filesystem::path& path, std::uint64_t max_bytes = 16u << 20);

}  // namespace flare::package
