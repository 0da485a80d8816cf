// One file's bytes from the Hub into `blobs/<etag>` of the hub cache. Large files are split into
// chunks fetched over several connections with `Range` requests (each answer must be a 206 with
// the matching Content-Range); small ones come in one stream. The bytes go to a partial file
// outside blobs/ with a record of finished chunks, so a killed process resumes where it stopped;
// a dropped connection resumes its chunk from the last byte received. A server that ignores
// Range (200) restarts the file as one stream. The content hash (SHA-256 for LFS files, the git
// blob SHA-1 otherwise) is computed while the bytes arrive, in file order (content_hash.h), so
// the check costs no second pass over the file. Only after the size and the hash match the tree
// entry is the file renamed into
// blobs/ (atomically, same filesystem). One process writes a blob at a time (flock on
// .locks/.../<etag>.lock); a concurrent download of the same blob waits and then reuses it.
#pragma once

#include <cstdint>
#include <string>

#include "hub/cache_layout.h"
#include "hub/content_hash.h"  // content_id_of_file
#include "hub/client.h"

namespace flare::hub {

// Progress callbacks; called from transfer threads (implementations must be thread-safe).
class TransferObserver {
 public:
  virtual ~TransferObserver() = default;
  virtual void bytes_received(std::uint64_t n_bytes) = 0;   // new bytes written
  virtual void bytes_resumed(std::uint64_t n_bytes) = 0;    // bytes kept from an earlier run
  virtual void note(const std::string& message) = 0;        // a wait, a retry, a restart
};

struct TransferOptions {
  int n_connections = 8;
  std::uint64_t min_chunk_bytes = 1ull << 20;
  std::uint64_t max_chunk_bytes = 64ull << 20;
};

struct BlobRequest {
  Target target;        // repository, requested revision, filename (for messages)
  std::string commit;   // the resolved commit the file is fetched at
  std::string etag;     // expected: 64-hex SHA-256 (LFS) or 40-hex git blob id
  std::uint64_t size = 0;
};

struct BlobOutcome {
  bool downloaded = false;  // false: the blob was already there (another process fetched it)
  std::uint64_t resumed_bytes = 0;
};

BlobOutcome fetch_blob(const HubClient& client, const CacheLayout& cache, const BlobRequest& request,
                       const TransferOptions& options, TransferObserver& observer);

// The chunk size for a file: about four chunks per connection, rounded up to whole MiB, within
// the options' bounds.
std::uint64_t chunk_bytes_for(std::uint64_t size, const TransferOptions& options);

}  // namespace flare::hub
