// The on-disk kernel cache (helios/kernel_cache.h): keys, hits and misses, atomic entries, and
// damaged or foreign entries treated as misses. Needs no GPU and no NVRTC.
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <random>

#include <gtest/gtest.h>

#include "common/error.h"
#include "helios/kernel_cache.h"

namespace flare::helios {
namespace {

namespace fs = std::filesystem;

class TempDir {
 public:
  TempDir() {
    path_ = fs::temp_directory_path() /
            ("flare-kernel-cache-" + std::to_string(::getpid()) + "-" + std::to_string(std::random_device{}()));
    fs::create_directories(path_);
  }
  ~TempDir() { fs::remove_all(path_); }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

std::string sample_key(std::string_view source = "source") {
  const std::vector<std::string> options = {"-std=c++17", "-DHEAD_DIM=128"};
  return KernelCache::key(source, "sm_90", options, "nvrtc 13.0");
}

TEST(KernelCache, KeyIsHexSha256AndDependsOnEveryField) {
  const std::vector<std::string> options = {"-std=c++17", "-DHEAD_DIM=128"};
  const std::string base = KernelCache::key("src", "sm_90", options, "nvrtc 13.0");
  EXPECT_EQ(base.size(), 64u);
  EXPECT_EQ(base.find_first_not_of("0123456789abcdef"), std::string::npos);
  EXPECT_EQ(base, KernelCache::key("src", "sm_90", options, "nvrtc 13.0"));
  EXPECT_NE(base, KernelCache::key("src2", "sm_90", options, "nvrtc 13.0"));
  EXPECT_NE(base, KernelCache::key("src", "sm_80", options, "nvrtc 13.0"));
  EXPECT_NE(base, KernelCache::key("src", "sm_90", options, "nvrtc 13.1"));
  const std::vector<std::string> other = {"-std=c++17", "-DHEAD_DIM=64"};
  EXPECT_NE(base, KernelCache::key("src", "sm_90", other, "nvrtc 13.0"));
  // Field boundaries matter: moving bytes between fields changes the key.
  const std::vector<std::string> split = {"-std=c++17-DHEAD_DIM=128"};
  EXPECT_NE(base, KernelCache::key("src", "sm_90", split, "nvrtc 13.0"));
  EXPECT_NE(KernelCache::key("ab", "c", {}, "v"), KernelCache::key("a", "bc", {}, "v"));
}

TEST(KernelCache, MissBuildsOnceThenHits) {
  TempDir dir;
  KernelCache cache(dir.path() / "kernels");  // created on the first store
  int n_built = 0;
  const auto build = [&] {
    ++n_built;
    return std::string("\x7f" "ELF binary\0bytes", 16);
  };
  const std::string key = sample_key();
  const std::string first = cache.get_or_build(key, build);
  const std::string second = cache.get_or_build(key, build);
  EXPECT_EQ(first, second);
  EXPECT_EQ(first.size(), 16u);
  EXPECT_EQ(n_built, 1);
  EXPECT_EQ(cache.n_misses(), 1);
  EXPECT_EQ(cache.n_hits(), 1);
  EXPECT_EQ(cache.n_builds(), 1);

  KernelCache reopened(dir.path() / "kernels");
  EXPECT_EQ(reopened.get_or_build(key, build), first);
  EXPECT_EQ(reopened.n_builds(), 0);
  EXPECT_EQ(reopened.n_hits(), 1);
  EXPECT_EQ(n_built, 1);
}

TEST(KernelCache, StoreLeavesOnlyTheEntry) {
  TempDir dir;
  KernelCache cache(dir.path());
  const std::string key = sample_key();
  cache.store(key, "payload");
  cache.store(key, "payload");  // rewriting one key is harmless
  int n_files = 0;
  for (const auto& e : fs::recursive_directory_iterator(dir.path())) n_files += e.is_regular_file() ? 1 : 0;
  EXPECT_EQ(n_files, 1);
  EXPECT_TRUE(fs::exists(cache.entry_path(key)));
  EXPECT_EQ(cache.load(key).value(), "payload");
}

TEST(KernelCache, DamagedOrForeignEntriesAreMissesAndGetRewritten) {
  TempDir dir;
  KernelCache cache(dir.path());
  const std::string key = sample_key();
  cache.store(key, "the real binary");
  const fs::path path = cache.entry_path(key);
  const auto write = [&](const std::string& bytes) { std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes; };

  std::string original;
  {
    std::ifstream in(path, std::ios::binary);
    original.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  std::string flipped = original;
  flipped.back() ^= 1;
  for (const std::string& bad : {std::string(), std::string("FLKC"), original.substr(0, original.size() - 3), flipped,
                                 std::string("not a cache entry at all, just some bytes"), "XXXX" + original.substr(4)}) {
    write(bad);
    EXPECT_FALSE(cache.load(key).has_value()) << "accepted " << bad.size() << " damaged bytes";
  }
  EXPECT_EQ(cache.n_damaged(), 6);
  EXPECT_EQ(cache.n_hits(), 0);
  int n_built = 0;
  EXPECT_EQ(cache.get_or_build(key, [&] { return ++n_built, std::string("the real binary"); }), "the real binary");
  EXPECT_EQ(n_built, 1);
  EXPECT_EQ(cache.load(key).value(), "the real binary");
}

TEST(KernelCache, MalformedKeysAreRejected) {
  TempDir dir;
  KernelCache cache(dir.path());
  for (const std::string& key : {std::string(), std::string("../../etc/passwd"), std::string(64, 'g'),
                                 std::string(63, 'a'), std::string(64, 'A')}) {
    EXPECT_THROW(cache.load(key), Error) << key;
    EXPECT_THROW(cache.store(key, "x"), Error) << key;
  }
}

TEST(KernelCache, UnwritableFolderIsAnError) {
  TempDir dir;
  const fs::path blocker = dir.path() / "file";
  std::ofstream(blocker) << "not a folder";
  KernelCache cache(blocker / "kernels");
  EXPECT_THROW(cache.store(sample_key(), "x"), Error);
  EXPECT_FALSE(cache.load(sample_key()).has_value());
}

}  // namespace
}  // namespace flare::helios
