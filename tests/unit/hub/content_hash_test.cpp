// The hash that follows a transfer: chunks written in any order, in pieces, some kept from an
// earlier run, give the same content id as hashing the finished file; a rewrite of hashed bytes
// makes it give none (the caller then reads the file back).
#include "hub/content_hash.h"

#include <fcntl.h>
#include <unistd.h>

#include <filesystem>
#include <random>
#include <thread>

#include <gtest/gtest.h>

namespace flare::hub {
namespace {

namespace fs = std::filesystem;

class FollowingHasherTest : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = fs::temp_directory_path() / ("flare-following-hash-" + std::to_string(::getpid()) + "-" +
                                         ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::mt19937 random(7);
    bytes_.resize(kSize);
    for (auto& b : bytes_) b = static_cast<char>(random());
    fd_ = ::open(path_.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    ASSERT_GE(fd_, 0);
    ASSERT_EQ(::ftruncate(fd_, kSize), 0);
  }
  void TearDown() override {
    ::close(fd_);
    fs::remove(path_);
  }
  // Writes bytes [first, last) of the file and reports them for `chunk`.
  void write(FollowingHasher* hasher, std::size_t chunk, std::uint64_t first, std::uint64_t last) {
    ASSERT_EQ(::pwrite(fd_, bytes_.data() + first, last - first, static_cast<off_t>(first)),
              static_cast<ssize_t>(last - first));
    if (hasher) hasher->written(chunk, last);
  }
  static constexpr std::uint64_t kSize = (5u << 20) + 12345;  // six chunks, the last one short
  static constexpr std::uint64_t kChunk = 1u << 20;
  fs::path path_;
  std::string bytes_;
  int fd_ = -1;
};

TEST_F(FollowingHasherTest, ChunksOutOfOrderAndInPiecesMatchTheFileHash) {
  for (bool git_blob : {false, true}) {
    const std::vector<char> done(6, 0);
    FollowingHasher hasher(fd_, git_blob, kSize, kChunk, done);
    // Chunks land last-first, each in three pieces, with pauses so the hasher waits mid-file.
    for (int chunk = 5; chunk >= 0; --chunk) {
      const std::uint64_t first = chunk * kChunk, last = std::min(kSize, first + kChunk);
      const std::uint64_t third = (last - first) / 3;
      write(&hasher, chunk, first, first + third);
      std::this_thread::sleep_for(std::chrono::milliseconds(3));
      write(&hasher, chunk, first + third, first + 2 * third);
      write(&hasher, chunk, first + 2 * third, last);
    }
    const auto followed = hasher.finish();
    ASSERT_TRUE(followed.has_value());
    EXPECT_EQ(*followed, content_id_of_file(path_.string(), git_blob));
  }
}

TEST_F(FollowingHasherTest, ChunksKeptFromAnEarlierRunAreHashedFromTheFile) {
  write(nullptr, 0, 0, kSize);  // the earlier run wrote everything; chunks 1 and 4 were recorded done
  std::vector<char> done(6, 0);
  done[1] = done[4] = 1;
  FollowingHasher hasher(fd_, false, kSize, kChunk, done);
  for (std::size_t chunk : {0u, 2u, 3u, 5u}) write(&hasher, chunk, chunk * kChunk, std::min(kSize, (chunk + 1) * kChunk));
  EXPECT_EQ(hasher.finish(), content_id_of_file(path_.string(), false));
}

TEST_F(FollowingHasherTest, FinishTreatsEveryChunkAsWritten) {
  // The transfer finished every chunk; its last reports may lag behind (they are only progress).
  write(nullptr, 0, 0, kSize);
  FollowingHasher hasher(fd_, false, kSize, kChunk, std::vector<char>(6, 0));
  EXPECT_EQ(hasher.finish(), content_id_of_file(path_.string(), false));
}

TEST_F(FollowingHasherTest, InvalidatedGivesNothing) {
  FollowingHasher hasher(fd_, false, kSize, kChunk, std::vector<char>(6, 0));
  write(&hasher, 0, 0, kChunk);
  hasher.invalidate();  // a server restarted the body over bytes already hashed
  write(nullptr, 0, 0, kSize);
  EXPECT_FALSE(hasher.finish().has_value());
}

TEST_F(FollowingHasherTest, EmptyFile) {
  ASSERT_EQ(::ftruncate(fd_, 0), 0);
  FollowingHasher sha(fd_, false, 0, kChunk, {});
  EXPECT_EQ(sha.finish(), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  FollowingHasher git(fd_, true, 0, kChunk, {});
  EXPECT_EQ(git.finish(), "e69de29bb2d1d6434b8b29ae775ad8c2e48c5391");
}

}  // namespace
}  // namespace flare::hub
