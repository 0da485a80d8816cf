// `ignition keygen`, `key-password` and `sign`: passphrases typed on a real pseudo-terminal
// (never echoed, refused without a terminal), identity preserved across a passphrase change,
// and promotion of a development package to a publishing identity with the payload bytes intact.
#include "ignition/signing_commands.h"

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>

#include "../package/pty_driver.h"
#include "../package/test_package.h"
#include "common/error.h"
#include "package/trust.h"

namespace flare::ignition {
namespace {

namespace fs = std::filesystem;
using package::testing::make_temp_dir;

constexpr const char* kPassphrase = "correct horse battery";

class SigningCommandsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = make_temp_dir("signing");
    config_ = dir_ / "config.toml";
    std::ofstream(config_) << "";
  }
  void TearDown() override { fs::remove_all(dir_); }

  KeygenOptions keygen_options() const {
    KeygenOptions options;
    options.config = config_;
    options.output = dir_ / "keys" / "signing-key.pem";
    options.namespace_name = "example-publisher";
    options.official_source = "https://huggingface.co/example-publisher/demo";
    return options;
  }

  fs::path dir_, config_;
};

TEST_F(SigningCommandsTest, KeygenAsksTwiceWithoutEchoAndWritesProfile) {
  auto options = keygen_options();
  auto run = flare::testing::run_in_pty([&] { return run_keygen(options); },
                                        {{"New passphrase", kPassphrase}, {"Repeat the passphrase", kPassphrase}});
  ASSERT_EQ(run.exit_status, 0) << run.transcript;
  EXPECT_EQ(run.transcript.find(kPassphrase), std::string::npos) << "the passphrase was echoed";
  const fs::path key = *options.output;
  EXPECT_TRUE(package::key_file_is_encrypted(key));
  struct stat st {};
  ASSERT_EQ(::stat(key.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  auto loaded = package::SigningKey::load(key, [](const fs::path&) { return std::string(kPassphrase); });
  auto profile = package::load_publisher_profile(key.parent_path() / "publisher.json");
  EXPECT_EQ(profile.namespace_name, "example-publisher");
  EXPECT_EQ(profile.official_source, "https://huggingface.co/example-publisher/demo");
  EXPECT_NE(profile.find(loaded.fingerprint()), nullptr);
  EXPECT_NE(run.transcript.find(loaded.fingerprint()), std::string::npos);
  // A second key for the same publisher joins the profile; an existing key is never replaced.
  options.output = dir_ / "keys" / "second.pem";
  run = flare::testing::run_in_pty([&] { return run_keygen(options); },
                                   {{"New passphrase", kPassphrase}, {"Repeat the passphrase", kPassphrase}});
  ASSERT_EQ(run.exit_status, 0) << run.transcript;
  EXPECT_EQ(package::load_publisher_profile(key.parent_path() / "publisher.json").keys.size(), 2u);
  run = flare::testing::run_in_pty([&] { return run_keygen(options); }, {});
  EXPECT_EQ(run.exit_status, 2) << run.transcript;
}

TEST_F(SigningCommandsTest, KeygenRefusesMismatchShortAndReservedNames) {
  auto options = keygen_options();
  auto run = flare::testing::run_in_pty([&] { return run_keygen(options); },
                                        {{"New passphrase", kPassphrase}, {"Repeat the passphrase", "something else"}});
  EXPECT_EQ(run.exit_status, 2) << run.transcript;
  EXPECT_FALSE(fs::exists(*options.output));
  run = flare::testing::run_in_pty([&] { return run_keygen(options); }, {{"New passphrase", "short"}});
  EXPECT_EQ(run.exit_status, 2) << run.transcript;
  EXPECT_FALSE(fs::exists(*options.output));
  options.namespace_name = "local-development";
  EXPECT_THROW(run_keygen(options), Error);
  for (const char* bad : {"", "-lead", "a/b", "has space", "semi;colon"}) {
    EXPECT_FALSE(valid_publisher_namespace(bad)) << bad;
  }
  EXPECT_TRUE(valid_publisher_namespace("example-publisher"));
  options = keygen_options();
  options.official_source.reset();  // neither flag nor [publishing]
  EXPECT_THROW(run_keygen(options), Error);
}

TEST_F(SigningCommandsTest, NoTerminalNoPassphrase) {
  auto options = keygen_options();
  std::fflush(nullptr);
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::setsid();  // no controlling terminal
    int status = 0;
    try {
      status = run_keygen(options);
    } catch (const Error& e) {
      status = e.exit_status();
    }
    _exit(status);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 2);
  EXPECT_FALSE(fs::exists(*options.output));
}

TEST_F(SigningCommandsTest, KeyPasswordKeepsTheIdentity) {
  const fs::path key_path = dir_ / "k.pem";
  auto key = package::SigningKey::generate();
  key.save(key_path, "old passphrase");
  KeyPasswordOptions options{config_, key_path};
  auto wrong = flare::testing::run_in_pty([&] { return run_key_password(options); },
                                          {{"Current passphrase", "not it at all"}});
  EXPECT_EQ(wrong.exit_status, 2) << wrong.transcript;
  auto run = flare::testing::run_in_pty([&] { return run_key_password(options); },
                                        {{"Current passphrase", "old passphrase"},
                                         {"New passphrase", "new passphrase"},
                                         {"Repeat the passphrase", "new passphrase"}});
  ASSERT_EQ(run.exit_status, 0) << run.transcript;
  auto reloaded = package::SigningKey::load(key_path, [](const fs::path&) { return std::string("new passphrase"); });
  EXPECT_EQ(reloaded.fingerprint(), key.fingerprint());
  EXPECT_THROW(package::SigningKey::load(key_path, [](const fs::path&) { return std::string("old passphrase"); }), Error);
  struct stat st {};
  ASSERT_EQ(::stat(key_path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_EQ(std::distance(fs::directory_iterator(dir_), fs::directory_iterator()), 2);  // no temporary left
}

class SignTest : public SigningCommandsTest {
 protected:
  void SetUp() override {
    SigningCommandsTest::SetUp();
    package::testing::write_test_package(dir_ / "dev", package::PackageForm::directory, dev_key_);
    package::PublisherProfile dev{package::kDevelopmentNamespace, package::kDevelopmentSource, {dev_key_.public_key()}};
    package::write_file_atomic(dir_ / "development-publisher.json", package::render_publisher_profile(dev));
    publisher_key_.save(dir_ / "publisher-key.pem", "");
    std::ofstream(config_) << "[publishing]\nsigning_key = \"" << (dir_ / "publisher-key.pem").string()
                           << "\"\nnamespace = \"example-publisher\"\n"
                              "official_source = \"https://huggingface.co/example-publisher/demo\"\n";
  }
  SignOptions sign_options(const std::string& output) const {
    SignOptions options;
    options.config = config_;
    options.package = dir_ / "dev";
    options.output = dir_ / output;
    return options;
  }
  package::SigningKey dev_key_ = package::SigningKey::generate();
  package::SigningKey publisher_key_ = package::SigningKey::generate();
};

TEST_F(SignTest, PromotesADevelopmentPackage) {
  auto options = sign_options("published.safetensors");
  options.form = "packed";
  ASSERT_EQ(run_sign(options), 0);
  auto dev = package::Package::open(dir_ / "dev");
  auto published = package::Package::open(options.output);
  EXPECT_EQ(published->manifest().publisher_namespace(), "example-publisher");
  EXPECT_EQ(published->manifest().official_source(), "https://huggingface.co/example-publisher/demo");
  EXPECT_EQ(published->signature().key_fingerprint, publisher_key_.fingerprint());
  EXPECT_EQ(published->manifest().version(), dev->manifest().version());
  EXPECT_EQ(published->manifest().payloads_size(), dev->manifest().payloads_size());
  EXPECT_EQ(published->form(), package::PackageForm::packed);
  published->verify_signature(publisher_key_.public_key());
  EXPECT_FALSE(published->signature_valid(dev_key_.public_key()));
  published->check_layout();
  published->verify_payloads(nullptr);
  // The source stays a valid development package.
  dev->verify_signature(dev_key_.public_key());
  // A published package is not promoted again.
  auto again = sign_options("again");
  again.package = options.output;
  EXPECT_THROW(run_sign(again), Error);
}

TEST_F(SignTest, RefusesDamagedOrUnverifiablePackages) {
  // A flipped byte in a companion payload.
  fs::path companion;
  for (const auto& entry : fs::recursive_directory_iterator(dir_ / "dev")) {
    if (entry.is_regular_file() && entry.path().filename() != "model.safetensors") companion = entry.path();
  }
  ASSERT_FALSE(companion.empty());
  {
    std::fstream f(companion, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(-1, std::ios::end);
    char c = 0;
    f.get(c);
    f.seekp(-1, std::ios::end);
    f.put(static_cast<char>(c ^ 0x01));
  }
  EXPECT_THROW(run_sign(sign_options("out1")), Error);
  EXPECT_FALSE(fs::exists(dir_ / "out1"));
  // No profile for the development signer.
  fs::remove(dir_ / "development-publisher.json");
  auto options = sign_options("out2");
  options.publisher_keys = {dir_ / "missing.json"};
  EXPECT_THROW(run_sign(options), Error);
  EXPECT_FALSE(fs::exists(dir_ / "out2"));
}

TEST_F(SignTest, NeedsAPublishingIdentity) {
  std::ofstream(config_) << "";
  EXPECT_THROW(run_sign(sign_options("out")), Error);
  EXPECT_FALSE(fs::exists(dir_ / "out"));
}

}  // namespace
}  // namespace flare::ignition
