// `ignition export [MODEL]`: resolve the checkpoint, select the backend, plan memory before any
// weight is read, prepare the weights into the standard layout (one payload per layer), and
// publish a signed package in the model cache, selected as the model's default. The phases of
// spec cli-design section 7 are reported on stderr with counts and elapsed time; the entry path
// is printed on stdout. A failure or a signal publishes nothing (only staging debris `gc`
// reclaims).
#pragma once

#include <filesystem>
#include <optional>
#include <string>

#include "common/cli.h"

namespace flare::ignition {

struct ExportOptions {
  GlobalOptions global;
  std::string model;                          // empty: [defaults] model
  std::optional<std::string> gpus;            // --gpus LIST
  bool cpu = false;                           // --cpu
  std::optional<int> max_concurrency;
  std::optional<int> prefill_chunk_size;
  bool verbose = false;
  bool no_weights = false;
  bool reuse_weights = false;
  std::optional<std::string> autotune_effort;  // off | default | audit
  std::optional<int> compile_workers;
  std::optional<std::string> repo_id;
  std::optional<std::string> official_source;
  std::optional<std::filesystem::path> model_cache;
  std::optional<std::filesystem::path> token_file;  // --token-file: a Hub token for gated or private repositories
  bool offline = false;                             // --offline: the hub cache alone
  // Speculative decoding (draft_model.h).
  std::optional<std::string> draft_model;             // --draft-model DIR|ORG/NAME[@REVISION]
  std::optional<int> mtp_draft_tokens;                // --mtp-draft-tokens N
  bool no_mtp = false;                                // --no-mtp
  std::optional<int> speculative_token_capacity;      // --speculative-token-capacity N
  bool no_mtp_adaptive_verification = false;          // --no-mtp-adaptive-verification
};

int run_export(const ExportOptions& options);

// Registers `export` and its flags.
void add_export_command(CLI::App& app, ExportOptions& options);
// The preparation flags (MODEL and every export option), shared with `debug-serve`.
void add_preparation_flags(CLI::App& command, ExportOptions& options);

// Where bundled checkpoints (the demo model) live: the project's assets directory.
std::filesystem::path assets_directory();

}  // namespace flare::ignition
