// Runtime packages (DESIGN.md section 5): a primary `model.safetensors` whose metadata holds the
// signed Protobuf manifest (`flare.manifest`), its Ed25519 signature (`flare.signature`) and the
// unsigned physical locations of every payload (`flare.locations`), plus companions holding the
// payloads. Two canonical forms carry the same signed bytes:
//   packed     one file; every payload is a U8 tensor of the primary, named by its payload name;
//   directory  model.safetensors + one companion `<payload name>.safetensors` per distinct
//              payload (a single U8 tensor "payload"); frontend payloads stay in the primary.
// Opening reads only the primary; check_layout() opens companions and validates every location;
// verify_payloads() hashes every distinct payload against the manifest.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "package/crypto.h"
#include "package/safetensors.h"
#include "proto/manifest.pb.h"

namespace flare::package {

inline constexpr std::uint32_t kFormatVersion = 2;
inline constexpr std::uint32_t kExecutionAbiVersion = 5;
inline constexpr std::uint32_t kPreparedContractVersion = 3;
inline constexpr const char* kPrimaryFileName = "model.safetensors";
inline constexpr const char* kDevelopmentNamespace = "local-development";
inline constexpr const char* kDevelopmentSource = "local-development";

enum class PackageForm { packed, directory };

// Where a payload's bytes are: `file` relative to the package directory ("" = the primary),
// and an absolute byte range in that file that must be exactly one U8 tensor.
struct PayloadLocation {
  std::string file;
  std::uint64_t offset_bytes = 0;
  std::uint64_t length_bytes = 0;
};

struct SignatureRecord {
  std::string key_fingerprint;
  Signature signature{};
};

// Called from hashing workers with the number of bytes just hashed (thread-safe required).
using ByteProgress = std::function<void(std::uint64_t n_bytes)>;

class Package {
 public:
  // `path`: a packed file, a directory holding model.safetensors, or that primary file.
  // Reads and validates only the primary's metadata (bounded); nothing is authenticated yet.
  static std::unique_ptr<Package> open(const std::filesystem::path& path);

  const proto::Manifest& manifest() const { return manifest_; }
  const std::string& manifest_bytes() const { return manifest_bytes_; }
  const std::string& manifest_base64() const { return manifest_base64_; }
  const std::string& signature_text() const { return signature_text_; }
  const SignatureRecord& signature() const { return signature_; }
  const std::map<std::string, PayloadLocation>& locations() const { return locations_; }
  const SafetensorsFile& primary() const { return *primary_; }
  const std::filesystem::path& primary_path() const { return primary_->path(); }
  const std::filesystem::path& directory() const { return directory_; }
  PackageForm form() const { return form_; }

  // Distinct payloads by id (the first manifest entry naming each id).
  std::vector<const proto::Payload*> distinct_payloads() const;
  std::uint64_t distinct_payload_bytes() const;

  bool signature_valid(const PublicKey& key) const;
  // Throws naming the package when the signature does not verify with `key`.
  void verify_signature(const PublicKey& key) const;
  // Opens companions and checks every location; idempotent.
  void check_layout();
  // Hashes every distinct payload with up to `n_workers` threads; throws naming the first
  // payload whose bytes differ from the signed hash. Requires check_layout().
  void verify_payloads(const ByteProgress& progress, int n_workers = 8) const;
  // Bytes of one payload (requires check_layout()).
  std::span<const std::byte> payload_bytes(const std::string& id) const;
  // The companion file a payload lives in alone (directory form), or empty.
  std::filesystem::path companion_path(const std::string& id) const;

 private:
  Package() = default;
  std::filesystem::path directory_;
  PackageForm form_ = PackageForm::packed;
  std::shared_ptr<SafetensorsFile> primary_;
  std::string manifest_base64_, manifest_bytes_, signature_text_;
  proto::Manifest manifest_;
  SignatureRecord signature_;
  std::map<std::string, PayloadLocation> locations_;
  std::map<std::string, std::shared_ptr<SafetensorsFile>> companions_;  // by location file
  bool layout_checked_ = false;
};

// Builds and signs a package from given payloads (exports and tests).
class PackageBuilder {
 public:
  explicit PackageBuilder(proto::Manifest manifest);
  // `name`: "weights/layer-000", "frontend/tokenizer.json", ... (relative, [A-Za-z0-9._-] parts).
  void add_payload(std::string name, proto::PayloadRole role, std::vector<std::byte> bytes,
                   int tensor_parallel = 0, int rank = -1);
  // The same with the payload's SHA-256 already known (hashed by the caller, or signed in a cache
  // entry the bytes come from), so large payloads are not hashed twice.
  void add_payload_with_id(std::string name, proto::PayloadRole role, std::string id, std::vector<std::byte> bytes);
  proto::Manifest& manifest() { return manifest_; }
  // Fills format versions, version label, creation time and payload ids; signs; writes `dest`
  // (which must not exist) in `form`.
  void write(const std::filesystem::path& dest, PackageForm form, const SigningKey& key);

 private:
  proto::Manifest manifest_;
  std::vector<std::vector<std::byte>> bytes_;  // parallel to manifest_.payloads()
};

// Serializes and signs a manifest; returns {manifest base64, signature metadata text}.
std::pair<std::string, std::string> sign_manifest(const proto::Manifest& manifest, const SigningKey& key);

// Writes `source` (layout-checked) to `dest` in `form` with the same manifest, signature and
// payload bytes. Companions are hard-linked when on the same filesystem, else copied.
// Refuses an existing destination. `replacement_signature` re-signs instead (ignition sign).
struct ConvertOptions {
  const std::string* manifest_base64 = nullptr;  // replacement signed body, or null to keep
  const std::string* signature_text = nullptr;
};
void convert_package(const Package& source, const std::filesystem::path& dest, PackageForm form,
                     const ConvertOptions& options = {});

// Validates a payload name (relative path of [A-Za-z0-9._-] components, no "." or "..").
bool valid_payload_name(std::string_view name);
bool valid_payload_id(std::string_view id);
std::string role_name(proto::PayloadRole role);

}  // namespace flare::package
