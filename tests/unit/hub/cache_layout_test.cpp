// The hub cache layout: folder names, refs (validated, atomically replaced), relative snapshot
// links, content ids of blobs, and the chunk plan of a transfer.
#include "hub/cache_layout.h"

#include <unistd.h>

#include <fstream>

#include <gtest/gtest.h>

#include "common/error.h"
#include "hub/blob_transfer.h"

namespace flare::hub {
namespace {

namespace fs = std::filesystem;

class CacheLayoutTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() / ("flare-hub-cache-" + std::to_string(::getpid()) + "-" +
                                         ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(root_);
    fs::create_directories(root_);
  }
  void TearDown() override { fs::remove_all(root_); }
  void write(const fs::path& path, const std::string& text) {
    fs::create_directories(path.parent_path());
    std::ofstream(path, std::ios::binary) << text;
  }
  fs::path root_;
};

const std::string kCommit = "0123456789abcdef0123456789abcdef01234567";

TEST_F(CacheLayoutTest, FolderNames) {
  EXPECT_EQ(repo_folder_name("Qwen/Qwen3-8B"), "models--Qwen--Qwen3-8B");
  const CacheLayout cache(root_, "org/name");
  EXPECT_EQ(cache.blob("abc"), root_ / "models--org--name" / "blobs" / "abc");
  EXPECT_EQ(cache.lock_file("abc"), root_ / ".locks" / "models--org--name" / "abc.lock");
  // Partial files live outside blobs/ and snapshots/.
  EXPECT_EQ(cache.partial_file("abc").parent_path(), root_ / ".flare-partial" / "models--org--name");
}

TEST_F(CacheLayoutTest, RefsAreValidatedAndReplaced) {
  const CacheLayout cache(root_, "org/name");
  EXPECT_FALSE(cache.read_ref("main"));
  cache.write_ref("main", kCommit);
  std::ifstream in(root_ / "models--org--name" / "refs" / "main");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(text, kCommit);  // no trailing newline, as other tools write it
  EXPECT_EQ(cache.read_ref("main"), kCommit);
  cache.write_ref("refs/pr/1", kCommit);
  EXPECT_EQ(cache.read_ref("refs/pr/1"), kCommit);
  EXPECT_FALSE(cache.read_ref("../../etc/passwd"));
  write(root_ / "models--org--name" / "refs" / "bad", "not a commit\n");
  EXPECT_FALSE(cache.read_ref("bad"));
  write(root_ / "models--org--name" / "refs" / "spaced", kCommit + "\n");
  EXPECT_EQ(cache.read_ref("spaced"), kCommit);
  cache.write_ref("../escape", kCommit);  // refused silently: never written outside refs/
  EXPECT_FALSE(fs::exists(root_ / "models--org--name" / "escape"));
}

TEST_F(CacheLayoutTest, SnapshotLinksAreRelativeAndReplaceable) {
  const CacheLayout cache(root_, "org/name");
  write(cache.blob("blob1"), "one");
  write(cache.blob("blob2"), "two");
  cache.link_snapshot_file(kCommit, "config.json", "blob1");
  cache.link_snapshot_file(kCommit, "sub/dir/file.json", "blob2");
  EXPECT_EQ(fs::read_symlink(cache.snapshot(kCommit) / "config.json"), "../../blobs/blob1");
  EXPECT_EQ(fs::read_symlink(cache.snapshot(kCommit) / "sub/dir/file.json"), "../../../../blobs/blob2");
  EXPECT_TRUE(cache.snapshot_file_present(kCommit, "sub/dir/file.json"));
  cache.link_snapshot_file(kCommit, "config.json", "blob2");
  EXPECT_EQ(fs::read_symlink(cache.snapshot(kCommit) / "config.json"), "../../blobs/blob2");
  EXPECT_FALSE(cache.snapshot_file_present(kCommit, "missing.json"));
  cache.link_snapshot_file(kCommit, "dangling.json", "absent-blob");
  EXPECT_FALSE(cache.snapshot_file_present(kCommit, "dangling.json"));
}

TEST_F(CacheLayoutTest, ContentIds) {
  write(root_ / "hello", "hello");
  EXPECT_EQ(content_id_of_file((root_ / "hello").string(), true), "b6fc4c620b67d95f953a5c1c1230aaab5db5a1b0");
  EXPECT_EQ(content_id_of_file((root_ / "hello").string(), false),
            "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824");
  write(root_ / "empty", "");
  EXPECT_EQ(content_id_of_file((root_ / "empty").string(), true), "e69de29bb2d1d6434b8b29ae775ad8c2e48c5391");
  EXPECT_THROW(content_id_of_file((root_ / "absent").string(), false), Error);
}

TEST(BlobTransfer, ChunkPlan) {
  TransferOptions options;  // 8 connections, 1..64 MiB chunks
  EXPECT_EQ(chunk_bytes_for(100, options), 1ull << 20);
  EXPECT_EQ(chunk_bytes_for(32ull << 20, options), 1ull << 20);
  EXPECT_EQ(chunk_bytes_for((32ull << 20) + 1, options), 2ull << 20);
  EXPECT_EQ(chunk_bytes_for(4ull << 30, options), 64ull << 20);
  EXPECT_EQ(chunk_bytes_for(100ull << 30, options), 64ull << 20);
  options.n_connections = 1;
  EXPECT_EQ(chunk_bytes_for(40ull << 20, options), 10ull << 20);
}

}  // namespace
}  // namespace flare::hub
