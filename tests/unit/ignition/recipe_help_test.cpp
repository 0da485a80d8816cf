// Help from recipe declarations: the summary names every recipe's aliases, checkpoint,
// tensor-parallel sizes and draft counts; one recipe's help (by alias or repository) its defaults
// and limits; anything else (a directory, an unknown name) none.
#include <gtest/gtest.h>

#include "engine/engine_options.h"
#include "ignition/recipe_help.h"
#include "model/recipes/recipe.h"

namespace flare::ignition {
namespace {

TEST(RecipeHelp, SummaryListsEveryRecipe) {
  const std::string text = recipes_help();
  for (const auto& recipe : model::all_recipes()) {
    for (const auto& alias : recipe.aliases) EXPECT_NE(text.find(alias), std::string::npos) << alias;
    if (!recipe.checkpoint.repository.empty()) {
      EXPECT_NE(text.find(recipe.checkpoint.repository + (recipe.checkpoint.revision.empty() ? " (no pinned revision)" : "@")),
                std::string::npos) << recipe.name;
    }
  }
  EXPECT_NE(text.find("tensor parallel 1"), std::string::npos) << text;
  EXPECT_NE(text.find("drafts 5 default, 15 maximum, learned draft demo-model/draft"), std::string::npos) << text;
}

TEST(RecipeHelp, OneRecipeByAliasOrRepository) {
  const std::string demo = recipe_help("demo");
  EXPECT_NE(demo.find("Recipe demo (flare-demo-coder)"), std::string::npos) << demo;
  EXPECT_NE(demo.find("max concurrency       8 default, 1 to 64"), std::string::npos) << demo;
  EXPECT_NE(demo.find("prefill chunk         512 tokens"), std::string::npos) << demo;
  EXPECT_NE(demo.find("draft tokens          5 default, 15 maximum"), std::string::npos) << demo;
  EXPECT_EQ(recipe_help("DEMO"), demo);  // aliases are case-insensitive
  for (const auto& recipe : model::all_recipes()) {
    if (recipe.checkpoint.repository.empty()) continue;
    const std::string text = recipe_help(recipe.checkpoint.repository + "@main");
    EXPECT_NE(text.find("Recipe " + recipe.name), std::string::npos) << recipe.checkpoint.repository;
    EXPECT_NE(text.find(recipe.checkpoint.revision), std::string::npos) << text;
  }
  EXPECT_EQ(recipe_help("./some/checkpoint"), "");
  EXPECT_EQ(recipe_help("no-such-model"), "");
}

}  // namespace
}  // namespace flare::ignition
