// The live metrics dashboard of `flare run` (spec cli-design 5.2). On a usable terminal it takes
// the alternate screen after the loading stages and redraws a few times a second in place
// (cursor home, each line cleared to its end, no full-screen clear: no flicker), at the
// terminal's current size; stop() restores the screen and the cursor. Redirected, with --plain
// or TERM=dumb, it writes a plain metrics line every ten seconds while the server is doing
// something (an idle server writes none), and a last one at stop().
//
// Threads: one drawing thread of its own, which reads the server's metrics and the engine's
// stats through the `sample` callback (both are thread-safe) and writes to `out` alone.
#pragma once

#include <condition_variable>
#include <cstdio>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/terminal.h"
#include "flare/dashboard_view.h"

namespace flare::cli {

// The dashboard's lines for `view`, at most `columns` wide and `rows` high (sections that do not
// fit are left out, lowest first).
std::vector<std::string> render_dashboard(const TerminalInfo& terminal, const DashboardInfo& info,
                                          const DashboardView& view, int columns, int rows);

// One plain line ("metrics: running 1/4, queued 0, ...") for logs.
std::string render_metrics_line(const DashboardInfo& info, const DashboardView& view);

class Dashboard {
 public:
  using Sampler = std::function<DashboardSample()>;
  struct Timing {
    std::chrono::milliseconds refresh{250};       // terminal redraws
    std::chrono::milliseconds plain_every{10'000};  // plain lines
    std::chrono::milliseconds window{10'000};     // rates and percentiles
  };

  Dashboard(const TerminalInfo& terminal, std::FILE* out, DashboardInfo info, Sampler sample);
  Dashboard(const TerminalInfo& terminal, std::FILE* out, DashboardInfo info, Sampler sample, Timing timing);
  ~Dashboard();  // stop()
  Dashboard(const Dashboard&) = delete;
  Dashboard& operator=(const Dashboard&) = delete;

  // Set while the server drains (shown in the header).
  void set_status(std::string status);
  // Stops drawing and gives the terminal back as it was; idempotent.
  void stop();

 private:
  void run();
  void draw(const DashboardView& view);

  TerminalInfo terminal_;
  std::FILE* out_;
  DashboardInfo info_;
  Sampler sample_;
  Timing timing_;
  DashboardWindow window_;
  DashboardClock::time_point started_;
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;
  bool screen_taken_ = false;
  std::string status_;
  std::thread thread_;
};

}  // namespace flare::cli
