// First-use publisher acceptance on a real pseudo-terminal: the disclosures (publisher, key
// fingerprint, source, license) appear, typing the exact namespace accepts and is remembered,
// anything else refuses and remembers nothing.
#include <unistd.h>

#include "package/trust.h"
#include "pty_driver.h"
#include "test_package.h"

namespace flare::package {
namespace {

class TrustPtyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::make_temp_dir("trust-pty");
    testing::write_test_package(dir_ / "p.safetensors", PackageForm::packed, key_);
    PublisherProfile profile{kDevelopmentNamespace, kDevelopmentSource, {key_.public_key()}};
    write_file_atomic(dir_ / "publisher.json", render_publisher_profile(profile));
    options_.trust_store = dir_ / "trust.toml";
    options_.publisher_keys = {dir_ / "publisher.json"};
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // What a loading command does: verify, then ask on the terminal when stdin is one.
  int accept_in_child() {
    auto package = Package::open(dir_ / "p.safetensors");
    auto signer = resolve_signer(*package, options_);
    ensure_accepted(*package, signer, options_, ::isatty(STDIN_FILENO) != 0, stdin, stdout);
    std::printf("ACCEPTED\n");
    return 0;
  }

  std::filesystem::path dir_;
  SigningKey key_ = SigningKey::generate();
  TrustOptions options_;
};

TEST_F(TrustPtyTest, TypingTheNamespaceAcceptsAndIsRemembered) {
  auto run = flare::testing::run_in_pty([this] { return accept_in_child(); },
                                        {{"Type the publisher namespace", kDevelopmentNamespace}});
  EXPECT_EQ(run.exit_status, 0) << run.transcript;
  EXPECT_NE(run.transcript.find(key_.fingerprint()), std::string::npos);
  EXPECT_NE(run.transcript.find("apache-2.0"), std::string::npos);
  EXPECT_NE(run.transcript.find(kDevelopmentSource), std::string::npos);
  EXPECT_NE(run.transcript.find("ACCEPTED"), std::string::npos);
  auto store = TrustStore::load(dir_ / "trust.toml");
  ASSERT_EQ(store.entries().size(), 1u);
  EXPECT_EQ(store.entries()[0].identity, "accepted");
  // Remembered: the second load asks nothing and shows no disclosure.
  auto again = flare::testing::run_in_pty([this] { return accept_in_child(); }, {});
  EXPECT_EQ(again.exit_status, 0) << again.transcript;
  EXPECT_EQ(again.transcript.find("Type the publisher namespace"), std::string::npos);
}

TEST_F(TrustPtyTest, WrongNamespaceRefusesAndRemembersNothing) {
  auto run = flare::testing::run_in_pty([this] { return accept_in_child(); },
                                        {{"Type the publisher namespace", "local-developmen"}});
  EXPECT_EQ(run.exit_status, 2) << run.transcript;
  EXPECT_EQ(run.transcript.find("ACCEPTED"), std::string::npos);
  EXPECT_NE(run.transcript.find("not accepted"), std::string::npos);
  EXPECT_TRUE(TrustStore::load(dir_ / "trust.toml").entries().empty());
}

TEST_F(TrustPtyTest, CaseAndSpacingMustMatchExactly) {
  auto run = flare::testing::run_in_pty([this] { return accept_in_child(); },
                                        {{"Type the publisher namespace", " LOCAL-DEVELOPMENT"}});
  EXPECT_EQ(run.exit_status, 2) << run.transcript;
  EXPECT_TRUE(TrustStore::load(dir_ / "trust.toml").entries().empty());
}

TEST_F(TrustPtyTest, EndOfInputRefuses) {
  auto run = flare::testing::run_in_pty([this] { return accept_in_child(); }, {{"Type the publisher namespace", "\x04"}});
  EXPECT_EQ(run.exit_status, 2) << run.transcript;
  EXPECT_TRUE(TrustStore::load(dir_ / "trust.toml").entries().empty());
}

}  // namespace
}  // namespace flare::package
