// `ignition keygen`, `ignition key-password` and `ignition sign` (spec cli-design "Signing and
// local development"): production key custody and the promotion of a development package to the
// configured [publishing] identity, with no model preparation and no GPU.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace CLI {
class App;
}

namespace flare::ignition {

struct KeygenOptions {
  std::optional<std::filesystem::path> config;
  std::optional<std::filesystem::path> output;   // key path; default [publishing] signing_key
  std::optional<std::filesystem::path> profile;  // default publisher.json beside the key
  std::optional<std::string> namespace_name;     // default [publishing] namespace
  std::optional<std::string> official_source;    // default [publishing] official_source
};

struct KeyPasswordOptions {
  std::optional<std::filesystem::path> config;
  std::optional<std::filesystem::path> key;  // default [publishing] signing_key
};

struct SignOptions {
  std::optional<std::filesystem::path> config;
  std::filesystem::path package;
  std::filesystem::path output;
  std::optional<std::string> form;                       // packed | directory; default: the source's
  std::optional<std::string> official_source;            // overrides [publishing] official_source
  std::vector<std::filesystem::path> publisher_keys;     // profiles verifying the development signer
};

// Creates an encrypted Ed25519 key (passphrase typed twice on the terminal) and adds its
// verification key to the public profile (created, or extended when it names the same namespace).
int run_keygen(const KeygenOptions& options);
// Re-encrypts a key under a new passphrase; the key (and its fingerprint) is unchanged.
int run_key_password(const KeyPasswordOptions& options);
// Verifies a development package completely and writes it re-signed by the publishing identity.
int run_sign(const SignOptions& options);

// A publisher namespace: 1-96 of [A-Za-z0-9._-], starting with a letter or digit.
bool valid_publisher_namespace(const std::string& name);

void add_signing_commands(CLI::App& app);

}  // namespace flare::ignition
