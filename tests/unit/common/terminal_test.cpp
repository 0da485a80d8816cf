#include "common/terminal.h"

#include <gtest/gtest.h>

#include <cstdio>

namespace flare {
namespace {

TerminalInfo plain(int columns = 80) { return TerminalInfo{false, false, columns}; }
TerminalInfo styled(int columns = 100) { return TerminalInfo{true, true, columns}; }

TEST(Terminal, RedirectedOutputIsPlain) {
  std::FILE* file = std::tmpfile();
  const TerminalInfo info = detect_terminal(file, false);
  EXPECT_FALSE(info.styled);
  EXPECT_FALSE(info.is_tty);
  EXPECT_EQ(info.columns, 80);
  EXPECT_EQ(content_width(info), 80);
  std::fclose(file);
}

TEST(Terminal, ContentWidthClamps) {
  EXPECT_EQ(content_width(styled(40)), 64);
  EXPECT_EQ(content_width(styled(100)), 100);
  EXPECT_EQ(content_width(styled(300)), 120);
}

TEST(Terminal, PaintOnlyWhenStyled) {
  EXPECT_EQ(paint(plain(), style::cyan, "x"), "x");
  EXPECT_EQ(paint(styled(), style::cyan, "x"), std::string(style::cyan) + "x" + style::reset);
  EXPECT_EQ(display_width(paint(styled(), style::cyan, "héllo")), 5u);
}

TEST(Terminal, WrapPrefersSpacesThenSeparators) {
  EXPECT_EQ(wrap_text("alpha beta gamma", 11), (std::vector<std::string>{"alpha beta", "gamma"}));
  EXPECT_EQ(wrap_text("org/very-long-model-name", 10), (std::vector<std::string>{"org/very-", "long-", "model-name"}));
  EXPECT_EQ(wrap_text("abcdefghij", 4), (std::vector<std::string>{"abcd", "efgh", "ij"}));
  EXPECT_EQ(wrap_text("", 4), (std::vector<std::string>{""}));
  for (const auto& line : wrap_text(std::string(1000, 'x') + " y", 7)) EXPECT_LE(display_width(line), 7u);
}

TEST(Terminal, Truncate) {
  EXPECT_EQ(truncate_to_width("Load weights", 20), "Load weights");
  EXPECT_EQ(truncate_to_width("Load weights", 6), "Load \u2026");
  EXPECT_EQ(display_width(truncate_to_width("Load weights", 6)), 6u);
}

TEST(Terminal, BarHasTenCells) {
  EXPECT_EQ(render_bar(plain(), 0.5, 0), "[#####-----]");
  EXPECT_EQ(render_bar(plain(), 1.0, 0), "[##########]");
  EXPECT_EQ(render_bar(plain(), std::nullopt, 0), "[----------]");
  EXPECT_EQ(display_width(render_bar(styled(), 0.55, 0)), 12u);
  EXPECT_EQ(display_width(render_bar(styled(), std::nullopt, 3)), 12u);
}

TEST(Terminal, NarrowConsoleKeepsStatusAndTiming) {
  const std::string line = ProgressStage::render_line(styled(30), "Verify stored data for every payload", "[ OK ]", "12.3s");
  EXPECT_LE(display_width(line), 30u);
  EXPECT_NE(line.find("[ OK ]"), std::string::npos);
  EXPECT_NE(line.find("12.3s"), std::string::npos);
}

TEST(Terminal, RedirectedStagePrintsStartAndCompletionLines) {
  std::FILE* file = std::tmpfile();
  {
    ProgressStage stage(plain(), file, "Load weights", 100);
    stage.advance(100);
    stage.ok();
  }
  {
    ProgressStage stage(plain(), file, "Build graphs");
    // destroyed unfinished: reported as failed
  }
  std::rewind(file);
  char buffer[512] = {};
  const std::size_t n = std::fread(buffer, 1, sizeof buffer - 1, file);
  std::fclose(file);
  const std::string text(buffer, n);
  EXPECT_NE(text.find("Load weights ...\n"), std::string::npos) << text;
  EXPECT_NE(text.find("[ OK ]"), std::string::npos) << text;
  EXPECT_NE(text.find("Build graphs ...\n"), std::string::npos) << text;
  EXPECT_NE(text.find("[ FAILED ]"), std::string::npos) << text;
  EXPECT_EQ(text.find('\x1b'), std::string::npos) << "no escapes when redirected";
}

TEST(Terminal, FormatElapsed) {
  using namespace std::chrono_literals;
  EXPECT_EQ(format_elapsed(400ms), "0.4s");
  EXPECT_EQ(format_elapsed(125s), "2m05s");
  EXPECT_EQ(format_elapsed(3725s), "1h02m");
}

TEST(Terminal, BoxLinesHaveTheRequestedWidth) {
  const std::string box = render_box(plain(), "Model", {"name  demo", std::string(200, 'x')}, 64);
  std::size_t start = 0;
  int n_lines = 0;
  while (start < box.size()) {
    const std::size_t end = box.find('\n', start);
    EXPECT_EQ(display_width(box.substr(start, end - start)), 64u) << box.substr(start, end - start);
    start = end + 1;
    ++n_lines;
  }
  EXPECT_EQ(n_lines, 2 + 1 + 4);  // top, bottom, one short line, 200 chars wrapped into 60-column pieces
  EXPECT_EQ(box.rfind("\u250C\u2500 Model ", 0), 0u);
}

TEST(Terminal, FieldsAndTablesAlign) {
  const auto fields = render_fields(plain(), {{"name", "demo"}, {"architecture", "Qwen3ForCausalLM"}}, 60);
  ASSERT_EQ(fields.size(), 2u);
  EXPECT_EQ(fields[0], "name          demo");
  EXPECT_EQ(fields[1], "architecture  Qwen3ForCausalLM");
  const auto table = render_table(plain(), {"MODEL", "VERSION"}, {{"demo", "1"}, {"a-very-long-model-identifier", "22"}}, 80);
  ASSERT_EQ(table.size(), 3u);
  EXPECT_EQ(table[0], "MODEL                         VERSION");
  EXPECT_EQ(table[2], "a-very-long-model-identifier  22");
  const auto narrow = render_table(plain(), {"MODEL", "VERSION"}, {{"a-very-long-model-identifier", "22"}}, 20);
  for (const auto& line : narrow) EXPECT_LE(display_width(line), 20u);
  std::string joined;
  for (const auto& line : narrow) joined += line;
  EXPECT_NE(joined.find("identifier"), std::string::npos) << "identifiers wrap, never truncate";
}

}  // namespace
}  // namespace flare
