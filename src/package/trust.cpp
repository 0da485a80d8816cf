// Trust store and publisher acceptance (see trust.h).
#include "package/trust.h"

#include <chrono>
#include <cstring>
#include <ctime>
#include <sstream>

#include <toml++/toml.h>

#include "common/config.h"
#include "common/error.h"

namespace flare::package {
namespace fs = std::filesystem;
namespace {

std::string utc_now() {
  std::time_t now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm tm{};
  gmtime_r(&now, &tm);
  char buffer[32];
  std::strftime(buffer, sizeof(buffer), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buffer;
}

void load_profile_into(const fs::path& path, const std::string& fingerprint, const std::string& ns,
                       SignerResolution* out, bool* found) {
  auto profile = load_publisher_profile(path);
  const PublicKey* key = profile.find(fingerprint);
  if (key == nullptr || *found) return;
  if (profile.namespace_name != ns) {
    fail_input("publisher profile {} lists key {} for namespace '{}', but the package claims '{}'",
               path.string(), fingerprint, profile.namespace_name, ns);
  }
  out->key = *key;
  out->key_source = path.string();
  *found = true;
}

}  // namespace

fs::path TrustStore::default_path() { return home_directory() / ".config" / "flare" / "trust.toml"; }

TrustStore TrustStore::load(const fs::path& path) {
  TrustStore store;
  store.path_ = path;
  std::error_code ec;
  if (!fs::exists(path, ec)) return store;
  try {
    auto table = toml::parse_file(path.string());
    if (auto* keys = table["keys"].as_array()) {
      for (auto& node : *keys) {
        auto* t = node.as_table();
        if (t == nullptr) fail_input("trust store {}: malformed entry", path.string());
        TrustEntry entry;
        entry.fingerprint = (*t)["fingerprint"].value_or(std::string());
        entry.namespace_name = (*t)["namespace"].value_or(std::string());
        entry.identity = (*t)["identity"].value_or(std::string("accepted"));
        entry.accepted_at = (*t)["accepted_at"].value_or(std::string());
        auto raw = base64_decode((*t)["public_key"].value_or(std::string()));
        if (!raw || raw->size() != 32) fail_input("trust store {}: malformed public key", path.string());
        std::memcpy(entry.public_key.data(), raw->data(), 32);
        if (key_fingerprint(entry.public_key) != entry.fingerprint || entry.namespace_name.empty()) {
          fail_input("trust store {}: entry {} does not match its key", path.string(), entry.fingerprint);
        }
        store.entries_.push_back(std::move(entry));
      }
    }
  } catch (const toml::parse_error& e) {
    fail_usage("trust store {} is not valid TOML: {}", path.string(), e.description());
  }
  return store;
}

void TrustStore::save() const {
  toml::array keys;
  for (const auto& entry : entries_) {
    keys.push_back(toml::table{{"fingerprint", entry.fingerprint},
                               {"namespace", entry.namespace_name},
                               {"public_key", base64_encode(std::as_bytes(std::span(entry.public_key)))},
                               {"identity", entry.identity},
                               {"accepted_at", entry.accepted_at}});
  }
  toml::table root{{"keys", keys}};
  std::ostringstream text;
  text << "# Flare publisher trust store: accepted signing keys. Edit with `flare trust revoke`.\n" << root << "\n";
  fs::create_directories(path_.parent_path());
  write_file_atomic(path_, text.str(), 0600);
}

const TrustEntry* TrustStore::find(const std::string& fingerprint, const std::string& namespace_name) const {
  for (const auto& entry : entries_) {
    if (entry.fingerprint == fingerprint && entry.namespace_name == namespace_name) return &entry;
  }
  return nullptr;
}

void TrustStore::add(TrustEntry entry) {
  if (find(entry.fingerprint, entry.namespace_name) == nullptr) entries_.push_back(std::move(entry));
}

std::size_t TrustStore::revoke(const std::string& fingerprint) {
  auto before = entries_.size();
  std::erase_if(entries_, [&](const TrustEntry& e) { return e.fingerprint == fingerprint; });
  return before - entries_.size();
}

SignerResolution resolve_signer(const Package& package, const TrustOptions& options) {
  const auto& fingerprint = package.signature().key_fingerprint;
  const auto& ns = package.manifest().publisher_namespace();
  SignerResolution result;
  bool found = false;
  auto store = TrustStore::load(options.trust_store.value_or(TrustStore::default_path()));
  if (const TrustEntry* entry = store.find(fingerprint, ns)) {
    result.key = entry->public_key;
    result.remembered = true;
    result.key_source = "trust store";
    found = true;
  }
  for (const auto& path : options.publisher_keys) load_profile_into(path, fingerprint, ns, &result, &found);
  std::error_code ec;
  if (options.publisher_keys.empty() && ns == kDevelopmentNamespace && !options.development_profile.empty() &&
      fs::exists(options.development_profile, ec)) {
    load_profile_into(options.development_profile, fingerprint, ns, &result, &found);
  }
  if (!found) {
    fail_input("{}: no verification key for signer {} (namespace '{}'); pass --publisher-keys PROFILE",
               package.primary_path().string(), fingerprint, ns);
  }
  package.verify_signature(result.key);
  return result;
}

void ensure_accepted(const Package& package, const SignerResolution& signer, const TrustOptions& options,
                     bool interactive, std::FILE* in, std::FILE* out) {
  if (signer.remembered) return;
  const auto& manifest = package.manifest();
  const auto& fingerprint = package.signature().key_fingerprint;
  const auto& ns = manifest.publisher_namespace();
  std::string identity;
  if (options.approve_key || options.accept_publisher) {
    if (!options.approve_key || !options.accept_publisher) {
      fail_usage("--dangerously-approve-key and --dangerously-accept-publisher must be given together");
    }
    if (*options.approve_key != fingerprint || *options.accept_publisher != ns) {
      fail_usage("the package is signed by key {} for publisher '{}', which the approval flags do not name",
                 fingerprint, ns);
    }
    identity = "unattended";
  } else {
    if (!interactive) {
      fail_usage("publisher '{}' (key {}) is not trusted yet. Accept it on a terminal, or pass "
                 "--dangerously-approve-key {} --dangerously-accept-publisher {}",
                 ns, fingerprint, fingerprint, ns);
    }
    std::fprintf(out,
                 "This package's publisher has not been accepted on this machine.\n"
                 "  publisher    %s\n  key          %s\n  source       %s\n  license      %s\n"
                 "  verification signature verified with %s; identity not confirmed by the publisher's source\n"
                 "Type the publisher namespace to accept it: ",
                 ns.c_str(), fingerprint.c_str(), manifest.official_source().c_str(),
                 manifest.license().empty() ? "(none declared)" : manifest.license().c_str(),
                 signer.key_source.c_str());
    std::fflush(out);
    char line[512];
    if (std::fgets(line, sizeof(line), in) == nullptr) fail_usage("publisher not accepted");
    std::string typed(line);
    while (!typed.empty() && (typed.back() == '\n' || typed.back() == '\r')) typed.pop_back();
    if (typed != ns) fail_usage("publisher not accepted (typed '{}', expected '{}')", typed, ns);
    identity = "accepted";
  }
  auto store = TrustStore::load(options.trust_store.value_or(TrustStore::default_path()));
  store.add({fingerprint, ns, signer.key, identity, utc_now()});
  store.save();
}

}  // namespace flare::package

namespace flare::package {
std::filesystem::path home_directory_profile() {
  return home_directory() / ".config" / "flare" / "development-publisher.json";
}
}  // namespace flare::package
