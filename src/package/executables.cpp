#include "package/executables.h"

#include "common/error.h"
#include "package/compression.h"
#include "package/crypto.h"

namespace flare::package {
namespace {

// The readable part of a payload name: the key's first word, reduced to payload-name characters.
std::string stem_of(const std::string& key) {
  std::string stem;
  for (char c : key.substr(0, key.find(' '))) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
    stem += ok ? c : '_';
    if (stem.size() >= 48) break;
  }
  return stem.empty() ? "image" : stem;
}

}  // namespace

void add_executables(PackageBuilder& builder, const std::map<std::string, std::string>& images,
                     const std::string& prefix) {
  for (const auto& [key, image] : images) {
    if (image.size() > kMaxExecutableBytes) fail(ExitCode::preparation, "executable '{}' is larger than 256 MiB", key);
    const std::string name = prefix + "/" + stem_of(key) + "-" + sha256_hex(std::as_bytes(std::span(key.data(), key.size()))).substr(0, 16);
    auto* entry = builder.manifest().add_executables();
    entry->set_key(key);
    entry->set_payload(name);
    entry->set_uncompressed_bytes(image.size());
    builder.add_payload(name, proto::PAYLOAD_ROLE_EXECUTABLE, zstd_compress(image));
    auto& payloads = *builder.manifest().mutable_payloads();
    payloads[payloads.size() - 1].set_compression("zstd");
  }
}

std::map<std::string, std::string> read_executables(const Package& pkg) {
  std::map<std::string, const proto::Payload*> by_name;
  for (const auto& payload : pkg.manifest().payloads()) by_name.emplace(payload.name(), &payload);
  std::map<std::string, std::string> images;
  for (const auto& entry : pkg.manifest().executables()) {
    const auto it = by_name.find(entry.payload());
    if (it == by_name.end())
      fail_input("package {}: executable '{}' names a missing payload '{}'", pkg.directory().string(), entry.key(),
                 entry.payload());
    if (it->second->role() != proto::PAYLOAD_ROLE_EXECUTABLE || it->second->compression() != "zstd")
      fail_input("package {}: payload '{}' is not a zstd executable", pkg.directory().string(), entry.payload());
    if (entry.uncompressed_bytes() > kMaxExecutableBytes)
      fail_input("package {}: executable '{}' declares {} bytes", pkg.directory().string(), entry.key(),
                 entry.uncompressed_bytes());
    std::string image = zstd_decompress(pkg.payload_bytes(it->second->id()), entry.uncompressed_bytes(),
                                        "executable payload " + entry.payload());
    if (image.size() != entry.uncompressed_bytes())
      fail_input("package {}: executable '{}' decodes to {} bytes, the manifest signs {}", pkg.directory().string(),
                 entry.key(), image.size(), entry.uncompressed_bytes());
    if (!images.emplace(entry.key(), std::move(image)).second)
      fail_input("package {}: executable '{}' is listed twice", pkg.directory().string(), entry.key());
  }
  return images;
}

}  // namespace flare::package
