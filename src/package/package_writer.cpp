// Writing packages in either canonical form (see package.h): the builder signs a new manifest,
// conversion re-lays out an existing package's exact signed bytes. Both go through one writer so
// the two forms cannot drift apart. A destination appears only when complete (written under a
// temporary name beside it, then renamed).
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <set>
#include <random>
#include <array>

#include <nlohmann/json.hpp>

#include "common/error.h"
#include "package/package.h"

namespace flare::package {
namespace {

struct PayloadSource {
  std::string id;
  std::string name;
  bool frontend = false;
  std::span<const std::byte> bytes;
  std::filesystem::path companion;  // an existing single-payload companion to link, or empty
};

void write_u8_tensor_file(const std::filesystem::path& path, std::span<const std::byte> bytes) {
  SafetensorsWriter writer(path, {});
  writer.declare("payload", DType::u8, {static_cast<std::int64_t>(bytes.size())});
  writer.write(bytes);
  writer.finish();
}

// Hard-links `from` to `to`, copying when they are on different filesystems. A symlink `from`
// (a hub snapshot file) is followed: the new name links the file, never the symlink.
void link_or_copy(const std::filesystem::path& from, const std::filesystem::path& to) {
  if (::linkat(AT_FDCWD, from.c_str(), AT_FDCWD, to.c_str(), AT_SYMLINK_FOLLOW) == 0) return;
  if (errno != EXDEV && errno != EPERM && errno != EMLINK) {
    fail_input("cannot link {} to {}: {}", from.string(), to.string(), std::strerror(errno));
  }
  std::error_code ec;
  std::filesystem::copy_file(from, to, ec);
  if (ec) fail_input("cannot copy {} to {}: {}", from.string(), to.string(), ec.message());
}

// Offsets of each tensor in the primary are known only after the header is laid out, so the
// primary is written twice in memory terms: once to learn the header size, then for real.
void write_primary(const std::filesystem::path& path, const std::string& manifest_base64,
                   const std::string& signature_text, const std::vector<const PayloadSource*>& inside,
                   nlohmann::json locations) {
  // Header size depends on the locations text, which depends on the header size: iterate until
  // the padded header length is stable (it converges in at most a few rounds).
  std::uint64_t guess_header_bytes = 0;
  for (int round = 0; round < 8; ++round) {
    std::uint64_t data_offset = 8 + guess_header_bytes;
    std::uint64_t cursor = 0;
    for (const auto* source : inside) {
      locations[source->id] = {{"file", ""}, {"offset", data_offset + cursor}, {"length", source->bytes.size()}};
      cursor += source->bytes.size();
    }
    std::map<std::string, std::string> metadata = {{"flare.manifest", manifest_base64},
                                                   {"flare.signature", signature_text},
                                                   {"flare.locations", locations.dump()}};
    nlohmann::json header = nlohmann::json::object();
    header["__metadata__"] = metadata;
    std::uint64_t at = 0;
    for (const auto* source : inside) {
      header[source->name] = {{"dtype", "U8"}, {"shape", {source->bytes.size()}},
                              {"data_offsets", {at, at + source->bytes.size()}}};
      at += source->bytes.size();
    }
    std::uint64_t header_bytes = (header.dump().size() + 7) / 8 * 8;
    if (header_bytes == guess_header_bytes) {
      SafetensorsWriter writer(path, metadata);
      for (const auto* source : inside) {
        writer.declare(source->name, DType::u8, {static_cast<std::int64_t>(source->bytes.size())});
      }
      for (const auto* source : inside) writer.write(source->bytes);
      writer.finish();
      return;
    }
    guess_header_bytes = header_bytes;
  }
  fail_input("{}: cannot lay out the package header", path.string());
}

void write_package_files(const std::filesystem::path& dest, PackageForm form, const std::string& manifest_base64,
                         const std::string& signature_text, const std::vector<PayloadSource>& sources) {
  std::error_code ec;
  if (std::filesystem::exists(std::filesystem::symlink_status(dest, ec))) {
    fail_usage("{} already exists; choose a destination that does not exist", dest.string());
  }
  std::filesystem::path temp = dest;
  temp += fmt::format(".partial-{}", ::getpid());
  std::filesystem::remove_all(temp, ec);
  std::vector<const PayloadSource*> inside;
  nlohmann::json locations = nlohmann::json::object();
  try {
    if (form == PackageForm::packed) {
      for (const auto& source : sources) inside.push_back(&source);
      write_primary(temp, manifest_base64, signature_text, inside, locations);
    } else {
      std::filesystem::create_directories(temp);
      for (const auto& source : sources) {
        if (source.frontend) {
          inside.push_back(&source);
          continue;
        }
        std::string file = source.name + ".safetensors";
        std::filesystem::path target = temp / file;
        std::filesystem::create_directories(target.parent_path());
        if (!source.companion.empty()) {
          link_or_copy(source.companion, target);
        } else {
          write_u8_tensor_file(target, source.bytes);
        }
        auto companion = SafetensorsFile::open(target);
        const auto& tensor = companion->tensors().at(0);
        locations[source.id] = {{"file", file},
                                {"offset", companion->data_offset_bytes() + tensor.begin},
                                {"length", tensor.size_bytes()}};
      }
      write_primary(temp / kPrimaryFileName, manifest_base64, signature_text, inside, locations);
    }
    std::filesystem::rename(temp, dest);
  } catch (...) {
    std::filesystem::remove_all(temp, ec);
    throw;
  }
}

std::vector<PayloadSource> sources_from(const Package& package) {
  std::vector<PayloadSource> sources;
  std::set<std::string> names;
  for (const auto* payload : package.distinct_payloads()) {
    if (!names.insert(payload->name()).second) {
      fail_input("{}: two different payloads are named '{}'", package.primary_path().string(), payload->name());
    }
    sources.push_back({payload->id(), payload->name(), payload->role() == proto::PAYLOAD_ROLE_FRONTEND,
                       package.payload_bytes(payload->id()), package.companion_path(payload->id())});
  }
  return sources;
}

std::string utc_now(const char* format) {
  std::time_t now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm tm{};
  gmtime_r(&now, &tm);
  char buffer[64];
  std::strftime(buffer, sizeof(buffer), format, &tm);
  return buffer;
}

}  // namespace

std::pair<std::string, std::string> sign_manifest(const proto::Manifest& manifest, const SigningKey& key) {
  std::string bytes;
  if (!manifest.SerializeToString(&bytes)) fail_input("cannot serialize the manifest");
  auto signature = key.sign(std::as_bytes(std::span(bytes.data(), bytes.size())));
  nlohmann::json record = {{"algorithm", "ed25519"},
                           {"key_fingerprint", key.fingerprint()},
                           {"signature", base64_encode(std::as_bytes(std::span(signature)))}};
  return {base64_encode(std::as_bytes(std::span(bytes.data(), bytes.size()))), record.dump()};
}

PackageBuilder::PackageBuilder(proto::Manifest manifest) : manifest_(std::move(manifest)) {
  manifest_.clear_payloads();
}

void PackageBuilder::add_payload(std::string name, proto::PayloadRole role, std::vector<std::byte> bytes,
                                 int tensor_parallel, int rank) {
  if (!valid_payload_name(name)) fail_input("invalid payload name '{}'", name);
  auto* payload = manifest_.add_payloads();
  payload->set_id(sha256_hex(bytes));
  payload->set_length_bytes(bytes.size());
  payload->set_role(role);
  payload->set_name(std::move(name));
  payload->set_tensor_parallel(tensor_parallel);
  payload->set_rank(rank);
  bytes_.push_back(std::move(bytes));
}

void PackageBuilder::add_payload_with_id(std::string name, proto::PayloadRole role, std::string id,
                                         std::vector<std::byte> bytes) {
  if (!valid_payload_name(name)) fail_input("invalid payload name '{}'", name);
  if (!valid_payload_id(id)) fail_input("invalid payload id for '{}'", name);
  auto* payload = manifest_.add_payloads();
  payload->set_id(std::move(id));
  payload->set_length_bytes(bytes.size());
  payload->set_role(role);
  payload->set_name(std::move(name));
  payload->set_rank(-1);
  bytes_.push_back(std::move(bytes));
}

void PackageBuilder::write(const std::filesystem::path& dest, PackageForm form, const SigningKey& key) {
  manifest_.set_format_version(kFormatVersion);
  manifest_.set_execution_abi_version(kExecutionAbiVersion);
  manifest_.set_prepared_contract_version(kPreparedContractVersion);
  if (manifest_.created_at().empty()) manifest_.set_created_at(utc_now("%Y-%m-%dT%H:%M:%SZ"));
  if (manifest_.version().empty()) {
    // Time first (versions sort by export time), then a digest of the payloads and a random salt, so
    // two exports of identical content within one second still get distinct versions.
    Sha256 hasher;
    for (const auto& payload : manifest_.payloads()) hasher.update(std::as_bytes(std::span(payload.id())));
    std::random_device random;
    const std::array<std::uint32_t, 4> salt{random(), random(), random(), random()};
    hasher.update(std::as_bytes(std::span(salt)));
    auto digest = hasher.finish();
    manifest_.set_version(utc_now("%Y%m%dT%H%M%SZ") + "-" + to_hex(digest).substr(0, 8));
  }
  auto [manifest_base64, signature_text] = sign_manifest(manifest_, key);
  std::vector<PayloadSource> sources;
  std::map<std::string, std::string> id_by_name;
  std::set<std::string> ids;
  for (int i = 0; i < manifest_.payloads_size(); ++i) {
    const auto& payload = manifest_.payloads(i);
    auto [it, inserted] = id_by_name.emplace(payload.name(), payload.id());
    if (!inserted && it->second != payload.id()) fail_input("two different payloads are named '{}'", payload.name());
    if (!ids.insert(payload.id()).second) continue;
    sources.push_back({payload.id(), payload.name(), payload.role() == proto::PAYLOAD_ROLE_FRONTEND,
                       std::span<const std::byte>(bytes_[i]), {}});
  }
  write_package_files(dest, form, manifest_base64, signature_text, sources);
}

void convert_package(const Package& source, const std::filesystem::path& dest, PackageForm form,
                     const ConvertOptions& options) {
  write_package_files(dest, form, options.manifest_base64 ? *options.manifest_base64 : source.manifest_base64(),
                      options.signature_text ? *options.signature_text : source.signature_text(),
                      sources_from(source));
}

}  // namespace flare::package
