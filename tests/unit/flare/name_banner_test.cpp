// The five-line name banner of `flare inspect`: glyph coverage, spaced letters, wrapping at
// separators before splitting words, the gradient only when styled, and unsupported names.
#include "flare/name_banner.h"

#include <gtest/gtest.h>

#include "common/terminal.h"

namespace flare::cli {
namespace {

TerminalInfo plain_terminal() { return TerminalInfo{false, false, 80}; }
TerminalInfo styled_terminal() { return TerminalInfo{true, true, 100}; }

TEST(NameBanner, FiveRowsOfSpacedLetters) {
  auto lines = render_name_banner(plain_terminal(), "demo", 80);
  ASSERT_TRUE(lines.has_value());
  ASSERT_EQ(lines->size(), 5u);
  EXPECT_EQ(banner_width("demo"), 4 + 1 + 4 + 1 + 5 + 1 + 4);
  for (const auto& line : *lines) {
    EXPECT_LE(display_width(line), static_cast<std::size_t>(banner_width("demo")));
    EXPECT_EQ(line.find("\x1b["), std::string::npos);
  }
  // Row 0 of D is "###." then one space, so column 5 (E) starts after a blank separator column.
  EXPECT_EQ((*lines)[0].substr(0, std::string("███").size()), "███");
}

TEST(NameBanner, LowercaseAndUppercaseRenderAlike) {
  EXPECT_EQ(render_name_banner(plain_terminal(), "Qwen3-8B", 80), render_name_banner(plain_terminal(), "QWEN3-8b", 80));
}

TEST(NameBanner, GradientOnlyWhenStyled) {
  auto styled = render_name_banner(styled_terminal(), "ab", 80);
  ASSERT_TRUE(styled.has_value());
  // Row 1 of A and B is "#..#": filled at the left edge (gold) and at the right edge (orange).
  EXPECT_NE((*styled)[1].find("\x1b[38;2;255;200;40m"), std::string::npos);
  EXPECT_NE((*styled)[1].find("\x1b[38;2;255;110;20m"), std::string::npos);
  for (int row = 0; row < kBannerRows; ++row) {
    EXPECT_EQ(display_width((*styled)[row]), display_width((*render_name_banner(plain_terminal(), "ab", 80))[row]));
  }
}

TEST(NameBanner, UnsupportedCharactersFallBackToText) {
  EXPECT_FALSE(render_name_banner(plain_terminal(), "model/name", 80).has_value());
  EXPECT_FALSE(render_name_banner(plain_terminal(), "naïve", 80).has_value());
  EXPECT_FALSE(render_name_banner(plain_terminal(), "", 80).has_value());
  EXPECT_FALSE(render_name_banner(plain_terminal(), "a b", 80).has_value());
  EXPECT_TRUE(banner_supported("Llama-3.1_8B"));
}

TEST(NameBanner, WrapsAtSeparatorsFirst) {
  const std::string name = "qwen3-coder-30b-a3b-instruct";
  auto pieces = banner_pieces(name, 64);
  ASSERT_GT(pieces.size(), 1u);
  std::string joined;
  for (const auto& piece : pieces) {
    EXPECT_LE(banner_width(piece), 64) << piece;
    joined += piece;
  }
  EXPECT_EQ(joined, name);
  // Every piece but the last ends at a separator: no word was split.
  for (std::size_t i = 0; i + 1 < pieces.size(); ++i) EXPECT_EQ(pieces[i].back(), '-') << pieces[i];
  auto lines = render_name_banner(plain_terminal(), name, 64);
  ASSERT_TRUE(lines.has_value());
  EXPECT_EQ(lines->size(), pieces.size() * 5 + (pieces.size() - 1));  // blank line between pieces
}

TEST(NameBanner, SplitsAWordOnlyWhenItAloneIsTooWide) {
  const std::string name = "supercalifragilisticexpialidocious";
  auto pieces = banner_pieces(name, 64);
  ASSERT_GT(pieces.size(), 1u);
  std::string joined;
  for (const auto& piece : pieces) {
    EXPECT_LE(banner_width(piece), 64);
    joined += piece;
  }
  EXPECT_EQ(joined, name);
  EXPECT_FALSE(render_name_banner(plain_terminal(), "m", 3).has_value());  // one letter does not fit
}

TEST(NameBanner, HostileLengthsStayBounded) {
  const std::string name(5000, 'w');
  auto lines = render_name_banner(plain_terminal(), name, 120);
  ASSERT_TRUE(lines.has_value());
  for (const auto& line : *lines) EXPECT_LE(display_width(line), 120u);
  std::string separators(300, '-');
  EXPECT_TRUE(render_name_banner(plain_terminal(), separators, 64).has_value());
}

}  // namespace
}  // namespace flare::cli
