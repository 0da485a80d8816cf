// Terminal output: styling only on a terminal (off when redirected, with --plain, or TERM=dumb),
// the staged progress lines of spec cli-design section 5.2, and light single-line boxes and
// aligned tables for inspect-style output.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace flare {

struct TerminalInfo {
  bool styled = false;  // ANSI colours and animation
  bool is_tty = false;
  int columns = 80;
};

// `plain` is --plain. Redirected output is never styled and is 80 columns wide.
TerminalInfo detect_terminal(std::FILE* stream, bool plain);

namespace style {
inline constexpr const char* reset = "\x1b[0m";
inline constexpr const char* bold = "\x1b[1m";
inline constexpr const char* cyan = "\x1b[36m";
inline constexpr const char* muted = "\x1b[90m";
inline constexpr const char* green = "\x1b[32m";
inline constexpr const char* red = "\x1b[31m";
inline constexpr const char* dark_gray = "\x1b[38;5;238m";
}  // namespace style

// Wraps `text` in `code` ... reset when styled; otherwise returns it unchanged.
std::string paint(const TerminalInfo& terminal, const char* code, const std::string& text);

// Display columns of UTF-8 text without ANSI escapes (code points; all text here is narrow).
std::size_t display_width(const std::string& text);
// Cuts text to at most `width` columns, ending with "…" when it was cut.
std::string truncate_to_width(const std::string& text, std::size_t width);
// Splits text into lines of at most `width` columns, preferring breaks at spaces and then at
// separators (/ - _ . ,); a word longer than the width is split.
std::vector<std::string> wrap_text(const std::string& text, std::size_t width);

std::string format_elapsed(std::chrono::steady_clock::duration elapsed);  // "0.4s", "12.3s", "2m05s"

// The ten-column bar: `fraction` in [0,1] (half-cell resolution); nullopt animates.
std::string render_bar(const TerminalInfo& terminal, std::optional<double> fraction, int animation_phase);

// One stage of a staged operation ("Verify package", "Load weights"). On a terminal it redraws
// one line with a bar and elapsed time (animated when the total is unknown); redirected, it prints
// a plain start line and a completion line. Finish with ok() or failed(); a stage destroyed
// unfinished reports failure.
class ProgressStage {
 public:
  ProgressStage(const TerminalInfo& terminal, std::FILE* out, std::string description,
                std::optional<std::uint64_t> total = std::nullopt);
  ~ProgressStage();
  ProgressStage(const ProgressStage&) = delete;
  ProgressStage& operator=(const ProgressStage&) = delete;

  void advance(std::uint64_t amount);  // thread-safe
  void set_detail(std::string detail);  // shown after the status while running and when done
  void ok(const std::string& result = "");
  void failed(const std::string& reason = "");

  // The line for given state, exposed for tests: description, bar or status, elapsed, then the
  // result detail. On a terminal the description and detail are shortened to fit the width;
  // status and elapsed time always stay. Redirected lines keep their whole detail.
  static std::string render_line(const TerminalInfo& terminal, const std::string& description,
                                 const std::string& middle, const std::string& elapsed,
                                 const std::string& detail = "");

 private:
  void draw(bool final, const std::string& status);
  void animate();

  TerminalInfo terminal_;
  std::FILE* out_;
  std::string description_;
  std::string detail_;
  std::optional<std::uint64_t> total_;
  std::atomic<std::uint64_t> done_{0};
  std::chrono::steady_clock::time_point start_;
  std::mutex mutex_;
  bool finished_ = false;
  int phase_ = 0;
  std::atomic<bool> stop_{false};
  std::thread ticker_;
};

// Light single-line box: ┌─ title ───┐ │ line │ └──────┘, `width` columns overall; lines
// longer than the inner width are wrapped.
std::string render_box(const TerminalInfo& terminal, const std::string& title,
                       const std::vector<std::string>& lines, int width);

// Aligned "label  value" rows; values wrap under themselves.
std::vector<std::string> render_fields(const TerminalInfo& terminal,
                                       const std::vector<std::pair<std::string, std::string>>& fields,
                                       int width);

// Aligned table with a header row; cells wrap (identifiers are wrapped, never truncated).
std::vector<std::string> render_table(const TerminalInfo& terminal, const std::vector<std::string>& header,
                                      const std::vector<std::vector<std::string>>& rows, int width);

// Width for boxed inspect-style output: the terminal's width clamped to 64..120; 80 when redirected.
int content_width(const TerminalInfo& terminal);

}  // namespace flare
