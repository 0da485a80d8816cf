#include "common/suggest.h"

#include <gtest/gtest.h>

namespace flare {
namespace {

TEST(Suggest, CloseMatches) {
  const std::vector<std::string> aliases = {"demo", "llama-3.1-8b", "qwen3-8b", "mistral-7b"};
  EXPECT_EQ(suggest_close_match("qwen3-b8", aliases), "qwen3-8b");
  EXPECT_EQ(suggest_close_match("lama-3.1-8b", aliases), "llama-3.1-8b");
  EXPECT_EQ(suggest_close_match("DEMO", aliases), "demo");
  EXPECT_EQ(suggest_close_match("dmo", aliases), "demo");
  EXPECT_FALSE(suggest_close_match("gpt-4", aliases));
  EXPECT_FALSE(suggest_close_match("", aliases));
  EXPECT_FALSE(suggest_close_match(std::string(10000, 'x'), aliases));
  EXPECT_FALSE(suggest_close_match("demo", {}));
}

TEST(Suggest, EditDistance) {
  EXPECT_EQ(edit_distance("kitten", "sitting"), 3u);
  EXPECT_EQ(edit_distance("", "abc"), 3u);
  EXPECT_EQ(edit_distance("same", "SAME"), 0u);
}

}  // namespace
}  // namespace flare
