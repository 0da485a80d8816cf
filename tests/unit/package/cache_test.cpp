// Model cache: publish, dedup through blobs, select/remove refusals, gc semantics, killed
// publishes, and concurrent publish/remove/gc while an entry is leased.
#include "package/cache.h"

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/error.h"
#include "test_package.h"

namespace flare::package {
namespace {

using testing::make_temp_dir;

class CacheTest : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = make_temp_dir("cache"); }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  EntryRef publish(const std::string& version, std::size_t weight_bytes = 1000, bool select = true,
                   const std::string& model = "demo") {
    PackageBuilder builder(testing::test_manifest(model));
    builder.manifest().set_version(version);
    std::vector<std::byte> shared(4096, std::byte{9}), own(weight_bytes, std::byte{static_cast<unsigned char>(version.size())});
    builder.add_payload("weights/layer-000", proto::PAYLOAD_ROLE_WEIGHT, shared);
    builder.add_payload("weights/layer-001", proto::PAYLOAD_ROLE_WEIGHT, own);
    builder.add_payload("frontend/tokenizer.json", proto::PAYLOAD_ROLE_FRONTEND, testing::bytes_of("{}"));
    ModelCache cache(dir_);
    return cache.publish_package(builder, key_, select);
  }
  std::size_t n_blobs() const {
    std::size_t n = 0;
    for ([[maybe_unused]] const auto& item : std::filesystem::directory_iterator(dir_ / "blobs")) ++n;
    return n;
  }

  std::filesystem::path dir_;
  SigningKey key_ = SigningKey::generate();
};

TEST_F(CacheTest, PublishSharesBlobsAndVerifies) {
  auto a = publish("v1", 1000);
  auto b = publish("v2", 2000);
  ModelCache cache(dir_);
  EXPECT_EQ(cache.versions("demo"), (std::vector<std::string>{"v1", "v2"}));
  EXPECT_EQ(cache.selected_version("demo"), "v2");
  EXPECT_EQ(n_blobs(), 3u);  // shared layer-000 once, two distinct layer-001
  struct stat s1 {}, s2 {};
  ::stat((cache.entry_path(a) / "weights/layer-000.safetensors").c_str(), &s1);
  ::stat((cache.entry_path(b) / "weights/layer-000.safetensors").c_str(), &s2);
  EXPECT_EQ(s1.st_ino, s2.st_ino);
  EXPECT_EQ(s1.st_nlink, 3u);
  auto package = Package::open(cache.entry_path(a));
  package->verify_signature(key_.public_key());
  package->check_layout();
  package->verify_payloads(nullptr);
  EXPECT_THROW(publish("v1"), Error);  // already published
  EXPECT_TRUE(std::filesystem::is_empty(dir_ / "staging"));
}

TEST_F(CacheTest, ListReportsStorageFigures) {
  publish("v1", 1000, true);
  publish("v2", 3000, false);
  ModelCache cache(dir_);
  auto entries = cache.list("");
  ASSERT_EQ(entries.size(), 2u);
  const auto& v1 = entries[0];
  const auto& v2 = entries[1];
  EXPECT_TRUE(v1.selected);
  EXPECT_FALSE(v2.selected);
  EXPECT_EQ(v1.storage.logical_bytes, 4096u + 1000u + 2u);
  EXPECT_FALSE(v1.storage.reclaimable_bytes.has_value());
  EXPECT_NE(v1.storage.reclaimable_note.find("selected default"), std::string::npos);
  ASSERT_TRUE(v2.storage.reclaimable_bytes.has_value());
  EXPECT_GT(v2.storage.disk_logical_bytes, v2.storage.logical_bytes);
  EXPECT_GE(v2.storage.disk_logical_bytes, v2.storage.shared_logical_bytes);
  EXPECT_GT(v2.storage.shared_logical_bytes, 4096u);  // companions are linked to blobs
  {
    auto lease = cache.lease({"demo", "v2"});
    auto leased = cache.list("demo");
    EXPECT_TRUE(leased[1].leased);
    EXPECT_FALSE(leased[1].storage.reclaimable_bytes.has_value());
  }
  EXPECT_TRUE(cache.list("other").empty());
}

TEST_F(CacheTest, SelectRemoveAndRefusals) {
  publish("v1");
  publish("v2");
  ModelCache cache(dir_);
  EXPECT_EQ(cache.resolve("demo").version, "v2");
  cache.select({"demo", "v1"});
  EXPECT_EQ(cache.resolve("demo").version, "v1");
  EXPECT_THROW(cache.select({"demo", "v9"}), Error);
  EXPECT_THROW(cache.resolve("demo@v9"), Error);
  EXPECT_THROW(cache.resolve("nothing"), Error);
  EXPECT_THROW(parse_entry_ref("demo@../x", true), Error);
  EXPECT_THROW(parse_entry_ref("demo", true), Error);
  // The selected default needs --clear-default.
  EXPECT_THROW(cache.remove({"demo", "v1"}, false), Error);
  {
    auto lease = cache.lease({"demo", "v2"});
    try {
      cache.remove({"demo", "v2"}, false);
      FAIL();
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("in use"), std::string::npos);
    }
  }
  cache.remove({"demo", "v2"}, false);
  EXPECT_EQ(cache.versions("demo"), (std::vector<std::string>{"v1"}));
  EXPECT_EQ(cache.selected_version("demo"), "v1");  // never silently replaced
  cache.remove({"demo", "v1"}, true);
  EXPECT_FALSE(cache.selected_version("demo").has_value());
  EXPECT_TRUE(cache.model_keys().empty());
}

TEST_F(CacheTest, GcReclaimsOnlyUnreferencedObjects) {
  publish("v1", 1000);
  publish("v2", 2000);
  ModelCache cache(dir_);
  auto report = cache.gc();
  EXPECT_EQ(report.n_blobs_removed, 0u);
  EXPECT_EQ(report.n_staging_removed, 0u);
  cache.remove({"demo", "v1"}, false);
  report = cache.gc();
  EXPECT_EQ(report.n_blobs_removed, 1u);  // v1's own layer-001; the shared one stays
  EXPECT_GT(report.reclaimed_bytes, 0u);
  EXPECT_EQ(n_blobs(), 2u);
  auto package = Package::open(cache.entry_path({"demo", "v2"}));
  package->check_layout();
  package->verify_payloads(nullptr);
}

TEST_F(CacheTest, KilledPublishLeavesOnlyStagingThatGcReclaims) {
  pid_t child = ::fork();
  if (child == 0) {
    ModelCache cache(dir_);
    auto staging = cache.begin_staging();
    PackageBuilder builder(testing::test_manifest());
    builder.add_payload("weights/layer-000", proto::PAYLOAD_ROLE_WEIGHT, std::vector<std::byte>(5000));
    builder.write(staging.path() / "package", PackageForm::directory, key_);
    ::_exit(0);  // dies before publishing: the staging tree stays, its lock is released
  }
  int status = 0;
  ::waitpid(child, &status, 0);
  ModelCache cache(dir_);
  EXPECT_TRUE(cache.model_keys().empty());
  EXPECT_FALSE(std::filesystem::is_empty(dir_ / "staging"));
  // A live writer's staging tree is left alone.
  auto live = cache.begin_staging();
  auto report = cache.gc();
  EXPECT_EQ(report.n_staging_removed, 1u);
  EXPECT_EQ(report.n_staging_in_use, 1u);
  EXPECT_GT(report.reclaimed_bytes, 5000u);
  EXPECT_TRUE(std::filesystem::exists(live.path()));
}

// Children publish, remove and collect concurrently while the parent leases one entry: the
// leased entry must stay complete and verifiable throughout.
TEST_F(CacheTest, ConcurrentPublishRemoveGcNeverDeletesLeasedEntries) {
  auto kept = publish("kept", 1000);
  ModelCache cache(dir_);
  auto lease = cache.lease(kept);
  std::vector<pid_t> children;
  for (int c = 0; c < 3; ++c) {
    pid_t child = ::fork();
    if (child == 0) {
      int failures = 0;
      for (int i = 0; i < 6; ++i) {
        try {
          ModelCache worker(dir_);
          if (c == 0) publish(fmt::format("p{}", i), 1000 + i, false);
          if (c == 1) worker.gc();
          if (c == 2) {
            for (const auto& v : worker.versions("demo")) {
              try {
                worker.remove({"demo", v}, false);
              } catch (const Error&) {
              }
            }
          }
        } catch (const Error& e) {
          ++failures;
        }
      }
      ::_exit(failures == 0 ? 0 : 1);
    }
    children.push_back(child);
  }
  for (int round = 0; round < 10; ++round) {
    auto package = Package::open(cache.entry_path(kept));
    package->check_layout();
    package->verify_payloads(nullptr);
  }
  for (pid_t child : children) {
    int status = 0;
    ::waitpid(child, &status, 0);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
  cache.gc();
  auto package = Package::open(cache.entry_path(kept));
  package->check_layout();
  package->verify_payloads(nullptr);
}

}  // namespace
}  // namespace flare::package
