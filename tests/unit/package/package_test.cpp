// Packages: round trips in both forms, conversion preserving signed bytes, and the tamper
// suite (every flipped byte, truncated companions, hostile locations are detected and named).
#include "package/package.h"

#include <sys/stat.h>

#include <fstream>

#include <nlohmann/json.hpp>

#include "common/error.h"
#include "test_package.h"

namespace flare::package {
namespace {

using testing::make_temp_dir;
using testing::write_test_package;

std::string read_all(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}
void write_all(const std::filesystem::path& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

// Runs the full verification a load performs; throws flare::Error on any problem.
void verify_fully(const std::filesystem::path& path, const SigningKey& key) {
  auto package = Package::open(path);
  package->verify_signature(key.public_key());
  package->check_layout();
  package->verify_payloads(nullptr);
}

class PackageTest : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = make_temp_dir("pkg"); }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::filesystem::path dir_;
  SigningKey key_ = SigningKey::generate();
};

TEST_F(PackageTest, RoundTripBothForms) {
  for (auto form : {PackageForm::packed, PackageForm::directory}) {
    auto path = dir_ / (form == PackageForm::packed ? "p.safetensors" : "d");
    write_test_package(path, form, key_);
    auto package = Package::open(path);
    EXPECT_EQ(package->form(), form);
    package->verify_signature(key_.public_key());
    package->check_layout();
    std::atomic<std::uint64_t> hashed{0};
    package->verify_payloads([&](std::uint64_t n) { hashed += n; });
    EXPECT_EQ(hashed.load(), package->distinct_payload_bytes());
    EXPECT_EQ(package->manifest().payloads_size(), 5);
    EXPECT_EQ(package->distinct_payloads().size(), 4u);
    EXPECT_EQ(package->manifest().format_version(), kFormatVersion);
    EXPECT_EQ(package->manifest().model().canonical_name(), "demo");
    EXPECT_FALSE(package->manifest().version().empty());
    const auto* tokenizer = &package->manifest().payloads(4);
    auto bytes = package->payload_bytes(tokenizer->id());
    EXPECT_EQ(std::string(reinterpret_cast<const char*>(bytes.data()), bytes.size()), "{\"model\": {}}");
  }
  EXPECT_TRUE(std::filesystem::exists(dir_ / "d" / "weights" / "layer-000.safetensors"));
  EXPECT_TRUE(std::filesystem::exists(dir_ / "d" / "deployments" / "tp1" / "rank-0" / "graphs.safetensors"));
  EXPECT_FALSE(std::filesystem::exists(dir_ / "d" / "weights" / "layer-002.safetensors"));  // same bytes as 000
}

TEST_F(PackageTest, WrongKeyIsRejected) {
  write_test_package(dir_ / "p", PackageForm::packed, key_);
  auto other = SigningKey::generate();
  try {
    verify_fully(dir_ / "p", other);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("not by the supplied key"), std::string::npos);
  }
}

TEST_F(PackageTest, ConversionPreservesSignedBytesBothWays) {
  write_test_package(dir_ / "packed.safetensors", PackageForm::packed, key_);
  auto packed = Package::open(dir_ / "packed.safetensors");
  packed->check_layout();
  convert_package(*packed, dir_ / "dir", PackageForm::directory);
  auto directory = Package::open(dir_ / "dir");
  directory->check_layout();
  EXPECT_EQ(directory->manifest_bytes(), packed->manifest_bytes());
  EXPECT_EQ(directory->signature_text(), packed->signature_text());
  for (const auto* payload : packed->distinct_payloads()) {
    auto a = packed->payload_bytes(payload->id());
    auto b = directory->payload_bytes(payload->id());
    ASSERT_EQ(a.size(), b.size());
    EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size()), 0);
  }
  verify_fully(dir_ / "dir", key_);
  // Back to packed: byte-identical to the original file.
  convert_package(*directory, dir_ / "again.safetensors", PackageForm::packed);
  EXPECT_EQ(read_all(dir_ / "again.safetensors"), read_all(dir_ / "packed.safetensors"));
  // Directory to directory hard-links companions.
  convert_package(*directory, dir_ / "dir2", PackageForm::directory);
  struct stat a {}, b {};
  ::stat((dir_ / "dir" / "weights" / "layer-001.safetensors").c_str(), &a);
  ::stat((dir_ / "dir2" / "weights" / "layer-001.safetensors").c_str(), &b);
  EXPECT_EQ(a.st_ino, b.st_ino);
  verify_fully(dir_ / "dir2", key_);
  // Refuses an existing destination.
  EXPECT_THROW(convert_package(*directory, dir_ / "dir2", PackageForm::directory), Error);
  EXPECT_THROW(convert_package(*directory, dir_ / "packed.safetensors", PackageForm::packed), Error);
}

// Flips every byte of a packed package (and of a directory package's primary and one
// companion): each flip must be detected by open/verify, never accepted and never crash.
TEST_F(PackageTest, EveryFlippedByteIsDetected) {
  write_test_package(dir_ / "p.safetensors", PackageForm::packed, key_, "demo", 300);
  write_test_package(dir_ / "d", PackageForm::directory, key_, "demo", 300);
  verify_fully(dir_ / "p.safetensors", key_);
  verify_fully(dir_ / "d", key_);
  for (auto target : {dir_ / "p.safetensors", dir_ / "d" / "model.safetensors",
                      dir_ / "d" / "weights" / "layer-001.safetensors"}) {
    std::string original = read_all(target);
    std::filesystem::path package = target.filename() == "p.safetensors" ? target : dir_ / "d";
    for (std::size_t i = 0; i < original.size(); ++i) {
      std::string bytes = original;
      bytes[i] = static_cast<char>(bytes[i] ^ 0x01);
      write_all(target, bytes);
      try {
        verify_fully(package, key_);
        ADD_FAILURE() << "flip at byte " << i << " of " << target << " went undetected";
      } catch (const Error& e) {
        EXPECT_NE(e.exit_status(), 0);
      }
    }
    write_all(target, original);
  }
}

TEST_F(PackageTest, TamperedPayloadIsNamed) {
  write_test_package(dir_ / "d", PackageForm::directory, key_);
  auto companion = dir_ / "d" / "weights" / "layer-001.safetensors";
  std::string bytes = read_all(companion);
  bytes.back() = static_cast<char>(bytes.back() ^ 0x40);
  write_all(companion, bytes);
  try {
    verify_fully(dir_ / "d", key_);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("payload 'weights/layer-001' does not match"), std::string::npos) << e.what();
  }
}

TEST_F(PackageTest, TruncatedOrMissingCompanionIsNamed) {
  write_test_package(dir_ / "d", PackageForm::directory, key_);
  auto companion = dir_ / "d" / "weights" / "layer-001.safetensors";
  std::filesystem::resize_file(companion, std::filesystem::file_size(companion) - 5);
  try {
    verify_fully(dir_ / "d", key_);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("layer-001.safetensors"), std::string::npos) << e.what();
  }
  std::filesystem::remove(companion);
  try {
    verify_fully(dir_ / "d", key_);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("weights/layer-001.safetensors is missing"), std::string::npos) << e.what();
  }
}

// Rewrites the unsigned locations of a directory package's primary (the signature still
// verifies, so only location validation can catch these).
void rewrite_locations(const std::filesystem::path& dir, const std::function<void(nlohmann::json&)>& edit) {
  auto primary = dir / "model.safetensors";
  std::map<std::string, std::string> metadata;
  std::vector<std::pair<TensorInfo, std::vector<std::byte>>> tensors;
  {
    auto file = SafetensorsFile::open(primary);
    metadata = file->metadata();
    for (const auto& t : file->tensors()) {
      auto bytes = file->tensor(t.name).bytes;
      tensors.push_back({t, {bytes.begin(), bytes.end()}});
    }
  }
  auto locations = nlohmann::json::parse(metadata["flare.locations"]);
  edit(locations);
  metadata["flare.locations"] = locations.dump();
  std::filesystem::remove(primary);
  SafetensorsWriter writer(primary, metadata);
  for (const auto& [t, bytes] : tensors) writer.declare(t.name, t.dtype, t.shape);
  for (const auto& [t, bytes] : tensors) writer.write(bytes);
  writer.finish();
}

TEST_F(PackageTest, HostileLocationsAreRejected) {
  struct Case {
    std::string what;
    std::function<void(nlohmann::json&, const std::string& id)> edit;
  };
  std::vector<Case> cases = {
      {"invalid file", [](auto& j, auto& id) { j[id]["file"] = "../outside.safetensors"; }},
      {"invalid file", [](auto& j, auto& id) { j[id]["file"] = "/etc/passwd.safetensors"; }},
      {"invalid file", [](auto& j, auto& id) { j[id]["file"] = "weights/../../x.safetensors"; }},
      {"invalid file", [](auto& j, auto& id) { j[id]["file"] = "weights/layer-001"; }},
      {"not a payload tensor", [](auto& j, auto& id) { j[id]["offset"] = j[id]["offset"].template get<std::uint64_t>() + 1000000; }},
      {"not a payload tensor", [](auto& j, auto& id) { j[id]["offset"] = 0; }},
      {"not a payload tensor", [](auto& j, auto& id) { j[id]["offset"] = 18446744073709551615ull; }},
      {"negative range", [](auto& j, auto& id) { j[id]["offset"] = -8; }},
      {"has length", [](auto& j, auto& id) { j[id]["length"] = 5; }},
      {"has no location", [](auto& j, auto& id) { j.erase(id); }},
      {"absent from the manifest", [](auto& j, auto& id) { j[std::string(64, 'a')] = j[id]; }},
      {"malformed", [](auto& j, auto& id) { j[id]["file"] = 7; }},
  };
  for (const auto& c : cases) {
    std::filesystem::remove_all(dir_ / "d");
    write_test_package(dir_ / "d", PackageForm::directory, key_);
    std::string id;
    {
      auto package = Package::open(dir_ / "d");
      for (const auto& payload : package->manifest().payloads()) {
        if (payload.name() == "weights/layer-001") id = payload.id();
      }
    }
    rewrite_locations(dir_ / "d", [&](nlohmann::json& j) { c.edit(j, id); });
    try {
      verify_fully(dir_ / "d", key_);
      ADD_FAILURE() << "accepted: " << c.what;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(c.what), std::string::npos) << e.what();
    }
  }
}

TEST_F(PackageTest, SymlinkedCompanionIsRejected) {
  write_test_package(dir_ / "d", PackageForm::directory, key_);
  auto companion = dir_ / "d" / "weights" / "layer-001.safetensors";
  std::filesystem::rename(companion, dir_ / "elsewhere.safetensors");
  std::filesystem::create_symlink(dir_ / "elsewhere.safetensors", companion);
  EXPECT_THROW(verify_fully(dir_ / "d", key_), Error);
}

TEST_F(PackageTest, BuilderRejectsBadNames) {
  PackageBuilder builder(testing::test_manifest());
  EXPECT_THROW(builder.add_payload("../x", proto::PAYLOAD_ROLE_WEIGHT, {}), Error);
  EXPECT_THROW(builder.add_payload("/abs", proto::PAYLOAD_ROLE_WEIGHT, {}), Error);
  EXPECT_THROW(builder.add_payload("a//b", proto::PAYLOAD_ROLE_WEIGHT, {}), Error);
  EXPECT_THROW(builder.add_payload("__metadata__", proto::PAYLOAD_ROLE_WEIGHT, {}), Error);
  EXPECT_THROW(builder.add_payload("a b", proto::PAYLOAD_ROLE_WEIGHT, {}), Error);
  EXPECT_TRUE(valid_payload_name("deployments/tp2/rank-1/graphs"));
}

TEST_F(PackageTest, NotAPackage) {
  SafetensorsWriter(dir_ / "plain.safetensors", {}).finish();
  try {
    Package::open(dir_ / "plain.safetensors");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("not a Flare package"), std::string::npos);
  }
  EXPECT_THROW(Package::open(dir_ / "missing"), Error);
}

}  // namespace
}  // namespace flare::package
