// Hub download throughput: one large file from a hub server (bench/hub_download/run.sh starts the
// local test server on loopback) into a scratch hub cache, once per connection count, timed end
// to end (transfer, then the SHA-256 check before the blob is published); then the CPU time of the
// SHA-256 check alone per GB.
//
//   hub_download_bench ENDPOINT REPOSITORY FILENAME SCRATCH_DIR [CONNECTIONS...]   (default 1 8)
#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "common/error.h"
#include "hub/blob_transfer.h"
#include "hub/protocol.h"

namespace {

using namespace flare;
namespace fs = std::filesystem;

struct Quiet : hub::TransferObserver {
  void bytes_received(std::uint64_t) override {}
  void bytes_resumed(std::uint64_t) override {}
  void note(const std::string& message) override { std::fprintf(stderr, "  %s\n", message.c_str()); }
};

double cpu_seconds() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) +
         static_cast<double>(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6;
}

int run(int argc, char** argv) {
  if (argc < 5) {
    std::fprintf(stderr, "usage: %s ENDPOINT REPOSITORY FILENAME SCRATCH_DIR [CONNECTIONS...]\n", argv[0]);
    return 2;
  }
  const std::string repository = argv[2], filename = argv[3];
  const fs::path scratch = argv[4];
  std::vector<int> connection_counts;
  for (int i = 5; i < argc; ++i) connection_counts.push_back(std::stoi(argv[i]));
  if (connection_counts.empty()) connection_counts = {1, 8};

  hub::HubSettings settings;
  settings.endpoint = argv[1];
  const hub::HubClient client(settings);
  hub::HttpSession session;
  const hub::Target target{repository, "main", filename};
  const std::string commit = hub::parse_revision_commit(
      client.get(session, client.api_url(repository, "/revision/main"), target).body);
  std::optional<hub::TreeEntry> entry;
  for (auto& e : hub::parse_tree_page(client.get(session, client.api_url(repository, "/tree/" + commit), target).body))
    if (e.path == filename) entry = e;
  if (!entry) fail(ExitCode::fetch, "{} has no {}", repository, filename);
  const double gb = static_cast<double>(entry->size) / 1e9;
  std::printf("file: %s, %.3f GB (%llu bytes)\n", filename.c_str(), gb, static_cast<unsigned long long>(entry->size));

  Quiet quiet;
  for (int connections : connection_counts) {
    fs::remove_all(scratch);
    const hub::CacheLayout cache(scratch, repository);
    hub::BlobRequest request{target, commit, entry->etag(), entry->size};
    hub::TransferOptions options;
    options.n_connections = connections;
    const double cpu_start = cpu_seconds();
    const auto start = std::chrono::steady_clock::now();
    hub::fetch_blob(client, cache, request, options, quiet);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const double cpu = cpu_seconds() - cpu_start;
    std::printf("connections=%d: %.2f s, %.2f GB/s (transfer and SHA-256 check); client CPU %.2f s (%.2f s per GB)\n",
                connections, seconds, gb / seconds, cpu, cpu / gb);
  }
  const hub::CacheLayout cache(scratch, repository);
  const double cpu_before = cpu_seconds();
  const auto start = std::chrono::steady_clock::now();
  const std::string sha = hub::content_id_of_file(cache.blob(entry->etag()).string(), false);
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const double cpu = cpu_seconds() - cpu_before;
  if (sha != entry->etag()) fail(ExitCode::failure, "the blob's SHA-256 changed");
  std::printf("sha256 check alone: %.2f CPU s per GB (%.2f GB/s on one core, %.2f s wall)\n", cpu / gb, gb / cpu, wall);
  fs::remove_all(scratch);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const flare::Error& error) {
    std::fprintf(stderr, "error: %s\n", error.what());
    return error.exit_status();
  }
}
