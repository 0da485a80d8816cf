// safetensors files: a memory-mapped, bounds-checked reader and a streaming writer.
// Every byte of a file is untrusted: header length, JSON, dtypes, shapes and offsets are
// validated before any tensor is exposed, and overlapping or duplicate tensors are rejected.
// Used by checkpoint loading (src/model) and by packages (primary and companion files).
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace flare::package {

enum class DType { bool_, u8, i8, u16, i16, f16, bf16, u32, i32, f32, u64, i64, f64, f8_e4m3, f8_e5m2 };

std::string_view dtype_name(DType dtype);      // "BF16", ...
std::size_t dtype_size_bytes(DType dtype);
bool dtype_from_name(std::string_view name, DType* dtype);  // false for an unknown name

// Largest accepted JSON header. Real headers are a few MB at most; the cap keeps a hostile
// length from reserving memory.
inline constexpr std::uint64_t kSafetensorsMaxHeaderBytes = 100ull << 20;

struct TensorInfo {
  std::string name;
  DType dtype;
  std::vector<std::int64_t> shape;
  std::uint64_t begin = 0;  // byte offsets relative to the start of the data section
  std::uint64_t end = 0;
  std::uint64_t n_elements() const;
  std::uint64_t size_bytes() const { return end - begin; }
};

// A read-only view of one tensor's bytes inside a mapped file.
struct TensorView {
  const TensorInfo* info = nullptr;
  std::span<const std::byte> bytes;
};

class SafetensorsFile {
 public:
  // Maps `path` and validates it; throws flare::Error naming the file and the problem.
  static std::shared_ptr<SafetensorsFile> open(const std::filesystem::path& path);

  ~SafetensorsFile();
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;

  const std::filesystem::path& path() const { return path_; }
  const std::vector<TensorInfo>& tensors() const { return tensors_; }  // in offset order
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  const TensorInfo* find(std::string_view name) const;                // nullptr if absent
  TensorView tensor(std::string_view name) const;                     // throws if absent
  std::span<const std::byte> data() const;                            // the whole data section
  std::uint64_t header_size_bytes() const { return header_size_; }
  std::uint64_t data_offset_bytes() const { return 8 + header_size_; }  // file offset of data()
  std::uint64_t file_size_bytes() const { return file_size_; }

 private:
  SafetensorsFile() = default;
  std::filesystem::path path_;
  void* mapping_ = nullptr;
  std::uint64_t file_size_ = 0;
  std::uint64_t header_size_ = 0;
  std::vector<TensorInfo> tensors_;
  std::map<std::string, std::size_t, std::less<>> index_;  // name -> position in tensors_
  std::map<std::string, std::string> metadata_;
};

// Writes a safetensors file in one pass: declare every tensor (name, dtype, shape), then
// stream each tensor's bytes in declaration order. The file appears under its final name only
// on finish() (written to a temporary name, fsynced, renamed).
class SafetensorsWriter {
 public:
  SafetensorsWriter(std::filesystem::path path, std::map<std::string, std::string> metadata);
  ~SafetensorsWriter();
  void declare(std::string name, DType dtype, std::vector<std::int64_t> shape);
  void write(std::span<const std::byte> bytes);  // appends to the current tensor
  void finish();

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace flare::package
