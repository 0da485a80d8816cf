// safetensors reader and writer. The reader maps the file read-only and validates the whole
// header before exposing anything: every length and offset is checked against the file with
// overflow-safe arithmetic, tensors must tile the data section exactly (no overlap, no gap,
// no trailing bytes), and duplicate names are rejected even though JSON parsers usually keep
// the last one silently.
#include "package/safetensors.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <set>

#include <nlohmann/json.hpp>

#include "common/error.h"

namespace flare::package {
namespace {

struct DTypeEntry {
  DType dtype;
  std::string_view name;
  std::size_t size_bytes;
};

constexpr std::array<DTypeEntry, 15> kDTypes = {{
    {DType::bool_, "BOOL", 1},
    {DType::u8, "U8", 1},
    {DType::i8, "I8", 1},
    {DType::u16, "U16", 2},
    {DType::i16, "I16", 2},
    {DType::f16, "F16", 2},
    {DType::bf16, "BF16", 2},
    {DType::u32, "U32", 4},
    {DType::i32, "I32", 4},
    {DType::f32, "F32", 4},
    {DType::u64, "U64", 8},
    {DType::i64, "I64", 8},
    {DType::f64, "F64", 8},
    {DType::f8_e4m3, "F8_E4M3", 1},
    {DType::f8_e5m2, "F8_E5M2", 1},
}};

const DTypeEntry& dtype_entry(DType dtype) {
  for (const auto& entry : kDTypes) {
    if (entry.dtype == dtype) return entry;
  }
  throw Error(ExitCode::failure, "internal: unknown dtype");
}

constexpr std::int64_t kMaxDims = 16;

// Product of `shape` times `element_bytes`; false on a negative dimension or overflow.
bool shape_size_bytes(const std::vector<std::int64_t>& shape, std::uint64_t element_bytes,
                      std::uint64_t* size_bytes) {
  std::uint64_t total = element_bytes;
  for (std::int64_t dim : shape) {
    if (dim < 0) return false;
    if (__builtin_mul_overflow(total, static_cast<std::uint64_t>(dim), &total)) return false;
  }
  *size_bytes = total;
  return true;
}

std::uint64_t read_u64_le(const unsigned char* p) {
  std::uint64_t value = 0;
  for (int i = 7; i >= 0; --i) value = (value << 8) | p[i];
  return value;
}

// Reads one unsigned integer from JSON; rejects negatives, floats and strings.
bool json_u64(const nlohmann::json& value, std::uint64_t* out) {
  if (value.is_number_unsigned()) {
    *out = value.get<std::uint64_t>();
    return true;
  }
  if (value.is_number_integer()) {
    std::int64_t v = value.get<std::int64_t>();
    if (v < 0) return false;
    *out = static_cast<std::uint64_t>(v);
    return true;
  }
  return false;
}

TensorInfo parse_tensor_entry(const std::filesystem::path& path, const std::string& name,
                              const nlohmann::json& entry, std::uint64_t data_size_bytes) {
  auto bad = [&](std::string_view why) -> Error {
    return Error(ExitCode::failure,
                 fmt::format("{}: tensor '{}' is invalid: {}", path.string(), name, why));
  };
  if (name.empty()) throw bad("empty tensor name");
  if (!entry.is_object()) throw bad("entry is not an object");
  for (const auto& [key, unused] : entry.items()) {
    if (key != "dtype" && key != "shape" && key != "data_offsets") {
      throw bad(fmt::format("unknown field '{}'", key));
    }
  }
  auto dtype_it = entry.find("dtype");
  auto shape_it = entry.find("shape");
  auto offsets_it = entry.find("data_offsets");
  if (dtype_it == entry.end() || !dtype_it->is_string()) throw bad("missing or non-string dtype");
  if (shape_it == entry.end() || !shape_it->is_array()) throw bad("missing or non-array shape");
  if (offsets_it == entry.end() || !offsets_it->is_array() || offsets_it->size() != 2) {
    throw bad("data_offsets must be an array of two integers");
  }
  TensorInfo info;
  info.name = name;
  const auto& dtype_str = dtype_it->get_ref<const std::string&>();
  if (!dtype_from_name(dtype_str, &info.dtype)) throw bad(fmt::format("unknown dtype '{}'", dtype_str));
  if (static_cast<std::int64_t>(shape_it->size()) > kMaxDims) throw bad("too many dimensions");
  for (const auto& dim : *shape_it) {
    std::uint64_t d = 0;
    if (!json_u64(dim, &d) || d > static_cast<std::uint64_t>(INT64_MAX)) {
      throw bad("shape dimensions must be non-negative integers");
    }
    info.shape.push_back(static_cast<std::int64_t>(d));
  }
  if (!json_u64((*offsets_it)[0], &info.begin) || !json_u64((*offsets_it)[1], &info.end)) {
    throw bad("data_offsets must be non-negative integers");
  }
  if (info.begin > info.end) throw bad("data_offsets begin after they end");
  if (info.end > data_size_bytes) {
    throw bad(fmt::format("data_offsets end at {} beyond the {}-byte data section", info.end,
                          data_size_bytes));
  }
  std::uint64_t expected = 0;
  if (!shape_size_bytes(info.shape, dtype_size_bytes(info.dtype), &expected)) {
    throw bad("shape overflows");
  }
  if (expected != info.end - info.begin) {
    throw bad(fmt::format("shape and dtype need {} bytes but data_offsets span {}", expected,
                          info.end - info.begin));
  }
  return info;
}

nlohmann::json parse_header_json(const std::filesystem::path& path, std::string_view text) {
  // Duplicate top-level keys are detected in the parser callback: the parsed object keeps
  // only the last value, which would silently hide a second tensor of the same name.
  std::set<std::string> seen;
  std::string duplicate;
  auto callback = [&](int depth, nlohmann::json::parse_event_t event, nlohmann::json& parsed) {
    if (depth == 1 && event == nlohmann::json::parse_event_t::key) {
      const auto& key = parsed.get_ref<const std::string&>();
      if (!seen.insert(key).second && duplicate.empty()) duplicate = key;
    }
    return true;
  };
  // nlohmann's lexer treats NUL as end of input; raw NUL is never valid JSON text.
  if (text.find('\0') != std::string_view::npos) {
    fail_input("{}: safetensors header is not valid JSON (NUL byte)", path.string());
  }
  nlohmann::json header;
  try {
    header = nlohmann::json::parse(text.begin(), text.end(), callback);
  } catch (const nlohmann::json::exception& e) {
    fail_input("{}: safetensors header is not valid JSON ({})", path.string(), e.what());
  }
  if (!duplicate.empty()) fail_input("{}: duplicate tensor '{}' in header", path.string(), duplicate);
  if (!header.is_object()) fail_input("{}: safetensors header is not a JSON object", path.string());
  return header;
}

std::map<std::string, std::string> parse_metadata(const std::filesystem::path& path,
                                                  const nlohmann::json& value) {
  if (!value.is_object()) fail_input("{}: __metadata__ is not an object", path.string());
  std::map<std::string, std::string> metadata;
  for (const auto& [key, item] : value.items()) {
    if (!item.is_string()) fail_input("{}: __metadata__ value '{}' is not a string", path.string(), key);
    metadata.emplace(key, item.get<std::string>());
  }
  return metadata;
}

// Tensors sorted by offset must tile [0, data_size) exactly.
void check_tiling(const std::filesystem::path& path, const std::vector<TensorInfo>& tensors,
                  std::uint64_t data_size_bytes) {
  std::uint64_t cursor = 0;
  for (const auto& t : tensors) {
    if (t.begin < cursor) {
      fail_input("{}: tensor '{}' overlaps the tensor before it", path.string(), t.name);
    }
    if (t.begin > cursor) {
      fail_input("{}: {} unused bytes before tensor '{}'", path.string(), t.begin - cursor, t.name);
    }
    cursor = t.end;
  }
  if (cursor != data_size_bytes) {
    fail_input("{}: data section has {} bytes but tensors cover {}", path.string(), data_size_bytes,
               cursor);
  }
}

struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

}  // namespace

std::string_view dtype_name(DType dtype) { return dtype_entry(dtype).name; }
std::size_t dtype_size_bytes(DType dtype) { return dtype_entry(dtype).size_bytes; }

bool dtype_from_name(std::string_view name, DType* dtype) {
  for (const auto& entry : kDTypes) {
    if (entry.name == name) {
      *dtype = entry.dtype;
      return true;
    }
  }
  return false;
}

std::uint64_t TensorInfo::n_elements() const {
  std::uint64_t n = 1;
  for (auto dim : shape) n *= static_cast<std::uint64_t>(dim);
  return n;
}

std::shared_ptr<SafetensorsFile> SafetensorsFile::open(const std::filesystem::path& path) {
  Fd file;
  file.fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (file.fd < 0) fail_input("{}: cannot open ({})", path.string(), std::strerror(errno));
  struct stat st {};
  if (::fstat(file.fd, &st) != 0) fail_input("{}: cannot stat ({})", path.string(), std::strerror(errno));
  if (!S_ISREG(st.st_mode)) fail_input("{}: not a regular file", path.string());
  auto file_size = static_cast<std::uint64_t>(st.st_size);
  if (file_size < 8) fail_input("{}: too short to be a safetensors file ({} bytes)", path.string(), file_size);

  std::shared_ptr<SafetensorsFile> result(new SafetensorsFile());
  result->path_ = path;
  result->file_size_ = file_size;
  void* mapping = ::mmap(nullptr, file_size, PROT_READ, MAP_SHARED, file.fd, 0);
  if (mapping == MAP_FAILED) fail_input("{}: cannot map ({})", path.string(), std::strerror(errno));
  result->mapping_ = mapping;  // unmapped by the destructor from here on

  const auto* bytes = static_cast<const unsigned char*>(mapping);
  std::uint64_t header_size = read_u64_le(bytes);
  if (header_size > kSafetensorsMaxHeaderBytes) {
    fail_input("{}: header length {} exceeds the {}-byte limit", path.string(), header_size,
               kSafetensorsMaxHeaderBytes);
  }
  if (header_size > file_size - 8) {
    fail_input("{}: header length {} runs past the end of the {}-byte file", path.string(),
               header_size, file_size);
  }
  if (header_size < 2) fail_input("{}: header too short", path.string());
  result->header_size_ = header_size;
  std::uint64_t data_size = file_size - 8 - header_size;

  std::string_view text(reinterpret_cast<const char*>(bytes + 8), header_size);
  nlohmann::json header = parse_header_json(path, text);
  for (const auto& [key, value] : header.items()) {
    if (key == "__metadata__") {
      result->metadata_ = parse_metadata(path, value);
      continue;
    }
    result->tensors_.push_back(parse_tensor_entry(path, key, value, data_size));
  }
  std::sort(result->tensors_.begin(), result->tensors_.end(), [](const auto& a, const auto& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  check_tiling(path, result->tensors_, data_size);
  for (std::size_t i = 0; i < result->tensors_.size(); ++i) {
    result->index_.emplace(result->tensors_[i].name, i);
  }
  return result;
}

SafetensorsFile::~SafetensorsFile() {
  if (mapping_ != nullptr) ::munmap(mapping_, file_size_);
}

const TensorInfo* SafetensorsFile::find(std::string_view name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : &tensors_[it->second];
}

TensorView SafetensorsFile::tensor(std::string_view name) const {
  const TensorInfo* info = find(name);
  if (info == nullptr) fail_input("{}: no tensor named '{}'", path_.string(), name);
  return TensorView{info, data().subspan(info->begin, info->size_bytes())};
}

std::span<const std::byte> SafetensorsFile::data() const {
  const auto* base = static_cast<const std::byte*>(mapping_);
  return {base + data_offset_bytes(), file_size_ - data_offset_bytes()};
}

// ---- writer -------------------------------------------------------------------------------

struct SafetensorsWriter::State {
  std::filesystem::path path;
  std::filesystem::path temp_path;
  std::map<std::string, std::string> metadata;
  std::vector<TensorInfo> tensors;  // declaration order = data order
  std::set<std::string, std::less<>> names;
  std::uint64_t data_size_bytes = 0;
  int fd = -1;
  bool started = false;
  bool finished = false;
  std::size_t current = 0;             // tensor receiving bytes
  std::uint64_t written_bytes = 0;     // data bytes written so far
  std::vector<std::byte> buffer;       // pending bytes not yet written to fd

  void flush() {
    std::size_t done = 0;
    while (done < buffer.size()) {
      ssize_t n = ::write(fd, buffer.data() + done, buffer.size() - done);
      if (n < 0) {
        if (errno == EINTR) continue;
        fail_input("{}: write failed ({})", temp_path.string(), std::strerror(errno));
      }
      done += static_cast<std::size_t>(n);
    }
    buffer.clear();
  }
  void append(std::span<const std::byte> bytes) {
    constexpr std::size_t kBufferBytes = 4u << 20;
    if (buffer.size() + bytes.size() > kBufferBytes) flush();
    if (bytes.size() >= kBufferBytes) {
      buffer.assign(bytes.begin(), bytes.end());
      flush();
    } else {
      buffer.insert(buffer.end(), bytes.begin(), bytes.end());
    }
  }
  void start();
};

void SafetensorsWriter::State::start() {
  nlohmann::json header = nlohmann::json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  for (const auto& t : tensors) {
    header[t.name] = {{"dtype", dtype_name(t.dtype)}, {"shape", t.shape},
                      {"data_offsets", {t.begin, t.end}}};
  }
  std::string text = header.dump();
  while (text.size() % 8 != 0) text.push_back(' ');  // keeps the data section 8-byte aligned
  if (text.size() > kSafetensorsMaxHeaderBytes) fail_input("{}: header too large", path.string());
  temp_path = path;
  temp_path += fmt::format(".partial-{}", ::getpid());
  fd = ::open(temp_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) fail_input("{}: cannot create ({})", temp_path.string(), std::strerror(errno));
  started = true;
  std::array<std::byte, 8> length{};
  for (int i = 0; i < 8; ++i) length[i] = static_cast<std::byte>((text.size() >> (8 * i)) & 0xff);
  append(length);
  append(std::as_bytes(std::span(text.data(), text.size())));
}

SafetensorsWriter::SafetensorsWriter(std::filesystem::path path,
                                     std::map<std::string, std::string> metadata)
    : state_(std::make_unique<State>()) {
  state_->path = std::move(path);
  state_->metadata = std::move(metadata);
}

SafetensorsWriter::~SafetensorsWriter() {
  if (state_->fd >= 0) ::close(state_->fd);
  if (state_->started && !state_->finished) {
    std::error_code ignored;
    std::filesystem::remove(state_->temp_path, ignored);
  }
}

void SafetensorsWriter::declare(std::string name, DType dtype, std::vector<std::int64_t> shape) {
  State& s = *state_;
  if (s.started) fail_input("{}: tensor '{}' declared after writing began", s.path.string(), name);
  if (name.empty() || name == "__metadata__") fail_input("{}: invalid tensor name '{}'", s.path.string(), name);
  if (!s.names.insert(name).second) fail_input("{}: duplicate tensor '{}'", s.path.string(), name);
  std::uint64_t size_bytes = 0;
  if (!shape_size_bytes(shape, dtype_size_bytes(dtype), &size_bytes)) {
    fail_input("{}: tensor '{}' has an invalid shape", s.path.string(), name);
  }
  TensorInfo info{std::move(name), dtype, std::move(shape), s.data_size_bytes, 0};
  info.end = info.begin + size_bytes;
  s.data_size_bytes = info.end;
  s.tensors.push_back(std::move(info));
}

void SafetensorsWriter::write(std::span<const std::byte> bytes) {
  State& s = *state_;
  if (s.finished) fail_input("{}: write after finish", s.path.string());
  if (!s.started) s.start();
  if (bytes.size() > s.data_size_bytes - s.written_bytes) {
    fail_input("{}: {} bytes written beyond the declared tensors", s.path.string(),
               bytes.size() - (s.data_size_bytes - s.written_bytes));
  }
  s.append(bytes);
  s.written_bytes += bytes.size();
  while (s.current < s.tensors.size() && s.tensors[s.current].end <= s.written_bytes) ++s.current;
}

void SafetensorsWriter::finish() {
  State& s = *state_;
  if (s.finished) return;
  if (!s.started) s.start();
  if (s.written_bytes != s.data_size_bytes) {
    const auto& t = s.tensors[s.current];
    fail_input("{}: tensor '{}' is incomplete ({} of {} data bytes written)", s.path.string(),
               t.name, s.written_bytes, s.data_size_bytes);
  }
  s.flush();
  if (::fsync(s.fd) != 0) fail_input("{}: fsync failed ({})", s.temp_path.string(), std::strerror(errno));
  ::close(s.fd);
  s.fd = -1;
  std::error_code ec;
  std::filesystem::rename(s.temp_path, s.path, ec);
  if (ec) fail_input("{}: cannot rename into place ({})", s.path.string(), ec.message());
  s.finished = true;
}

}  // namespace flare::package
