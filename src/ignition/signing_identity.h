// Which key signs an export: the configured [publishing] identity (key, namespace, official
// source), or the development key created beside the configuration file on first use
// (development-signing-key.pem, owner-only, with development-publisher.json holding its public
// profile), under the namespace and source `local-development`. Also the terminal passphrase
// prompt every command that opens or writes an encrypted key uses.
#pragma once

#include <filesystem>
#include <string>

#include "common/config.h"
#include "package/crypto.h"

namespace flare::ignition {

struct SigningIdentity {
  package::SigningKey key;
  std::string namespace_name;
  std::string official_source;
  bool development = false;
  std::filesystem::path key_path;
};

SigningIdentity load_signing_identity(const Config& config);

// The configured [publishing] identity; a usage error naming the missing section otherwise.
SigningIdentity load_publishing_identity(const Config& config);

// Where the development key and its public profile live for `config`.
std::filesystem::path development_key_path(const Config& config);
std::filesystem::path development_profile_path(const Config& config);

// Reads one line from the controlling terminal with echo off, after printing `prompt` there.
// A usage error when the process has no terminal (passphrases are never read from pipes).
std::string read_passphrase(const std::string& prompt);

// The PassphraseSource for SigningKey::load: "Passphrase for PATH: ".
std::string prompt_key_passphrase(const std::filesystem::path& path);

}  // namespace flare::ignition
