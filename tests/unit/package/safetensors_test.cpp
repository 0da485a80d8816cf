// safetensors reader/writer: round trips and hostile headers. Every malformed file must be
// rejected with a flare::Error that names the file, never a crash.
#include "package/safetensors.h"

#include <gtest/gtest.h>

#include <fstream>
#include <random>

#include "common/error.h"

namespace flare::package {
namespace {

class SafetensorsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           fmt::format("flare-st-{}-{}", ::getpid(),
                       ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // Writes a raw file: 8-byte little-endian `length` (or the header's size), header, data.
  std::filesystem::path raw(const std::string& header, const std::string& data,
                            std::optional<std::uint64_t> length = std::nullopt) {
    auto path = dir_ / "raw.safetensors";
    std::ofstream out(path, std::ios::binary);
    std::uint64_t n = length.value_or(header.size());
    for (int i = 0; i < 8; ++i) out.put(static_cast<char>((n >> (8 * i)) & 0xff));
    out << header << data;
    return path;
  }

  void expect_rejected(const std::filesystem::path& path, const std::string& fragment) {
    try {
      SafetensorsFile::open(path);
      FAIL() << "accepted a malformed file; expected: " << fragment;
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ExitCode::failure);
      EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(path.string()), std::string::npos) << e.what();
    }
  }

  std::filesystem::path dir_;
};

TEST_F(SafetensorsTest, RoundTrip) {
  auto path = dir_ / "a.safetensors";
  std::vector<float> weights(6);
  for (int i = 0; i < 6; ++i) weights[i] = 0.5f * static_cast<float>(i);
  std::vector<std::uint8_t> bytes = {1, 2, 3};
  {
    SafetensorsWriter writer(path, {{"format", "pt"}, {"flare.x", "y"}});
    writer.declare("w", DType::f32, {2, 3});
    writer.declare("b", DType::u8, {3});
    writer.declare("empty", DType::bf16, {0, 4});
    writer.write(std::as_bytes(std::span(weights)).first(10));
    writer.write(std::as_bytes(std::span(weights)).subspan(10));
    writer.write(std::as_bytes(std::span(bytes)));
    EXPECT_FALSE(std::filesystem::exists(path));
    writer.finish();
  }
  auto file = SafetensorsFile::open(path);
  ASSERT_EQ(file->tensors().size(), 3u);
  EXPECT_EQ(file->metadata().at("format"), "pt");
  EXPECT_EQ(file->metadata().at("flare.x"), "y");
  EXPECT_EQ(file->data_offset_bytes() % 8, 0u);
  auto w = file->tensor("w");
  EXPECT_EQ(w.info->dtype, DType::f32);
  EXPECT_EQ(w.info->shape, (std::vector<std::int64_t>{2, 3}));
  EXPECT_EQ(w.info->n_elements(), 6u);
  ASSERT_EQ(w.bytes.size(), 24u);
  EXPECT_EQ(std::memcmp(w.bytes.data(), weights.data(), 24), 0);
  auto b = file->tensor("b");
  EXPECT_EQ(std::memcmp(b.bytes.data(), bytes.data(), 3), 0);
  EXPECT_EQ(file->find("empty")->size_bytes(), 0u);
  EXPECT_EQ(file->find("missing"), nullptr);
  EXPECT_THROW(file->tensor("missing"), Error);
  EXPECT_EQ(file->file_size_bytes(), std::filesystem::file_size(path));
}

TEST_F(SafetensorsTest, WriterRejectsMisuse) {
  auto path = dir_ / "b.safetensors";
  {
    SafetensorsWriter writer(path, {});
    writer.declare("a", DType::u8, {2});
    EXPECT_THROW(writer.declare("a", DType::u8, {1}), Error);
    EXPECT_THROW(writer.declare("neg", DType::u8, {-1}), Error);
    EXPECT_THROW(writer.declare("big", DType::f64, {1ll << 62, 1ll << 62}), Error);
    std::byte one[1] = {std::byte{7}};
    writer.write(one);
    EXPECT_THROW(writer.declare("late", DType::u8, {1}), Error);
    EXPECT_THROW(writer.finish(), Error);  // one byte missing
    std::byte three[3] = {};
    EXPECT_THROW(writer.write(three), Error);  // beyond the declared tensors
  }
  EXPECT_FALSE(std::filesystem::exists(path));
  for (const auto& entry : std::filesystem::directory_iterator(dir_)) {
    ADD_FAILURE() << "left behind: " << entry.path();
  }
}

TEST_F(SafetensorsTest, EmptyFileWithOnlyMetadata) {
  auto path = dir_ / "m.safetensors";
  SafetensorsWriter writer(path, {{"k", "v"}});
  writer.finish();
  auto file = SafetensorsFile::open(path);
  EXPECT_TRUE(file->tensors().empty());
  EXPECT_EQ(file->metadata().at("k"), "v");
}

TEST_F(SafetensorsTest, RejectsShortFile) {
  auto path = dir_ / "short";
  std::ofstream(path) << "abc";
  expect_rejected(path, "too short");
}

TEST_F(SafetensorsTest, RejectsHugeHeaderLength) {
  expect_rejected(raw("{}", "", 0xffffffffffffffffull), "exceeds");
  expect_rejected(raw("{}", "", kSafetensorsMaxHeaderBytes + 1), "exceeds");
  expect_rejected(raw("{}", "", 1000), "past the end");
}

TEST_F(SafetensorsTest, RejectsBadJson) {
  expect_rejected(raw("{\"a\":", ""), "not valid JSON");
  expect_rejected(raw("[1, 2]", ""), "not a JSON object");
  expect_rejected(raw("{\"a\": 1}", ""), "not an object");
  expect_rejected(raw(std::string("{\"\xff\": 1}"), ""), "not valid JSON");
  expect_rejected(raw(std::string("{}\0\0", 4), ""), "not valid JSON");
}

TEST_F(SafetensorsTest, RejectsBadMetadata) {
  expect_rejected(raw(R"({"__metadata__": {"a": 1}})", ""), "not a string");
  expect_rejected(raw(R"({"__metadata__": [1]})", ""), "__metadata__ is not an object");
}

TEST_F(SafetensorsTest, RejectsBadEntries) {
  expect_rejected(raw(R"({"t": {"dtype": "Q4", "shape": [1], "data_offsets": [0, 1]}})", "x"),
                  "unknown dtype");
  expect_rejected(raw(R"({"t": {"dtype": "U8", "shape": [1], "data_offsets": [0, 1], "x": 1}})", "x"),
                  "unknown field");
  expect_rejected(raw(R"({"t": {"dtype": "U8", "shape": [-1], "data_offsets": [0, 1]}})", "x"),
                  "non-negative");
  expect_rejected(raw(R"({"t": {"dtype": "U8", "shape": [1.5], "data_offsets": [0, 1]}})", "x"),
                  "non-negative");
  expect_rejected(raw(R"({"t": {"dtype": "U8", "shape": [1], "data_offsets": [-1, 0]}})", "x"),
                  "non-negative");
  expect_rejected(raw(R"({"t": {"dtype": "U8", "shape": [1], "data_offsets": [0]}})", "x"),
                  "two integers");
  expect_rejected(raw(R"({"t": {"dtype": "U8", "shape": [1], "data_offsets": ["0", 1]}})", "x"),
                  "non-negative");
  expect_rejected(raw(R"({"t": {"dtype": "U8", "shape": [1], "data_offsets": [1, 0]}})", "x"),
                  "begin after");
  expect_rejected(raw(R"({"t": {"dtype": "U8", "shape": [2], "data_offsets": [0, 2]}})", "x"),
                  "beyond");
  expect_rejected(raw(R"({"t": {"dtype": "F32", "shape": [2], "data_offsets": [0, 1]}})", "x"),
                  "need 8 bytes");
  expect_rejected(raw(R"({"t": {"dtype": "U8", "shape": [1], "data_offsets": [0, 18446744073709551615]}})", "x"),
                  "beyond");
  expect_rejected(raw(R"({"t": {"dtype": "U8", "shape": [1], "data_offsets": [0, 18446744073709551616]}})", "x"),
                  "non-negative");
  expect_rejected(raw(R"({"t": {"dtype": "F64", "shape": [4294967296, 4294967296], "data_offsets": [0, 0]}})", ""),
                  "overflows");
  expect_rejected(raw(R"({"t": {"dtype": "F64", "shape": [9223372036854775807, 2], "data_offsets": [0, 0]}})", ""),
                  "overflows");
  expect_rejected(raw(R"({"": {"dtype": "U8", "shape": [1], "data_offsets": [0, 1]}})", "x"),
                  "empty tensor name");
}

TEST_F(SafetensorsTest, RejectsDuplicateOverlapGapsAndTrailingBytes) {
  expect_rejected(raw(R"({"t": {"dtype": "U8", "shape": [1], "data_offsets": [0, 1]},)"
                      R"( "t": {"dtype": "U8", "shape": [1], "data_offsets": [1, 2]}})", "xy"),
                  "duplicate tensor 't'");
  expect_rejected(raw(R"({"a": {"dtype": "U8", "shape": [2], "data_offsets": [0, 2]},)"
                      R"( "b": {"dtype": "U8", "shape": [2], "data_offsets": [1, 3]}})", "xyz"),
                  "overlaps");
  expect_rejected(raw(R"({"a": {"dtype": "U8", "shape": [2], "data_offsets": [0, 2]},)"
                      R"( "b": {"dtype": "U8", "shape": [2], "data_offsets": [0, 2]}})", "xy"),
                  "overlaps");
  expect_rejected(raw(R"({"a": {"dtype": "U8", "shape": [1], "data_offsets": [1, 2]}})", "xy"),
                  "unused bytes");
  expect_rejected(raw(R"({"a": {"dtype": "U8", "shape": [1], "data_offsets": [0, 1]}})", "xy"),
                  "cover 1");
}

TEST_F(SafetensorsTest, AcceptsWhitespacePaddedHeader) {
  auto file = SafetensorsFile::open(
      raw(R"({"a": {"dtype": "U8", "shape": [2], "data_offsets": [0, 2]}}    )", "xy"));
  EXPECT_EQ(file->tensor("a").bytes.size(), 2u);
}

// Random byte flips in a valid header must either parse to a self-consistent file or be
// rejected with flare::Error; nothing else (crash, other exception) is acceptable.
TEST_F(SafetensorsTest, RandomHeaderCorruptionIsRejectedCleanly) {
  auto path = dir_ / "fuzz.safetensors";
  {
    SafetensorsWriter writer(path, {{"k", "v"}});
    writer.declare("a", DType::f32, {2, 2});
    writer.declare("b", DType::u8, {5});
    std::vector<std::byte> data(21, std::byte{1});
    writer.write(data);
    writer.finish();
  }
  std::string original;
  {
    std::ifstream in(path, std::ios::binary);
    original.assign(std::istreambuf_iterator<char>(in), {});
  }
  std::mt19937 rng(1234);
  auto mutated_path = dir_ / "mutated.safetensors";
  for (int round = 0; round < 2000; ++round) {
    std::string bytes = original;
    int n_flips = 1 + static_cast<int>(rng() % 3);
    for (int i = 0; i < n_flips; ++i) {
      std::size_t at = rng() % bytes.size();
      bytes[at] = static_cast<char>(rng() & 0xff);
    }
    if (rng() % 8 == 0) bytes.resize(rng() % bytes.size());
    std::ofstream(mutated_path, std::ios::binary | std::ios::trunc) << bytes;
    try {
      auto file = SafetensorsFile::open(mutated_path);
      for (const auto& t : file->tensors()) {
        ASSERT_LE(t.end, file->data().size());
        ASSERT_EQ(file->tensor(t.name).bytes.size(), t.size_bytes());
      }
    } catch (const Error&) {
    }
  }
}

TEST(DType, NamesAndSizes) {
  DType d;
  ASSERT_TRUE(dtype_from_name("BF16", &d));
  EXPECT_EQ(d, DType::bf16);
  EXPECT_EQ(dtype_size_bytes(d), 2u);
  EXPECT_EQ(dtype_name(DType::f8_e4m3), "F8_E4M3");
  EXPECT_FALSE(dtype_from_name("bf16", &d));
}

}  // namespace
}  // namespace flare::package
