// The `Download checkpoint` stage: on a terminal, one redrawn line with a byte bar, the bytes so
// far, the rate and the time left; redirected, plain lines (the stage's start, each file as it
// lands, a progress line at most every 5 s, notes such as retries and resumes, the result).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "common/terminal.h"
#include "hub/checkpoint_fetch.h"

namespace flare::ignition {

class DownloadProgress : public hub::CheckpointReporter {
 public:
  DownloadProgress(const TerminalInfo& terminal, std::string repository);
  ~DownloadProgress() override;

  void plan(std::size_t n_files, std::uint64_t n_bytes, std::size_t n_reused) override;
  void file_done(const std::string& filename, std::uint64_t size, bool transferred) override;
  void bytes_received(std::uint64_t n_bytes) override;
  void bytes_resumed(std::uint64_t n_bytes) override;
  void note(const std::string& message) override;

  // Ends the stage: "N files, X in T (R/s); M already cached".
  void finish(const hub::CheckpointSnapshot& result);

  // "1.2 GiB of 4.0 GiB · 310 MiB/s · 9s left" (exposed for tests).
  static std::string render_status(std::uint64_t done, std::uint64_t total, double bytes_per_second);

 private:
  void update_locked(bool force);

  TerminalInfo terminal_;
  std::string repository_;
  std::mutex mutex_;
  std::unique_ptr<ProgressStage> stage_;
  std::uint64_t total_ = 0, done_ = 0, resumed_ = 0;
  std::chrono::steady_clock::time_point started_, last_update_, last_line_;
};

}  // namespace flare::ignition
