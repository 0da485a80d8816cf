// The dashboard's drawing thread and terminal handling (dashboard.h).
#include "flare/dashboard.h"

#include <sys/ioctl.h>
#include <unistd.h>

#include <fmt/format.h>

namespace flare::cli {
namespace {

// Alternate screen, hidden cursor, no line wrapping (a line wider than the terminal is clipped
// rather than pushing the screen up); and back.
constexpr const char* kTakeScreen = "\x1b[?1049h\x1b[?25l\x1b[?7l";
constexpr const char* kGiveScreenBack = "\x1b[?7h\x1b[?25h\x1b[?1049l";

struct ScreenSize {
  int columns = 80, rows = 24;
};

ScreenSize screen_size(std::FILE* out, int fallback_columns) {
  ScreenSize size{fallback_columns, 24};
  winsize ws{};
  if (ioctl(fileno(out), TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0 && ws.ws_row > 0) {
    size.columns = ws.ws_col;
    size.rows = ws.ws_row;
  }
  return size;
}

}  // namespace

Dashboard::Dashboard(const TerminalInfo& terminal, std::FILE* out, DashboardInfo info, Sampler sample)
    : Dashboard(terminal, out, std::move(info), std::move(sample), Timing{}) {}

Dashboard::Dashboard(const TerminalInfo& terminal, std::FILE* out, DashboardInfo info, Sampler sample, Timing timing)
    : terminal_(terminal), out_(out), info_(std::move(info)), sample_(std::move(sample)), timing_(timing),
      window_(timing.window), started_(DashboardClock::now()) {
  if (terminal_.styled) {
    std::fputs(kTakeScreen, out_);
    std::fflush(out_);
    screen_taken_ = true;
  }
  thread_ = std::thread([this] { run(); });
}

Dashboard::~Dashboard() { stop(); }

void Dashboard::set_status(std::string status) {
  std::lock_guard lock(mutex_);
  status_ = std::move(status);
  wake_.notify_all();
}

void Dashboard::stop() {
  {
    std::lock_guard lock(mutex_);
    if (stopping_ && !thread_.joinable()) return;
    stopping_ = true;
    wake_.notify_all();
  }
  if (thread_.joinable()) thread_.join();
  if (screen_taken_) {
    std::fputs(kGiveScreenBack, out_);
    std::fflush(out_);
    screen_taken_ = false;
  }
}

namespace {

// What changes when the server does anything: an idle server writes no plain lines.
std::string activity(const DashboardSample& s) {
  std::uint64_t n_requests = 0, n_tokens = 0;
  for (const auto& [status, count] : s.metrics.requests_by_status) n_requests += count;
  for (auto c : s.metrics.ttft_counts) n_tokens += c;
  for (auto c : s.metrics.tpot_counts) n_tokens += c;
  return fmt::format("{} {} {} {} {} {}", n_requests, n_tokens, s.engine.n_running, s.engine.n_waiting,
                     s.n_steps, s.metrics.n_evicted_connections);
}

}  // namespace

void Dashboard::run() {
  auto last_plain = DashboardClock::now();
  std::string last_activity;
  std::unique_lock lock(mutex_);
  for (;;) {
    const bool stopping = stopping_;
    lock.unlock();
    DashboardSample sample = sample_();
    const std::string now_activity = activity(sample);
    window_.add(std::move(sample));
    const DashboardView view = window_.view(info_, started_);
    if (terminal_.styled) {
      draw(view);
    } else if (stopping || (DashboardClock::now() - last_plain >= timing_.plain_every && now_activity != last_activity)) {
      // Redirected: a line now and then while something happens, and a last one at shutdown.
      std::fprintf(out_, "%s\n", render_metrics_line(info_, view).c_str());
      std::fflush(out_);
      last_plain = DashboardClock::now();
      last_activity = now_activity;
    }
    lock.lock();
    if (stopping) return;
    wake_.wait_for(lock, timing_.refresh, [&] { return stopping_; });
  }
}

void Dashboard::draw(const DashboardView& view) {
  const ScreenSize size = screen_size(out_, terminal_.columns);
  std::string status;
  {
    std::lock_guard lock(mutex_);
    status = status_;
  }
  std::vector<std::string> lines = render_dashboard(terminal_, info_, view, size.columns, size.rows - (status.empty() ? 0 : 1));
  if (!status.empty()) lines.push_back(paint(terminal_, style::bold, status));
  // One write per frame: home, every line overwritten and cleared to its end, the rest cleared.
  std::string frame = "\x1b[H";
  for (std::size_t i = 0; i < lines.size(); ++i) {
    frame += lines[i];
    // A full-width line leaves the cursor on its last cell (wrapping is off): clearing from there
    // would erase that cell.
    if (display_width(lines[i]) < static_cast<std::size_t>(size.columns)) frame += "\x1b[K";
    if (i + 1 < lines.size()) frame += "\r\n";
  }
  // Clear what an earlier, taller frame left below, from the start of the next row (clearing from
  // the cursor would erase a full-width last line's last cell).
  if (static_cast<int>(lines.size()) < size.rows) frame += fmt::format("\x1b[{};1H\x1b[J", lines.size() + 1);
  std::fwrite(frame.data(), 1, frame.size(), out_);
  std::fflush(out_);
}

}  // namespace flare::cli
