// Publisher trust (spec "Signing and local development"): the trust store
// (~/.config/flare/trust.toml) remembers accepted (key fingerprint, namespace) pairs with their
// verification keys; key resolution finds a package signer's public key among --publisher-keys
// profiles, the development profile and remembered acceptances; first-use acceptance is typed on
// a terminal or given by the unattended --dangerously-approve-key/--dangerously-accept-publisher
// pair. There is no unsigned mode.
#pragma once

#include <cstdio>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "package/crypto.h"
#include "package/package.h"

namespace flare::package {

struct TrustEntry {
  std::string fingerprint;
  std::string namespace_name;
  PublicKey public_key{};
  std::string identity;     // how the identity was established: "accepted", "unattended"
  std::string accepted_at;  // RFC 3339 UTC
};

class TrustStore {
 public:
  static std::filesystem::path default_path();  // ~/.config/flare/trust.toml
  static TrustStore load(const std::filesystem::path& path);  // empty when absent
  void save() const;                                          // atomic, mode 0600

  const TrustEntry* find(const std::string& fingerprint, const std::string& namespace_name) const;
  void add(TrustEntry entry);
  std::size_t revoke(const std::string& fingerprint);  // number of entries removed
  const std::vector<TrustEntry>& entries() const { return entries_; }
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
  std::vector<TrustEntry> entries_;
};

struct TrustOptions {
  std::vector<std::filesystem::path> publisher_keys;      // --publisher-keys
  std::optional<std::filesystem::path> trust_store;       // --trust-store
  std::filesystem::path development_profile;              // ~/.config/flare/development-publisher.json
  std::optional<std::string> approve_key;                 // --dangerously-approve-key FP
  std::optional<std::string> accept_publisher;            // --dangerously-accept-publisher NS
};

struct SignerResolution {
  PublicKey key{};
  bool remembered = false;   // accepted earlier (trust store)
  std::string key_source;    // "trust store", a profile path
};

// Finds the signer's public key and verifies the manifest signature with it. Throws naming what
// is missing when no key is available or the signature fails.
SignerResolution resolve_signer(const Package& package, const TrustOptions& options);

// Ensures the signer is accepted: remembered, or the unattended pair matches exactly, or the
// user types the namespace at `in`/`out` when `interactive`. Remembers a new acceptance.
void ensure_accepted(const Package& package, const SignerResolution& signer, const TrustOptions& options,
                     bool interactive, std::FILE* in, std::FILE* out);

}  // namespace flare::package

namespace flare::package {
// ~/.config/flare/development-publisher.json, where development packages' profile is looked up.
std::filesystem::path home_directory_profile();
}  // namespace flare::package
