// `ignition keygen`, `ignition key-password`, `ignition sign` (see signing_commands.h).
// Passphrases are only ever typed on the controlling terminal with echo off; there is no
// passphrase flag or file, so a key's secret never appears in arguments or scripts.
#include "ignition/signing_commands.h"

#include <unistd.h>

#include <cctype>
#include <cstdio>

#include "common/cli.h"
#include "common/config.h"
#include "common/error.h"
#include "common/sizes.h"
#include "ignition/signing_identity.h"
#include "package/package.h"
#include "package/trust.h"

namespace flare::ignition {
namespace {

namespace fs = std::filesystem;

constexpr std::size_t kMinPassphraseBytes = 8;

// Asks for a new passphrase twice; refuses short or mismatched entries.
std::string read_new_passphrase(const fs::path& key_path) {
  std::string first = read_passphrase("New passphrase for " + key_path.string() + ": ");
  if (first.size() < kMinPassphraseBytes) {
    fail_usage("the passphrase must be at least {} characters; production keys are always encrypted",
               kMinPassphraseBytes);
  }
  std::string second = read_passphrase("Repeat the passphrase: ");
  if (first != second) fail_usage("the passphrases do not match; nothing was written");
  return first;
}

template <typename T>
T value_or_config(const std::optional<T>& flag, const std::optional<T>& configured, const char* flag_name,
                  const char* key_name) {
  if (flag) return *flag;
  if (configured) return *configured;
  fail_usage("{} is required (or set [publishing] {} in the configuration file)", flag_name, key_name);
}

// Adds `key` to the profile at `path`, creating it; an existing profile must name `namespace_name`.
void add_key_to_profile(const fs::path& path, const std::string& namespace_name, const std::string& official_source,
                        const package::PublicKey& key) {
  package::PublisherProfile profile{namespace_name, official_source, {}};
  std::error_code ec;
  if (fs::exists(path, ec)) {
    profile = package::load_publisher_profile(path);
    if (profile.namespace_name != namespace_name) {
      fail_usage("{} is the profile of publisher '{}', not '{}'; choose another --profile", path.string(),
                 profile.namespace_name, namespace_name);
    }
    profile.official_source = official_source;
  }
  if (profile.find(package::key_fingerprint(key)) == nullptr) profile.keys.push_back(key);
  package::write_file_atomic(path, package::render_publisher_profile(profile), 0644);
}

package::PackageForm parse_form(const std::string& text) {
  if (text == "packed") return package::PackageForm::packed;
  if (text == "directory") return package::PackageForm::directory;
  fail_usage("--form must be packed or directory, not '{}'", text);
}

}  // namespace

bool valid_publisher_namespace(const std::string& name) {
  if (name.empty() || name.size() > 96) return false;
  if (!std::isalnum(static_cast<unsigned char>(name.front()))) return false;
  for (char c : name) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '_' && c != '-') return false;
  }
  return true;
}

int run_keygen(const KeygenOptions& options) {
  Config config = load_config(options.config);
  const fs::path key_path = value_or_config(options.output, config.publishing.signing_key, "--output", "signing_key");
  const std::string ns = value_or_config(options.namespace_name, config.publishing.namespace_name, "--namespace",
                                         "namespace");
  const std::string source = value_or_config(options.official_source, config.publishing.official_source,
                                             "--official-source", "official_source");
  if (!valid_publisher_namespace(ns)) {
    fail_usage("namespace '{}' must be 1-96 letters, digits, '.', '_' or '-', starting with a letter or digit", ns);
  }
  if (ns == package::kDevelopmentNamespace) {
    fail_usage("'{}' is reserved for development keys, which ignition creates by itself", ns);
  }
  if (source.empty()) fail_usage("--official-source must name the publisher's repository URL");
  const fs::path profile_path = options.profile.value_or(key_path.parent_path() / "publisher.json");
  std::error_code ec;
  if (fs::exists(key_path, ec)) fail_usage("{} already exists; keygen never replaces a key", key_path.string());
  if (!key_path.parent_path().empty()) fs::create_directories(key_path.parent_path(), ec);
  const std::string passphrase = read_new_passphrase(key_path);
  auto key = package::SigningKey::generate();
  key.save(key_path, passphrase);
  add_key_to_profile(profile_path, ns, source, key.public_key());
  std::printf("Created encrypted signing key %s\n  namespace    %s\n  source       %s\n  fingerprint  %s\n"
              "  profile      %s\nPublish the profile as publisher.json at the root of %s.\n",
              key_path.string().c_str(), ns.c_str(), source.c_str(), key.fingerprint().c_str(),
              profile_path.string().c_str(), source.c_str());
  return 0;
}

int run_key_password(const KeyPasswordOptions& options) {
  Config config = load_config(options.config);
  const fs::path key_path = value_or_config(options.key, config.publishing.signing_key, "KEY", "signing_key");
  auto key = package::SigningKey::load(key_path, [](const fs::path& path) {
    return read_passphrase("Current passphrase for " + path.string() + ": ");
  });
  const std::string passphrase = read_new_passphrase(key_path);
  // Write beside the key and rename over it: the old file stays intact until the new one is whole.
  fs::path temp = key_path;
  temp += fmt::format(".new-{}", ::getpid());
  std::error_code ec;
  fs::remove(temp, ec);
  try {
    key.save(temp, passphrase);
    fs::rename(temp, key_path);
  } catch (...) {
    fs::remove(temp, ec);
    throw;
  }
  std::printf("Changed the passphrase of %s (fingerprint %s unchanged).\n", key_path.string().c_str(),
              key.fingerprint().c_str());
  return 0;
}

int run_sign(const SignOptions& options) {
  Config config = load_config(options.config);
  if (!config.publishing.configured()) {
    fail_usage("ignition sign needs a publishing identity: set signing_key, namespace and official_source in "
               "the [publishing] section of {}",
               config.path.string());
  }
  std::error_code ec;
  if (fs::exists(options.output, ec)) fail_usage("--output {} already exists", options.output.string());
  auto source = package::Package::open(options.package);
  const auto& ns = source->manifest().publisher_namespace();
  if (ns != package::kDevelopmentNamespace) {
    fail_usage("{} is signed by publisher '{}'; only development packages ({}) are promoted by ignition sign",
               options.package.string(), ns, package::kDevelopmentNamespace);
  }
  package::TrustOptions trust;
  trust.publisher_keys = options.publisher_keys;
  if (trust.publisher_keys.empty()) {
    fs::path beside_config = development_profile_path(config);
    trust.publisher_keys.push_back(fs::exists(beside_config, ec) ? beside_config : package::home_directory_profile());
  }
  auto signer = package::resolve_signer(*source, trust);
  source->check_layout();
  source->verify_payloads(nullptr);
  std::fprintf(stderr, "Verified %s: development signature (key %s) and %s of payloads.\n",
               options.package.string().c_str(), source->signature().key_fingerprint.c_str(),
               format_bytes(source->distinct_payload_bytes()).c_str());
  (void)signer;
  SigningIdentity identity = load_publishing_identity(config);
  proto::Manifest manifest = source->manifest();
  manifest.set_publisher_namespace(identity.namespace_name);
  manifest.set_official_source(options.official_source.value_or(identity.official_source));
  auto [manifest_base64, signature_text] = package::sign_manifest(manifest, identity.key);
  package::ConvertOptions replacement{&manifest_base64, &signature_text};
  const auto form = options.form ? parse_form(*options.form) : source->form();
  package::convert_package(*source, options.output, form, replacement);
  auto written = package::Package::open(options.output);
  written->verify_signature(identity.key.public_key());
  std::printf("%s\n", options.output.string().c_str());
  std::fprintf(stderr, "Signed for publisher '%s' (source %s) with key %s.\n", identity.namespace_name.c_str(),
               manifest.official_source().c_str(), identity.key.fingerprint().c_str());
  return 0;
}

void add_signing_commands(CLI::App& app) {
  {
    auto options = std::make_shared<KeygenOptions>();
    auto* cmd = add_command(app, "keygen", "Create an encrypted production signing key and its public profile.",
                            [options] { return run_keygen(*options); });
    cmd->add_option("--output", options->output, "Key file to create (default [publishing] signing_key)");
    cmd->add_option("--profile", options->profile, "Public profile to write (default publisher.json beside the key)");
    cmd->add_option("--namespace", options->namespace_name, "Publisher namespace (default [publishing] namespace)");
    cmd->add_option("--official-source", options->official_source,
                    "Publisher repository URL (default [publishing] official_source)");
    cmd->add_option("--config", options->config, "Configuration file (default ~/.config/flare/config.toml)");
  }
  {
    auto options = std::make_shared<KeyPasswordOptions>();
    auto* cmd = add_command(app, "key-password", "Change a signing key's passphrase; the key stays the same.",
                            [options] { return run_key_password(*options); });
    cmd->add_option("KEY", options->key, "Key file (default [publishing] signing_key)");
    cmd->add_option("--config", options->config, "Configuration file (default ~/.config/flare/config.toml)");
  }
  {
    auto options = std::make_shared<SignOptions>();
    auto* cmd = add_command(app, "sign", "Verify a development package and re-sign it with the [publishing] identity.",
                            [options] { return run_sign(*options); });
    cmd->add_option("PACKAGE", options->package, "Development package (file or directory)")->required();
    cmd->add_option("--output", options->output, "Destination (must not exist)")->required();
    cmd->add_option("--form", options->form, "packed or directory (default: the source's form)");
    cmd->add_option("--official-source", options->official_source, "Overrides [publishing] official_source");
    cmd->add_option("--publisher-keys", options->publisher_keys,
                    "Profile verifying the development signer (default development-publisher.json beside the "
                    "configuration file)");
    cmd->add_option("--config", options->config, "Configuration file (default ~/.config/flare/config.toml)");
  }
}

}  // namespace flare::ignition
