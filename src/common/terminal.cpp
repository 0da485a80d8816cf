#include "common/terminal.h"

#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include <fmt/format.h>

namespace flare {

TerminalInfo detect_terminal(std::FILE* stream, bool plain) {
  TerminalInfo info;
  const int fd = fileno(stream);
  info.is_tty = fd >= 0 && isatty(fd);
  const char* term = std::getenv("TERM");
  const bool dumb = term && std::strcmp(term, "dumb") == 0;
  info.styled = info.is_tty && !plain && !dumb;
  info.columns = 80;
  if (info.is_tty) {
    winsize size{};
    if (ioctl(fd, TIOCGWINSZ, &size) == 0 && size.ws_col > 0) info.columns = size.ws_col;
  }
  return info;
}

std::string paint(const TerminalInfo& terminal, const char* code, const std::string& text) {
  if (!terminal.styled) return text;
  return std::string(code) + text + style::reset;
}

std::size_t display_width(const std::string& text) {
  std::size_t width = 0;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    if (c == 0x1b) {  // skip CSI sequences
      while (i < text.size() && !std::isalpha(static_cast<unsigned char>(text[i]))) ++i;
      continue;
    }
    width += (c & 0xC0) != 0x80;
  }
  return width;
}

namespace {

// Byte offset after the first `n_columns` code points of plain text.
std::size_t prefix_bytes(const std::string& text, std::size_t n_columns) {
  std::size_t columns = 0, i = 0;
  for (; i < text.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    if ((c & 0xC0) != 0x80) {
      if (columns == n_columns) break;
      ++columns;
    }
  }
  return i;
}

std::string repeat(const char* piece, int n) {
  std::string out;
  for (int i = 0; i < n; ++i) out += piece;
  return out;
}

std::string pad_right(const std::string& text, std::size_t width) {
  const std::size_t current = display_width(text);
  return current >= width ? text : text + std::string(width - current, ' ');
}

}  // namespace

std::string truncate_to_width(const std::string& text, std::size_t width) {
  if (display_width(text) <= width) return text;
  if (width == 0) return "";
  return text.substr(0, prefix_bytes(text, width - 1)) + "\u2026";
}

std::vector<std::string> wrap_text(const std::string& text, std::size_t width) {
  std::vector<std::string> lines;
  if (width == 0) width = 1;
  std::string rest = text;
  while (display_width(rest) > width) {
    const std::size_t limit = prefix_bytes(rest, width);
    std::size_t cut = std::string::npos;
    const std::size_t space = rest.rfind(' ', limit);
    if (space != std::string::npos && space > 0) {
      cut = space;
    } else {
      const std::size_t separator = rest.find_last_of("/-_.,:", limit - 1);
      if (separator != std::string::npos && separator > 0) cut = separator + 1;
    }
    if (cut == std::string::npos || cut == 0) cut = limit;
    std::string line = rest.substr(0, cut);
    while (!line.empty() && line.back() == ' ') line.pop_back();
    lines.push_back(line);
    rest = rest.substr(cut);
    while (!rest.empty() && rest.front() == ' ') rest.erase(rest.begin());
  }
  if (!rest.empty() || lines.empty()) lines.push_back(rest);
  return lines;
}

std::string format_elapsed(std::chrono::steady_clock::duration elapsed) {
  const double seconds = std::chrono::duration<double>(elapsed).count();
  if (seconds < 60) return fmt::format("{:.1f}s", seconds);
  const auto whole = static_cast<long>(seconds);
  if (whole < 3600) return fmt::format("{}m{:02}s", whole / 60, whole % 60);
  return fmt::format("{}h{:02}m", whole / 3600, (whole % 3600) / 60);
}

std::string render_bar(const TerminalInfo& terminal, std::optional<double> fraction, int animation_phase) {
  constexpr int kCells = 10;
  std::string cells;
  if (!terminal.styled) {
    const int filled = fraction ? static_cast<int>(std::clamp(*fraction, 0.0, 1.0) * kCells) : 0;
    return "[" + repeat("#", filled) + repeat("-", kCells - filled) + "]";
  }
  if (!fraction) {
    // Unknown total: a cyan-to-gray gradient sweeping across all ten cells.
    static const int gradient[] = {51, 45, 39, 33, 67, 244, 242, 240, 238, 237};
    for (int i = 0; i < kCells; ++i) {
      const int shade = gradient[(i - animation_phase % kCells + kCells) % kCells];
      cells += fmt::format("\x1b[38;5;{}m\u2501", shade);
    }
    return "[" + cells + style::reset + "]";
  }
  const int halves = static_cast<int>(std::clamp(*fraction, 0.0, 1.0) * kCells * 2);
  const int full = halves / 2;
  const bool half = halves % 2 == 1;
  cells += style::cyan + repeat("\u2501", full);
  if (half) cells += "\u257A";  // left half cyan, boundary at half a cell
  cells += style::dark_gray + repeat("\u2501", kCells - full - (half ? 1 : 0));
  return "[" + cells + style::reset + "]";
}

std::string ProgressStage::render_line(const TerminalInfo& terminal, const std::string& description,
                                       const std::string& middle, const std::string& elapsed,
                                       const std::string& detail) {
  const std::size_t tail = display_width(middle) + 1 + display_width(elapsed);
  const std::size_t columns = static_cast<std::size_t>(std::max(terminal.columns, 20));
  const std::size_t room = columns > tail + 2 ? columns - tail - 2 : 1;
  const std::size_t label_width = std::min<std::size_t>(room, 24);
  const std::string label = pad_right(truncate_to_width(description, label_width), label_width);
  std::string line = label + " " + middle + " " + elapsed;
  if (!detail.empty()) {
    if (!terminal.is_tty) return line + "  " + detail;
    const std::size_t used = display_width(line) + 2;
    if (used + 2 <= columns) line += "  " + truncate_to_width(detail, columns - used);
  }
  return line;
}

ProgressStage::ProgressStage(const TerminalInfo& terminal, std::FILE* out, std::string description,
                             std::optional<std::uint64_t> total)
    : terminal_(terminal), out_(out), description_(std::move(description)), total_(total),
      start_(std::chrono::steady_clock::now()) {
  if (terminal_.styled) {
    draw(false, "");
    ticker_ = std::thread([this] { animate(); });
  } else {
    std::fprintf(out_, "%s ...\n", description_.c_str());
    std::fflush(out_);
  }
}

ProgressStage::~ProgressStage() {
  if (!finished_) failed();
}

void ProgressStage::animate() {
  while (!stop_.load()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    std::lock_guard lock(mutex_);
    if (finished_) break;
    ++phase_;
    draw(false, "");
  }
}

void ProgressStage::advance(std::uint64_t amount) { done_.fetch_add(amount); }

void ProgressStage::set_detail(std::string detail) {
  std::lock_guard lock(mutex_);
  detail_ = std::move(detail);
}

void ProgressStage::draw(bool final, const std::string& status) {
  const std::string elapsed = format_elapsed(std::chrono::steady_clock::now() - start_);
  std::string middle = status;
  if (!final) {
    std::optional<double> fraction;
    if (total_ && *total_ > 0) fraction = static_cast<double>(done_.load()) / static_cast<double>(*total_);
    middle = render_bar(terminal_, fraction, phase_);
  }
  const std::string line = render_line(terminal_, description_, middle, elapsed, detail_);
  if (terminal_.styled) {
    std::fprintf(out_, "\r\x1b[2K%s%s", line.c_str(), final ? "\n" : "");
  } else {
    std::fprintf(out_, "%s\n", line.c_str());
  }
  std::fflush(out_);
}

void ProgressStage::ok(const std::string& result) {
  {
    std::lock_guard lock(mutex_);
    if (finished_) return;
    finished_ = true;
    stop_ = true;
    if (!result.empty()) detail_ = result;
  }
  if (ticker_.joinable()) ticker_.join();
  std::lock_guard lock(mutex_);
  draw(true, paint(terminal_, style::green, "[ OK ]"));
}

void ProgressStage::failed(const std::string& reason) {
  {
    std::lock_guard lock(mutex_);
    if (finished_) return;
    finished_ = true;
    stop_ = true;
    if (!reason.empty()) detail_ = reason;
  }
  if (ticker_.joinable()) ticker_.join();
  std::lock_guard lock(mutex_);
  draw(true, paint(terminal_, style::red, "[ FAILED ]"));
}

int content_width(const TerminalInfo& terminal) {
  if (!terminal.is_tty) return 80;
  return std::clamp(terminal.columns, 64, 120);
}

std::string render_box(const TerminalInfo& terminal, const std::string& title,
                       const std::vector<std::string>& lines, int width) {
  width = std::max(width, 8);
  const std::size_t inner = static_cast<std::size_t>(width - 4);
  std::string out;
  const std::string label = " " + title + " ";
  const int rule = std::max(0, width - 3 - static_cast<int>(display_width(label)));
  out += paint(terminal, style::muted, "\u250C\u2500") + paint(terminal, style::cyan, label) +
         paint(terminal, style::muted, repeat("\u2500", rule) + "\u2510") + "\n";
  for (const auto& line : lines) {
    const std::vector<std::string> pieces =
        display_width(line) > inner ? wrap_text(line, inner) : std::vector<std::string>{line};
    for (const auto& piece : pieces) {
      out += paint(terminal, style::muted, "\u2502") + " " + pad_right(piece, inner) + " " +
             paint(terminal, style::muted, "\u2502") + "\n";
    }
  }
  out += paint(terminal, style::muted, "\u2514" + repeat("\u2500", width - 2) + "\u2518") + "\n";
  return out;
}

std::vector<std::string> render_fields(const TerminalInfo& terminal,
                                       const std::vector<std::pair<std::string, std::string>>& fields,
                                       int width) {
  std::size_t label_width = 0;
  for (const auto& [label, value] : fields) label_width = std::max(label_width, display_width(label));
  const std::size_t value_width = static_cast<std::size_t>(std::max<int>(8, width - static_cast<int>(label_width) - 2));
  std::vector<std::string> lines;
  for (const auto& [label, value] : fields) {
    const auto pieces = wrap_text(value, value_width);
    for (std::size_t i = 0; i < pieces.size(); ++i) {
      const std::string head = i == 0 ? paint(terminal, style::muted, pad_right(label, label_width))
                                      : std::string(label_width, ' ');
      lines.push_back(head + "  " + pieces[i]);
    }
  }
  return lines;
}

std::vector<std::string> render_table(const TerminalInfo& terminal, const std::vector<std::string>& header,
                                      const std::vector<std::vector<std::string>>& rows, int width) {
  const std::size_t n_columns = header.size();
  std::vector<std::size_t> widths(n_columns, 0);
  for (std::size_t c = 0; c < n_columns; ++c) widths[c] = display_width(header[c]);
  for (const auto& row : rows)
    for (std::size_t c = 0; c < n_columns && c < row.size(); ++c) widths[c] = std::max(widths[c], display_width(row[c]));
  // Shrink the widest columns until the table fits (cells then wrap).
  auto total = [&] {
    std::size_t sum = n_columns > 0 ? 2 * (n_columns - 1) : 0;
    for (auto w : widths) sum += w;
    return sum;
  };
  while (total() > static_cast<std::size_t>(width)) {
    auto widest = std::max_element(widths.begin(), widths.end());
    if (*widest <= 6) break;
    --*widest;
  }
  std::vector<std::string> lines;
  auto emit = [&](const std::vector<std::string>& cells, bool is_header) {
    std::vector<std::vector<std::string>> wrapped(n_columns);
    std::size_t height = 1;
    for (std::size_t c = 0; c < n_columns; ++c) {
      wrapped[c] = wrap_text(c < cells.size() ? cells[c] : "", widths[c]);
      height = std::max(height, wrapped[c].size());
    }
    for (std::size_t h = 0; h < height; ++h) {
      std::string line;
      for (std::size_t c = 0; c < n_columns; ++c) {
        const std::string cell = h < wrapped[c].size() ? wrapped[c][h] : "";
        const std::string padded = c + 1 < n_columns ? pad_right(cell, widths[c]) : cell;
        line += is_header ? paint(terminal, style::muted, padded) : padded;
        if (c + 1 < n_columns) line += "  ";
      }
      while (!line.empty() && line.back() == ' ') line.pop_back();
      lines.push_back(line);
    }
  };
  emit(header, true);
  for (const auto& row : rows) emit(row, false);
  return lines;
}

}  // namespace flare
