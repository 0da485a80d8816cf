// Trust: signer resolution from profiles and the trust store, typed acceptance, the unattended
// approval pair, remembered acceptance and revocation.
#include "package/trust.h"

#include <cstdio>

#include "common/error.h"
#include "test_package.h"

namespace flare::package {
namespace {

class TrustTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::make_temp_dir("trust");
    testing::write_test_package(dir_ / "p.safetensors", PackageForm::packed, key_);
    PublisherProfile profile{kDevelopmentNamespace, kDevelopmentSource, {key_.public_key()}};
    write_file_atomic(dir_ / "publisher.json", render_publisher_profile(profile));
    options_.trust_store = dir_ / "trust.toml";
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::filesystem::path dir_;
  SigningKey key_ = SigningKey::generate();
  TrustOptions options_;
};

TEST_F(TrustTest, NoKeyMeansNoLoad) {
  auto package = Package::open(dir_ / "p.safetensors");
  EXPECT_THROW(resolve_signer(*package, options_), Error);
}

TEST_F(TrustTest, TypedAcceptanceIsRememberedAndRevocable) {
  auto package = Package::open(dir_ / "p.safetensors");
  options_.publisher_keys = {dir_ / "publisher.json"};
  auto signer = resolve_signer(*package, options_);
  EXPECT_FALSE(signer.remembered);
  EXPECT_THROW(ensure_accepted(*package, signer, options_, false, stdin, stdout), Error);  // not a terminal
  std::string typed_wrong = "local-dev\n";
  std::FILE* in = fmemopen(typed_wrong.data(), typed_wrong.size(), "r");
  char out_buffer[4096] = {};
  std::FILE* out = fmemopen(out_buffer, sizeof(out_buffer), "w");
  EXPECT_THROW(ensure_accepted(*package, signer, options_, true, in, out), Error);
  std::fclose(in);
  std::fclose(out);
  std::string typed = "local-development\n";
  in = fmemopen(typed.data(), typed.size(), "r");
  out = fmemopen(out_buffer, sizeof(out_buffer), "w");
  ensure_accepted(*package, signer, options_, true, in, out);
  std::fclose(in);
  std::fclose(out);
  std::string shown(out_buffer);
  EXPECT_NE(shown.find(key_.fingerprint()), std::string::npos);
  EXPECT_NE(shown.find("apache-2.0"), std::string::npos);
  // Remembered: no profile needed any more.
  options_.publisher_keys.clear();
  auto again = resolve_signer(*package, options_);
  EXPECT_TRUE(again.remembered);
  auto store = TrustStore::load(dir_ / "trust.toml");
  EXPECT_EQ(store.revoke(key_.fingerprint()), 1u);
  store.save();
  EXPECT_THROW(resolve_signer(*package, options_), Error);
}

TEST_F(TrustTest, UnattendedPairMustMatchExactly) {
  auto package = Package::open(dir_ / "p.safetensors");
  options_.publisher_keys = {dir_ / "publisher.json"};
  auto signer = resolve_signer(*package, options_);
  options_.approve_key = key_.fingerprint();
  EXPECT_THROW(ensure_accepted(*package, signer, options_, false, stdin, stdout), Error);  // pair incomplete
  options_.accept_publisher = "someone-else";
  EXPECT_THROW(ensure_accepted(*package, signer, options_, false, stdin, stdout), Error);
  options_.accept_publisher = kDevelopmentNamespace;
  ensure_accepted(*package, signer, options_, false, stdin, stdout);
  EXPECT_EQ(TrustStore::load(dir_ / "trust.toml").entries().size(), 1u);
}

TEST_F(TrustTest, ProfileForAnotherNamespaceIsRejected) {
  PublisherProfile profile{"impostor", "x", {key_.public_key()}};
  write_file_atomic(dir_ / "impostor.json", render_publisher_profile(profile));
  options_.publisher_keys = {dir_ / "impostor.json"};
  auto package = Package::open(dir_ / "p.safetensors");
  EXPECT_THROW(resolve_signer(*package, options_), Error);
}

TEST(SigningKeyTest, EncryptedKeyRoundTripAndPermissions) {
  auto dir = testing::make_temp_dir("keys");
  auto key = SigningKey::generate();
  key.save(dir / "k.pem", "secret");
  EXPECT_TRUE(key_file_is_encrypted(dir / "k.pem"));
  auto loaded = SigningKey::load(dir / "k.pem", [](const auto&) { return std::string("secret"); });
  EXPECT_EQ(loaded.fingerprint(), key.fingerprint());
  EXPECT_THROW(SigningKey::load(dir / "k.pem", [](const auto&) { return std::string("wrong"); }), Error);
  std::filesystem::permissions(dir / "k.pem", std::filesystem::perms::group_read, std::filesystem::perm_options::add);
  EXPECT_THROW(SigningKey::load(dir / "k.pem", [](const auto&) { return std::string("secret"); }), Error);
  EXPECT_THROW(key.save(dir / "k.pem", ""), Error);  // refuses an existing file
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace flare::package
