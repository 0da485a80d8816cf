// Reading and verifying packages (see package.h). Everything read from disk is untrusted until
// the signature over the manifest bytes verifies and every payload hashes to its signed id.
#include <sys/stat.h>

#include <atomic>
#include <mutex>
#include <set>
#include <thread>

#include <nlohmann/json.hpp>

#include "common/error.h"
#include "package/package.h"

namespace flare::package {
namespace {

constexpr std::size_t kMaxLocations = 1u << 20;

SignatureRecord parse_signature(const std::filesystem::path& path, const std::string& text) {
  SignatureRecord record;
  try {
    auto json = nlohmann::json::parse(text);
    if (json.at("algorithm").get<std::string>() != "ed25519") {
      fail_input("{}: unsupported signature algorithm", path.string());
    }
    record.key_fingerprint = json.at("key_fingerprint").get<std::string>();
    auto raw = base64_decode(json.at("signature").get<std::string>());
    if (!raw || raw->size() != record.signature.size()) {
      fail_input("{}: flare.signature is malformed", path.string());
    }
    std::memcpy(record.signature.data(), raw->data(), raw->size());
  } catch (const nlohmann::json::exception& e) {
    fail_input("{}: flare.signature is malformed ({})", path.string(), e.what());
  }
  if (!valid_payload_id(record.key_fingerprint)) {
    fail_input("{}: flare.signature has a malformed key fingerprint", path.string());
  }
  return record;
}

bool valid_location_file(const std::string& file) {
  if (file.empty()) return true;
  constexpr std::string_view kSuffix = ".safetensors";
  return file.size() > kSuffix.size() && file.ends_with(kSuffix) && file != kPrimaryFileName &&
         valid_payload_name(std::string_view(file).substr(0, file.size() - kSuffix.size()));
}

std::map<std::string, PayloadLocation> parse_locations(const std::filesystem::path& path,
                                                       const std::string& text) {
  std::map<std::string, PayloadLocation> locations;
  try {
    auto json = nlohmann::json::parse(text);
    if (!json.is_object() || json.size() > kMaxLocations) fail_input("{}: flare.locations is malformed", path.string());
    for (const auto& [id, entry] : json.items()) {
      PayloadLocation location;
      location.file = entry.at("file").get<std::string>();
      location.offset_bytes = entry.at("offset").get<std::uint64_t>();
      location.length_bytes = entry.at("length").get<std::uint64_t>();
      if (!entry.at("offset").is_number_unsigned() || !entry.at("length").is_number_unsigned()) {
        fail_input("{}: location of payload {} has a negative range", path.string(), id);
      }
      if (!valid_payload_id(id)) fail_input("{}: flare.locations names a malformed payload id", path.string());
      if (!valid_location_file(location.file)) {
        fail_input("{}: location of payload {} names an invalid file '{}'", path.string(), id, location.file);
      }
      locations.emplace(id, std::move(location));
    }
  } catch (const nlohmann::json::exception& e) {
    fail_input("{}: flare.locations is malformed ({})", path.string(), e.what());
  }
  return locations;
}

void check_manifest(const std::filesystem::path& path, const proto::Manifest& manifest,
                    const std::map<std::string, PayloadLocation>& locations) {
  if (manifest.format_version() != kFormatVersion) {
    fail_input("{}: payload format version {} is not supported (this build reads {})", path.string(),
               manifest.format_version(), kFormatVersion);
  }
  std::map<std::string, std::uint64_t> lengths;
  for (const auto& payload : manifest.payloads()) {
    if (!valid_payload_id(payload.id())) fail_input("{}: manifest has a malformed payload id", path.string());
    if (!valid_payload_name(payload.name())) {
      fail_input("{}: manifest payload name '{}' is not a safe relative name", path.string(), payload.name());
    }
    auto [it, inserted] = lengths.emplace(payload.id(), payload.length_bytes());
    if (!inserted && it->second != payload.length_bytes()) {
      fail_input("{}: payload {} is declared with two lengths", path.string(), payload.id());
    }
    auto location = locations.find(payload.id());
    if (location == locations.end()) {
      fail_input("{}: payload '{}' has no location", path.string(), payload.name());
    }
    if (location->second.length_bytes != payload.length_bytes()) {
      fail_input("{}: location of payload '{}' has length {} but the manifest signs {}", path.string(),
                 payload.name(), location->second.length_bytes, payload.length_bytes());
    }
  }
  for (const auto& [id, location] : locations) {
    if (!lengths.contains(id)) fail_input("{}: flare.locations names payload {} absent from the manifest", path.string(), id);
  }
}

const std::string& required_metadata(const SafetensorsFile& file, const char* key) {
  auto it = file.metadata().find(key);
  if (it == file.metadata().end()) {
    fail_input("{}: not a Flare package (no {} metadata)", file.path().string(), key);
  }
  return it->second;
}

}  // namespace

bool valid_payload_name(std::string_view name) {
  if (name.empty() || name.size() > 255 || name == "__metadata__") return false;
  std::size_t n_parts = 0;
  std::size_t start = 0;
  while (start <= name.size()) {
    std::size_t end = name.find('/', start);
    if (end == std::string_view::npos) end = name.size();
    std::string_view part = name.substr(start, end - start);
    if (part.empty() || part == "." || part == ".." || ++n_parts > 8) return false;
    for (char c : part) {
      bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
                c == '_' || c == '-';
      if (!ok) return false;
    }
    start = end + 1;
  }
  return true;
}

bool valid_payload_id(std::string_view id) {
  if (id.size() != 64) return false;
  for (char c : id) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

std::string role_name(proto::PayloadRole role) {
  switch (role) {
    case proto::PAYLOAD_ROLE_WEIGHT: return "weight";
    case proto::PAYLOAD_ROLE_TUNED_WEIGHT: return "tuned weight";
    case proto::PAYLOAD_ROLE_INITIAL_STATE: return "initial state";
    case proto::PAYLOAD_ROLE_EXECUTABLE: return "executable";
    case proto::PAYLOAD_ROLE_GRAPH_RECORD: return "graph record";
    case proto::PAYLOAD_ROLE_FRONTEND: return "frontend";
    default: return "unspecified";
  }
}

std::unique_ptr<Package> Package::open(const std::filesystem::path& path) {
  std::unique_ptr<Package> package(new Package());
  std::error_code ec;
  std::filesystem::path primary = path;
  if (std::filesystem::is_directory(path, ec)) {
    primary = path / kPrimaryFileName;
    if (!std::filesystem::exists(primary, ec)) {
      fail_input("{}: not a package directory (no {})", path.string(), kPrimaryFileName);
    }
  } else if (!std::filesystem::exists(path, ec)) {
    fail_input("{}: no such package", path.string());
  }
  package->primary_ = SafetensorsFile::open(primary);
  package->directory_ = primary.parent_path().empty() ? "." : primary.parent_path();
  const auto& file = *package->primary_;
  package->manifest_base64_ = required_metadata(file, "flare.manifest");
  package->signature_text_ = required_metadata(file, "flare.signature");
  auto raw = base64_decode(package->manifest_base64_);
  if (!raw) fail_input("{}: flare.manifest is not valid base64", primary.string());
  package->manifest_bytes_.assign(reinterpret_cast<const char*>(raw->data()), raw->size());
  if (!package->manifest_.ParseFromString(package->manifest_bytes_)) {
    fail_input("{}: flare.manifest is not a valid manifest", primary.string());
  }
  package->signature_ = parse_signature(primary, package->signature_text_);
  package->locations_ = parse_locations(primary, required_metadata(file, "flare.locations"));
  check_manifest(primary, package->manifest_, package->locations_);
  package->form_ = PackageForm::packed;
  for (const auto& [id, location] : package->locations_) {
    if (!location.file.empty()) package->form_ = PackageForm::directory;
  }
  return package;
}

std::vector<const proto::Payload*> Package::distinct_payloads() const {
  std::vector<const proto::Payload*> result;
  std::set<std::string> seen;
  for (const auto& payload : manifest_.payloads()) {
    if (seen.insert(payload.id()).second) result.push_back(&payload);
  }
  return result;
}

std::uint64_t Package::distinct_payload_bytes() const {
  std::uint64_t total = 0;
  for (const auto* payload : distinct_payloads()) total += payload->length_bytes();
  return total;
}

bool Package::signature_valid(const PublicKey& key) const {
  return key_fingerprint(key) == signature_.key_fingerprint &&
         ed25519_verify(key, std::as_bytes(std::span(manifest_bytes_.data(), manifest_bytes_.size())),
                        signature_.signature);
}

void Package::verify_signature(const PublicKey& key) const {
  if (key_fingerprint(key) != signature_.key_fingerprint) {
    fail_input("{}: signed by key {}, not by the supplied key {}", primary_path().string(),
               signature_.key_fingerprint, key_fingerprint(key));
  }
  if (!signature_valid(key)) {
    fail_input("{}: the manifest signature does not verify (the package was modified after signing)",
               primary_path().string());
  }
}

void Package::check_layout() {
  if (layout_checked_) return;
  std::size_t n_primary_tensors = 0;
  for (const auto& [id, location] : locations_) {
    std::shared_ptr<SafetensorsFile> file = primary_;
    if (!location.file.empty()) {
      auto it = companions_.find(location.file);
      if (it == companions_.end()) {
        std::filesystem::path companion = directory_ / location.file;
        struct stat st {};
        if (::lstat(companion.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) {
          fail_input("{}: companion {} is missing or not a regular file", primary_path().string(), location.file);
        }
        it = companions_.emplace(location.file, SafetensorsFile::open(companion)).first;
      }
      file = it->second;
    }
    // The range must be exactly one U8 tensor of that file.
    std::uint64_t data_start = file->data_offset_bytes();
    const TensorInfo* match = nullptr;
    if (location.offset_bytes >= data_start) {
      for (const auto& t : file->tensors()) {
        if (t.begin == location.offset_bytes - data_start && t.size_bytes() == location.length_bytes) {
          match = &t;
          break;
        }
      }
    }
    if (match == nullptr || match->dtype != DType::u8) {
      fail_input("{}: location of payload {} ({} bytes at offset {}) is not a payload tensor of {}",
                 primary_path().string(), id, location.length_bytes, location.offset_bytes,
                 file->path().string());
    }
    // Names are part of the layout too: a companion holds exactly one tensor "payload" and no
    // metadata; a tensor of the primary carries the name of a manifest payload with this id.
    bool named = false;
    if (!location.file.empty()) {
      named = match->name == "payload" && file->tensors().size() == 1 && file->metadata().empty();
    } else {
      for (const auto& payload : manifest_.payloads()) {
        named = named || (payload.id() == id && payload.name() == match->name);
      }
    }
    if (!named) {
      fail_input("{}: tensor '{}' of {} does not match the payload located there", primary_path().string(),
                 match->name, file->path().string());
    }
    if (location.file.empty()) ++n_primary_tensors;
  }
  if (n_primary_tensors != primary_->tensors().size()) {
    fail_input("{}: the primary holds tensors that no location names", primary_path().string());
  }
  layout_checked_ = true;
}

std::span<const std::byte> Package::payload_bytes(const std::string& id) const {
  auto location = locations_.find(id);
  if (!layout_checked_ || location == locations_.end()) {
    fail_input("{}: payload {} is not available", primary_path().string(), id);
  }
  const auto& file = location->second.file.empty() ? primary_ : companions_.at(location->second.file);
  return file->data().subspan(location->second.offset_bytes - file->data_offset_bytes(),
                              location->second.length_bytes);
}

std::filesystem::path Package::companion_path(const std::string& id) const {
  auto location = locations_.find(id);
  if (location == locations_.end() || location->second.file.empty()) return {};
  auto it = companions_.find(location->second.file);
  if (it == companions_.end() || it->second->tensors().size() != 1) return {};
  return it->second->path();
}

void Package::verify_payloads(const ByteProgress& progress, int n_workers) const {
  auto payloads = distinct_payloads();
  n_workers = std::max(1, std::min<int>(n_workers, static_cast<int>(payloads.size())));
  std::atomic<std::size_t> next{0};
  std::mutex mutex;
  std::string failure;
  auto work = [&] {
    constexpr std::size_t kChunkBytes = 8u << 20;
    for (std::size_t i = next++; i < payloads.size(); i = next++) {
      auto bytes = payload_bytes(payloads[i]->id());
      Sha256 hasher;
      for (std::size_t at = 0; at < bytes.size(); at += kChunkBytes) {
        auto chunk = bytes.subspan(at, std::min(kChunkBytes, bytes.size() - at));
        hasher.update(chunk);
        if (progress) progress(chunk.size());
      }
      auto digest = hasher.finish();
      if (to_hex(digest) != payloads[i]->id()) {
        std::lock_guard lock(mutex);
        if (failure.empty()) failure = payloads[i]->name();
      }
    }
  };
  std::vector<std::thread> workers;
  for (int i = 1; i < n_workers; ++i) workers.emplace_back(work);
  work();
  for (auto& worker : workers) worker.join();
  if (!failure.empty()) {
    fail_input("{}: payload '{}' does not match its signed hash (the package is corrupt or was modified)",
               primary_path().string(), failure);
  }
}

}  // namespace flare::package
