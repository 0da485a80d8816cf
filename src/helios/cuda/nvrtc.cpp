// NVRTC through dlopen (see nvrtc.h).
#include "helios/cuda/nvrtc.h"

#include <dlfcn.h>
#include <nvrtc.h>

#include "common/error.h"

namespace flare::helios::cuda {

struct Nvrtc::Api {
  decltype(&::nvrtcVersion) version = nullptr;
  decltype(&::nvrtcGetErrorString) get_error_string = nullptr;
  decltype(&::nvrtcCreateProgram) create_program = nullptr;
  decltype(&::nvrtcDestroyProgram) destroy_program = nullptr;
  decltype(&::nvrtcCompileProgram) compile_program = nullptr;
  decltype(&::nvrtcGetProgramLogSize) get_program_log_size = nullptr;
  decltype(&::nvrtcGetProgramLog) get_program_log = nullptr;
  decltype(&::nvrtcGetCUBINSize) get_cubin_size = nullptr;
  decltype(&::nvrtcGetCUBIN) get_cubin = nullptr;
};

namespace {

constexpr const char* k_library_name = "libnvrtc.so.13";

template <typename Fn>
bool resolve(void* library, const char* symbol, Fn& out, std::string& error) {
  out = reinterpret_cast<Fn>(dlsym(library, symbol));
  if (!out && error.empty()) error = fmt::format("{} lacks the entry point {}", k_library_name, symbol);
  return out != nullptr;
}

bool valid_arch(std::string_view arch) {
  if (arch.size() < 5 || arch.substr(0, 3) != "sm_") return false;
  std::size_t i = 3;
  while (i < arch.size() && arch[i] >= '0' && arch[i] <= '9') ++i;
  if (i == 3) return false;
  return i == arch.size() || (i + 1 == arch.size() && (arch[i] == 'a' || arch[i] == 'f'));
}

bool valid_define_name(std::string_view name) {
  if (name.empty() || (name[0] >= '0' && name[0] <= '9')) return false;
  for (const char c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
    if (!ok) return false;
  }
  return true;
}

// Owns one nvrtcProgram.
class Program {
 public:
  Program(const Nvrtc::Api& api, nvrtcProgram p) : api_(api), p_(p) {}
  ~Program() { api_.destroy_program(&p_); }
  Program(const Program&) = delete;
  Program& operator=(const Program&) = delete;
  nvrtcProgram get() const { return p_; }

 private:
  const Nvrtc::Api& api_;
  nvrtcProgram p_;
};

std::string program_log(const Nvrtc::Api& api, nvrtcProgram p) {
  std::size_t size = 0;
  if (api.get_program_log_size(p, &size) != NVRTC_SUCCESS || size <= 1) return {};
  std::string log(size, '\0');
  if (api.get_program_log(p, log.data()) != NVRTC_SUCCESS) return {};
  while (!log.empty() && (log.back() == '\0' || log.back() == '\n')) log.pop_back();
  return log;
}

}  // namespace

std::string Nvrtc::open(Nvrtc& self, const std::filesystem::path& cuda_root) {
  const std::filesystem::path in_toolkit = cuda_root / "lib64" / k_library_name;
  void* library = dlopen(in_toolkit.c_str(), RTLD_NOW | RTLD_LOCAL);
  std::string toolkit_error;
  if (library) {
    self.library_path_ = in_toolkit.string();
  } else {
    const char* why = dlerror();
    toolkit_error = why ? why : in_toolkit.string();
    library = dlopen(k_library_name, RTLD_NOW | RTLD_LOCAL);
    if (!library) {
      const char* why2 = dlerror();
      return fmt::format("NVRTC not found: {}; {}", toolkit_error, why2 ? why2 : k_library_name);
    }
    self.library_path_ = k_library_name;
  }
  auto api = std::make_shared<Api>();
  std::string error;
  bool ok = resolve(library, "nvrtcVersion", api->version, error);
  ok = resolve(library, "nvrtcGetErrorString", api->get_error_string, error) && ok;
  ok = resolve(library, "nvrtcCreateProgram", api->create_program, error) && ok;
  ok = resolve(library, "nvrtcDestroyProgram", api->destroy_program, error) && ok;
  ok = resolve(library, "nvrtcCompileProgram", api->compile_program, error) && ok;
  ok = resolve(library, "nvrtcGetProgramLogSize", api->get_program_log_size, error) && ok;
  ok = resolve(library, "nvrtcGetProgramLog", api->get_program_log, error) && ok;
  ok = resolve(library, "nvrtcGetCUBINSize", api->get_cubin_size, error) && ok;
  ok = resolve(library, "nvrtcGetCUBIN", api->get_cubin, error) && ok;
  if (!ok) return error;  // the library stays open; it is never worth unloading
  if (api->version(&self.major_, &self.minor_) != NVRTC_SUCCESS) return "nvrtcVersion failed";
  self.api_ = std::move(api);
  std::error_code ec;
  if (std::filesystem::is_directory(cuda_root / "include", ec)) self.include_dir_ = cuda_root / "include";
  return {};
}

Nvrtc::Nvrtc(const std::filesystem::path& cuda_root) {
  const std::string error = open(*this, cuda_root);
  if (!error.empty()) fail(ExitCode::preparation, "cannot load NVRTC: {}", error);
}

std::unique_ptr<Nvrtc> Nvrtc::try_load(const std::filesystem::path& cuda_root, std::string* reason) {
  std::unique_ptr<Nvrtc> nvrtc(new Nvrtc(nullptr));
  const std::string error = open(*nvrtc, cuda_root);
  if (reason) *reason = error;
  if (!error.empty()) return nullptr;
  return nvrtc;
}

std::string Nvrtc::version() const { return fmt::format("{}.{}", major_, minor_); }

std::vector<std::string> Nvrtc::option_list(const CompileOptions& options) const {
  if (!valid_arch(options.arch)) fail_usage("invalid CUDA architecture '{}' (expected sm_NN, e.g. sm_90)", options.arch);
  std::vector<std::string> list = {"--gpu-architecture=" + options.arch, "-std=c++17", "-default-device"};
  if (options.fast_math) list.emplace_back("--use_fast_math");
  if (!include_dir_.empty()) list.push_back("--include-path=" + include_dir_.string());
  for (const auto& [name, value] : options.defines) {
    if (!valid_define_name(name)) fail_usage("invalid kernel define name '{}'", name);
    if (value.find_first_of("\n\r") != std::string::npos) fail_usage("kernel define {} has a multi-line value", name);
    list.push_back(value.empty() ? "-D" + name : "-D" + name + "=" + value);
  }
  return list;
}

std::string Nvrtc::compile(const KernelSource& kernel, const CompileOptions& options) const {
  const std::vector<std::string> list = option_list(options);
  std::vector<const char*> argv;
  for (const std::string& o : list) argv.push_back(o.c_str());
  const std::string source(kernel.source);
  const std::string file_name = std::string(kernel.name) + ".cu";
  // The embedded headers, which the source may #include by name.
  std::vector<std::string> header_texts, header_names;
  for (const KernelSource& header : embedded_kernel_headers()) {
    header_texts.emplace_back(header.source);
    header_names.emplace_back(header.name);
  }
  std::vector<const char*> headers, names;
  for (std::size_t i = 0; i < header_texts.size(); ++i) {
    headers.push_back(header_texts[i].c_str());
    names.push_back(header_names[i].c_str());
  }
  nvrtcProgram raw = nullptr;
  nvrtcResult r = api_->create_program(&raw, source.c_str(), file_name.c_str(), int(headers.size()), headers.data(),
                                       names.data());
  if (r != NVRTC_SUCCESS) {
    fail(ExitCode::preparation, "kernel {}: nvrtcCreateProgram failed: {}", kernel.name, api_->get_error_string(r));
  }
  Program program(*api_, raw);
  r = api_->compile_program(program.get(), int(argv.size()), argv.data());
  if (r != NVRTC_SUCCESS) {
    fail(ExitCode::preparation, "kernel {} failed to compile for {} ({}):\n{}", kernel.name, options.arch,
         api_->get_error_string(r), program_log(*api_, program.get()));
  }
  std::size_t size = 0;
  r = api_->get_cubin_size(program.get(), &size);
  if (r != NVRTC_SUCCESS || size == 0) {
    fail(ExitCode::preparation, "kernel {}: NVRTC produced no CUBIN for {} ({})", kernel.name, options.arch,
         api_->get_error_string(r));
  }
  std::string cubin(size, '\0');
  r = api_->get_cubin(program.get(), cubin.data());
  if (r != NVRTC_SUCCESS) fail(ExitCode::preparation, "kernel {}: nvrtcGetCUBIN failed: {}", kernel.name, api_->get_error_string(r));
  return cubin;
}

std::string Nvrtc::compile_cached(KernelCache& cache, const KernelSource& kernel, const CompileOptions& options) const {
  const std::vector<std::string> list = option_list(options);
  // A header's change changes every key (the headers are part of what each compile reads).
  std::string text(kernel.source);
  for (const KernelSource& header : embedded_kernel_headers()) {
    text += "\n// header ";
    text += header.name;
    text += "\n";
    text += header.source;
  }
  const std::string key = KernelCache::key(text, options.arch, list, "nvrtc " + version());
  return cache.get_or_build(key, [&] { return compile(kernel, options); });
}

}  // namespace flare::helios::cuda
