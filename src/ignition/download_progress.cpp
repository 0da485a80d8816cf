#include "ignition/download_progress.h"

#include <cstdio>

#include "common/sizes.h"

namespace flare::ignition {
namespace {

using Clock = std::chrono::steady_clock;

std::string format_rate(double bytes_per_second) {
  return format_bytes(static_cast<std::uint64_t>(bytes_per_second)) + "/s";
}

}  // namespace

DownloadProgress::DownloadProgress(const TerminalInfo& terminal, std::string repository)
    : terminal_(terminal), repository_(std::move(repository)), started_(Clock::now()), last_update_(started_),
      last_line_(started_) {}

DownloadProgress::~DownloadProgress() = default;  // an unfinished stage reports failure

std::string DownloadProgress::render_status(std::uint64_t done, std::uint64_t total, double bytes_per_second) {
  std::string text = fmt::format("{} of {}", format_bytes(done), format_bytes(total));
  if (bytes_per_second > 0) {
    text += " \u00b7 " + format_rate(bytes_per_second);
    const double seconds = static_cast<double>(total > done ? total - done : 0) / bytes_per_second;
    text += " \u00b7 " + format_elapsed(std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds))) +
            " left";
  }
  return text;
}

void DownloadProgress::plan(std::size_t n_files, std::uint64_t n_bytes, std::size_t n_reused) {
  std::lock_guard lock(mutex_);
  total_ = n_bytes;
  started_ = Clock::now();
  last_update_ = last_line_ = started_;
  stage_ = std::make_unique<ProgressStage>(terminal_, stderr, "Download checkpoint", n_bytes);
  if (!terminal_.styled)
    std::fprintf(stderr, "  %s: %zu files to download (%s), %zu already in the hub cache\n", repository_.c_str(), n_files,
                 format_bytes(n_bytes).c_str(), n_reused);
}

void DownloadProgress::file_done(const std::string& filename, std::uint64_t size, bool transferred) {
  std::lock_guard lock(mutex_);
  if (!terminal_.styled)
    std::fprintf(stderr, "  %s %s%s\n", filename.c_str(), format_bytes(size).c_str(),
                 transferred ? "" : " (already in the hub cache)");
}

void DownloadProgress::bytes_received(std::uint64_t n_bytes) {
  std::lock_guard lock(mutex_);
  if (!stage_) return;  // the index, fetched before the plan
  done_ += n_bytes;
  stage_->advance(n_bytes);
  update_locked(false);
}

void DownloadProgress::bytes_resumed(std::uint64_t n_bytes) {
  std::lock_guard lock(mutex_);
  if (!stage_) return;
  done_ += n_bytes;
  resumed_ += n_bytes;
  stage_->advance(n_bytes);
}

void DownloadProgress::note(const std::string& message) {
  std::lock_guard lock(mutex_);
  if (terminal_.styled && stage_) {
    stage_->set_detail(message);
    last_update_ = Clock::now();
  } else {
    std::fprintf(stderr, "  %s\n", message.c_str());
  }
}

void DownloadProgress::update_locked(bool force) {
  const Clock::time_point now = Clock::now();
  const double seconds = std::chrono::duration<double>(now - started_).count();
  const double rate = seconds > 0.2 ? static_cast<double>(done_ - resumed_) / seconds : 0.0;
  if (terminal_.styled) {
    if (!force && now - last_update_ < std::chrono::milliseconds(200)) return;
    last_update_ = now;
    stage_->set_detail(render_status(done_, total_, rate));
  } else {
    if (!force && now - last_line_ < std::chrono::seconds(5)) return;
    last_line_ = now;
    const int percent = total_ ? static_cast<int>(100.0 * static_cast<double>(done_) / static_cast<double>(total_)) : 100;
    std::fprintf(stderr, "  %d%% %s\n", percent, render_status(done_, total_, rate).c_str());
  }
}

void DownloadProgress::finish(const hub::CheckpointSnapshot& result) {
  std::lock_guard lock(mutex_);
  if (!stage_) stage_ = std::make_unique<ProgressStage>(terminal_, stderr, "Download checkpoint", 0);
  const double seconds = std::chrono::duration<double>(Clock::now() - started_).count();
  std::string text = fmt::format("{} files, {}", result.n_transferred, format_bytes(result.transferred_bytes));
  if (result.n_transferred > 0 && seconds > 0)
    text += fmt::format(" ({})", format_rate(static_cast<double>(result.transferred_bytes) / seconds));
  if (resumed_ > 0) text += fmt::format(", {} resumed", format_bytes(resumed_));
  text += fmt::format("; {} already in the hub cache; commit {}", result.n_reused, result.commit.substr(0, 12));
  stage_->ok(text);
}

}  // namespace flare::ignition
