// Executable images in packages: zstd round trips, bounded decompression of hostile frames, and the
// manifest catalog surviving write, open and layout checks in both package forms.
#include <random>

#include <gtest/gtest.h>

#include "common/error.h"
#include "package/compression.h"
#include "package/executables.h"
#include "test_package.h"

namespace flare::package {
namespace {

std::span<const std::byte> span_of(const std::vector<std::byte>& v) { return {v.data(), v.size()}; }

TEST(Compression, RoundTripsAndChecksTheDeclaredSize) {
  std::string text;
  for (int i = 0; i < 10000; ++i) text += "cubin section " + std::to_string(i % 97) + "\n";
  const auto frame = zstd_compress(text);
  EXPECT_LT(frame.size(), text.size() / 4);
  EXPECT_EQ(zstd_decompress(span_of(frame), text.size(), "t"), text);
  EXPECT_THROW(zstd_decompress(span_of(frame), text.size() - 1, "t"), Error);  // larger than the caller allows
  EXPECT_EQ(zstd_decompress(span_of(zstd_compress("")), 0, "t"), "");
}

TEST(Compression, RejectsHostileFrames) {
  const auto frame = zstd_compress(std::string(5000, 'x') + "tail");
  std::vector<std::byte> truncated(frame.begin(), frame.end() - 3);
  EXPECT_THROW(zstd_decompress(span_of(truncated), 1 << 20, "t"), Error);
  std::vector<std::byte> trailing = frame;
  trailing.push_back(std::byte{0});
  EXPECT_THROW(zstd_decompress(span_of(trailing), 1 << 20, "t"), Error);
  EXPECT_THROW(zstd_decompress({}, 1 << 20, "t"), Error);
  std::mt19937 rng(7);
  for (int trial = 0; trial < 500; ++trial) {
    std::vector<std::byte> corrupt = frame;
    corrupt[rng() % corrupt.size()] ^= std::byte(1u << (rng() % 8));
    try {
      const std::string out = zstd_decompress(span_of(corrupt), 1 << 20, "t");
      EXPECT_LE(out.size(), 1u << 20);  // a flip in literal bytes may still decode; never beyond the bound
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ExitCode::failure);
    }
  }
}

class ExecutablesTest : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = testing::make_temp_dir("exe"); }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::filesystem::path dir_;
  SigningKey key_ = SigningKey::generate();
};

TEST_F(ExecutablesTest, CatalogSurvivesBothForms) {
  const std::map<std::string, std::string> images = {
      {"attention -DHEAD_DIM=128", std::string(3000, 'a') + "attention image"},
      {"rms_norm", std::string(100, '\x7f') + std::string("\0\1\2", 3)},
      {"gemm-tuning", "table"}};
  for (auto form : {PackageForm::packed, PackageForm::directory}) {
    const auto path = dir_ / (form == PackageForm::packed ? "p.safetensors" : "d");
    PackageBuilder builder(testing::test_manifest());
    builder.manifest().set_target("sm_90");
    add_executables(builder, images, "kernels");
    builder.write(path, form, key_);
    auto pkg = Package::open(path);
    pkg->check_layout();
    pkg->verify_payloads(nullptr);
    EXPECT_EQ(pkg->manifest().executables_size(), 3);
    EXPECT_EQ(read_executables(*pkg), images);
    for (const auto& payload : pkg->manifest().payloads()) {
      EXPECT_EQ(payload.role(), proto::PAYLOAD_ROLE_EXECUTABLE);
      EXPECT_EQ(payload.compression(), "zstd");
      EXPECT_TRUE(payload.name().starts_with("kernels/")) << payload.name();
    }
  }
}

TEST_F(ExecutablesTest, MissingOrMisdeclaredImagesAreInputErrors) {
  PackageBuilder builder(testing::test_manifest());
  add_executables(builder, {{"rms_norm", "image bytes"}}, "kernels");
  auto* stray = builder.manifest().add_executables();
  stray->set_key("swiglu");
  stray->set_payload("kernels/absent");
  builder.write(dir_ / "p.safetensors", PackageForm::packed, key_);
  auto pkg = Package::open(dir_ / "p.safetensors");
  pkg->check_layout();
  try {
    read_executables(*pkg);
    FAIL() << "a missing executable payload was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("swiglu"), std::string::npos) << e.what();
  }

  PackageBuilder wrong_size(testing::test_manifest());
  add_executables(wrong_size, {{"rms_norm", "image bytes"}}, "kernels");
  wrong_size.manifest().mutable_executables(0)->set_uncompressed_bytes(5);
  wrong_size.write(dir_ / "q.safetensors", PackageForm::packed, key_);
  auto pkg2 = Package::open(dir_ / "q.safetensors");
  pkg2->check_layout();
  EXPECT_THROW(read_executables(*pkg2), Error);
}

}  // namespace
}  // namespace flare::package
