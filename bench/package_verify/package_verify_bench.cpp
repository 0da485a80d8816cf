// Package verification throughput: writes a signed directory-form package of N GiB (default 1)
// split into 64 MiB weight payloads, then times what loading does before trusting any byte:
// open the primary, verify the manifest signature, check the companions' layout, and hash every
// distinct payload with up to 8 workers. Prints GB/s (10^9 bytes per second) per phase.
//   package_verify_bench [--gib N] [--dir PATH] [--workers N] [--repeat N]
#include <chrono>
#include <ctime>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <thread>

#include "package/package.h"

namespace {

namespace fs = std::filesystem;
using flare::package::Package;
using flare::package::PackageBuilder;
using flare::package::PackageForm;
using flare::package::SigningKey;

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

void write_package(const fs::path& dest, std::uint64_t total_bytes, const SigningKey& key) {
  flare::proto::Manifest manifest;
  manifest.mutable_model()->set_canonical_name("bench");
  manifest.set_publisher_namespace(flare::package::kDevelopmentNamespace);
  manifest.set_official_source(flare::package::kDevelopmentSource);
  manifest.set_target("cpu");
  manifest.add_deployments()->set_tensor_parallel(1);
  PackageBuilder builder(manifest);
  constexpr std::uint64_t kPayloadBytes = 64ull << 20;
  std::uint64_t state = 0x9e3779b97f4a7c15ull;
  for (std::uint64_t done = 0, index = 0; done < total_bytes; done += kPayloadBytes, ++index) {
    std::vector<std::byte> bytes(std::min(kPayloadBytes, total_bytes - done));
    for (std::size_t i = 0; i + 8 <= bytes.size(); i += 8) {
      state ^= state << 13, state ^= state >> 7, state ^= state << 17;
      std::memcpy(bytes.data() + i, &state, 8);
    }
    char name[32];
    std::snprintf(name, sizeof(name), "weights/layer-%03llu", static_cast<unsigned long long>(index));
    builder.add_payload(name, flare::proto::PAYLOAD_ROLE_WEIGHT, std::move(bytes));
  }
  builder.write(dest, PackageForm::directory, key);
}

}  // namespace

int main(int argc, char** argv) {
  double gib = 1.0;
  int workers = 8, repeat = 3;
  fs::path dir = fs::temp_directory_path() / "flare-package-verify-bench";
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--gib")) gib = std::atof(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--dir")) dir = argv[i + 1];
    else if (!std::strcmp(argv[i], "--workers")) workers = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--repeat")) repeat = std::atoi(argv[i + 1]);
  }
  try {
    fs::remove_all(dir);
    fs::create_directories(dir);
    const auto total = static_cast<std::uint64_t>(gib * (1ull << 30));
    auto key = SigningKey::generate();
    auto start = std::chrono::steady_clock::now();
    write_package(dir / "package", total, key);
    std::printf("wrote %.2f GiB package in %.2f s (%u hardware threads)\n", gib, seconds_since(start),
                std::thread::hardware_concurrency());
    for (int r = 0; r < repeat; ++r) {
      start = std::chrono::steady_clock::now();
      auto package = Package::open(dir / "package");
      package->verify_signature(key.public_key());
      package->check_layout();
      const double metadata_s = seconds_since(start);
      start = std::chrono::steady_clock::now();
      const std::clock_t cpu_start = std::clock();
      package->verify_payloads(nullptr, workers);
      const double hash_s = seconds_since(start);
      const double cpu_s = static_cast<double>(std::clock() - cpu_start) / CLOCKS_PER_SEC;
      const double bytes = static_cast<double>(package->distinct_payload_bytes());
      std::printf("run %d: open+signature+layout %.1f ms; payload hashing %.3f s = %.2f GB/s wall, %.2f GB per "
                  "CPU-second (%d workers, %zu payloads)\n",
                  r + 1, metadata_s * 1e3, hash_s, bytes / hash_s / 1e9, bytes / cpu_s / 1e9, workers,
                  package->distinct_payloads().size());
    }
    fs::remove_all(dir);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    fs::remove_all(dir);
    return 1;
  }
  return 0;
}
