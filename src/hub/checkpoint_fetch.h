// A Transformers checkpoint from the Hub into the hub cache, as `ignition export ORG/NAME[@REV]`
// needs it: the revision is resolved to a commit, the commit's top-level files are listed (tree
// API, every page), and only the files preparation reads are fetched (configuration, generation
// configuration, tokenizer and chat-template files, the safetensors index and the shards it
// names, or a single model.safetensors). Files the snapshot already has cost nothing; blobs
// already in the cache are linked without a transfer. Free disk space is checked before the
// first byte moves (a capacity error, exit 4, naming the bytes).
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "hub/blob_transfer.h"
#include "hub/protocol.h"
#include "hub/client.h"

namespace flare::hub {

struct HubAccess {
  HubSettings settings;
  std::filesystem::path hub_cache;
  TransferOptions transfer;
};

// Progress of one checkpoint fetch: the plan, then per-file and per-byte progress.
class CheckpointReporter : public TransferObserver {
 public:
  // Called once, before any transfer: what will be fetched (0 files when all is cached).
  virtual void plan(std::size_t n_files, std::uint64_t n_bytes, std::size_t n_reused) = 0;
  virtual void file_done(const std::string& filename, std::uint64_t size, bool transferred) = 0;
};

struct CheckpointSnapshot {
  std::filesystem::path directory;  // <hub_cache>/models--ORG--NAME/snapshots/<commit>
  std::string commit;
  std::size_t n_transferred = 0;   // files whose bytes came over the network
  std::size_t n_reused = 0;        // files already in the snapshot or its blobs
  std::uint64_t transferred_bytes = 0;
};

CheckpointSnapshot fetch_checkpoint(const HubAccess& access, const std::string& repository,
                                    const std::string& revision, CheckpointReporter& reporter);

// Building blocks, shared with prepared-package downloads:
// Every top-level file of `commit` (tree API, all pages); list_files with `recursive` lists the
// files of every folder too, by their repository paths.
std::map<std::string, TreeEntry> list_files(const HubClient& client, HttpSession& session, const Target& target,
                                            const std::string& commit, bool recursive);
std::map<std::string, TreeEntry> list_top_level(const HubClient& client, HttpSession& session, const Target& target,
                                                const std::string& commit);
// Places `needed` in snapshots/<commit>/: files already there cost nothing, cached blobs are
// linked, the rest is downloaded after a free-space check; calls reporter.plan first.
void place_files(const HubAccess& access, const HubClient& client, const CacheLayout& cache, const Target& target,
                 const std::string& commit, const std::vector<const TreeEntry*>& needed, CheckpointReporter& reporter,
                 CheckpointSnapshot& result);

// Top-level files preparation reads besides weights, fetched when the repository has them.
const std::vector<std::string>& checkpoint_metadata_files();

// What a cached snapshot of repository@revision lacks, for offline errors: "no refs/main",
// "no snapshot for commit X", or the missing files. Empty when complete.
std::vector<std::string> missing_from_cache(const std::filesystem::path& hub_cache, const std::string& repository,
                                            const std::string& revision);

}  // namespace flare::hub
