// Five-row pixel font and the banner layout (see name_banner.h).
#include "flare/name_banner.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <string_view>

#include <fmt/format.h>

namespace flare::cli {
namespace {

struct Glyph {
  char c;
  std::array<const char*, kBannerRows> rows;  // '#' = filled cell, '.' = empty; equal widths
};

// clang-format off
constexpr Glyph kGlyphs[] = {
    {'A', {".##.", "#..#", "####", "#..#", "#..#"}}, {'B', {"###.", "#..#", "###.", "#..#", "###."}},
    {'C', {".###", "#...", "#...", "#...", ".###"}}, {'D', {"###.", "#..#", "#..#", "#..#", "###."}},
    {'E', {"####", "#...", "###.", "#...", "####"}}, {'F', {"####", "#...", "###.", "#...", "#..."}},
    {'G', {".###", "#...", "#.##", "#..#", ".###"}}, {'H', {"#..#", "#..#", "####", "#..#", "#..#"}},
    {'I', {"###", ".#.", ".#.", ".#.", "###"}},      {'J', {"..##", "...#", "...#", "#..#", ".##."}},
    {'K', {"#..#", "#.#.", "##..", "#.#.", "#..#"}}, {'L', {"#...", "#...", "#...", "#...", "####"}},
    {'M', {"#...#", "##.##", "#.#.#", "#...#", "#...#"}}, {'N', {"#...#", "##..#", "#.#.#", "#..##", "#...#"}},
    {'O', {".##.", "#..#", "#..#", "#..#", ".##."}}, {'P', {"###.", "#..#", "###.", "#...", "#..."}},
    {'Q', {".##.", "#..#", "#..#", "#.##", ".###"}}, {'R', {"###.", "#..#", "###.", "#.#.", "#..#"}},
    {'S', {".###", "#...", ".##.", "...#", "###."}}, {'T', {"#####", "..#..", "..#..", "..#..", "..#.."}},
    {'U', {"#..#", "#..#", "#..#", "#..#", ".##."}}, {'V', {"#...#", "#...#", "#...#", ".#.#.", "..#.."}},
    {'W', {"#...#", "#...#", "#.#.#", "##.##", "#...#"}}, {'X', {"#...#", ".#.#.", "..#..", ".#.#.", "#...#"}},
    {'Y', {"#...#", ".#.#.", "..#..", "..#..", "..#.."}}, {'Z', {"####", "...#", ".##.", "#...", "####"}},
    {'0', {".##.", "#..#", "#.##", "##.#", ".##."}}, {'1', {".#.", "##.", ".#.", ".#.", "###"}},
    {'2', {"###.", "...#", ".##.", "#...", "####"}}, {'3', {"###.", "...#", ".##.", "...#", "###."}},
    {'4', {"#..#", "#..#", "####", "...#", "...#"}}, {'5', {"####", "#...", "###.", "...#", "###."}},
    {'6', {".##.", "#...", "###.", "#..#", ".##."}}, {'7', {"####", "...#", "..#.", ".#..", ".#.."}},
    {'8', {".##.", "#..#", ".##.", "#..#", ".##."}}, {'9', {".##.", "#..#", ".###", "...#", ".##."}},
    {'-', {"...", "...", "###", "...", "..."}},      {'_', {"...", "...", "...", "...", "###"}},
    {'.', {".", ".", ".", ".", "#"}},
};
// clang-format on

const Glyph* find_glyph(char c) {
  const char upper = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  for (const auto& glyph : kGlyphs) {
    if (glyph.c == upper) return &glyph;
  }
  return nullptr;
}

int glyph_width(char c) { return static_cast<int>(std::string_view(find_glyph(c)->rows[0]).size()); }

bool is_separator(char c) { return c == '-' || c == '_' || c == '.'; }

// Gold (255, 200, 40) at the left edge to orange (255, 110, 20) at the right.
std::string gradient_code(int column, int n_columns) {
  const double t = n_columns > 1 ? static_cast<double>(column) / (n_columns - 1) : 0.0;
  const int green = static_cast<int>(200 + (110 - 200) * t + 0.5);
  const int blue = static_cast<int>(40 + (20 - 40) * t + 0.5);
  return fmt::format("\x1b[38;2;255;{};{}m", green, blue);
}

void append_piece_rows(const TerminalInfo& terminal, const std::string& piece, int gradient_columns,
                       std::vector<std::string>* lines) {
  for (int row = 0; row < kBannerRows; ++row) {
    std::string line;
    int column = 0;
    for (std::size_t i = 0; i < piece.size(); ++i) {
      if (i > 0) {
        line += ' ';
        ++column;
      }
      for (const char* cell = find_glyph(piece[i])->rows[row]; *cell; ++cell, ++column) {
        if (*cell != '#') {
          line += ' ';
        } else if (terminal.styled) {
          line += gradient_code(column, gradient_columns) + "█";
        } else {
          line += "█";
        }
      }
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    if (terminal.styled) line += "\x1b[0m";
    lines->push_back(std::move(line));
  }
}

}  // namespace

bool banner_supported(const std::string& name) {
  if (name.empty()) return false;
  for (char c : name) {
    if (find_glyph(c) == nullptr) return false;
  }
  return true;
}

int banner_width(const std::string& text) {
  int width = 0;
  for (std::size_t i = 0; i < text.size(); ++i) width += glyph_width(text[i]) + (i > 0 ? 1 : 0);
  return width;
}

std::vector<std::string> banner_pieces(const std::string& name, int width) {
  // Words end after each separator, so a separator stays with the word before it.
  std::vector<std::string> words;
  std::string word;
  for (char c : name) {
    word += c;
    if (is_separator(c)) words.push_back(std::move(word)), word.clear();
  }
  if (!word.empty()) words.push_back(std::move(word));
  std::vector<std::string> pieces;
  std::string current;
  for (const auto& w : words) {
    if (!current.empty() && banner_width(current + w) <= width) {
      current += w;
      continue;
    }
    if (!current.empty()) pieces.push_back(std::move(current)), current.clear();
    if (banner_width(w) <= width) {
      current = w;
      continue;
    }
    // One word alone is too wide: split it between letters.
    for (char c : w) {
      if (!current.empty() && banner_width(current + c) > width) pieces.push_back(std::move(current)), current.clear();
      current += c;
    }
  }
  if (!current.empty()) pieces.push_back(std::move(current));
  return pieces;
}

std::optional<std::vector<std::string>> render_name_banner(const TerminalInfo& terminal, const std::string& name,
                                                           int width) {
  if (!banner_supported(name)) return std::nullopt;
  auto pieces = banner_pieces(name, width);
  int widest = 0;
  for (const auto& piece : pieces) widest = std::max(widest, banner_width(piece));
  if (widest > width) return std::nullopt;
  std::vector<std::string> lines;
  for (std::size_t i = 0; i < pieces.size(); ++i) {
    if (i > 0) lines.emplace_back();
    append_piece_rows(terminal, pieces[i], widest, &lines);
  }
  return lines;
}

}  // namespace flare::cli
