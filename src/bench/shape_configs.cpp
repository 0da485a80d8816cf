#include "bench/shape_configs.h"

#include <fstream>
#include <sstream>
#include <vector>

#include <fmt/format.h>

#include "common/error.h"
#include "common/suggest.h"

namespace flare::bench {
namespace fs = std::filesystem;

namespace {

std::string shape_names() {
  std::vector<std::string_view> names;
  for (const ShapeConfig& shape : embedded_shape_configs()) names.push_back(shape.name);
  return fmt::format("{}", fmt::join(names, ", "));
}

std::int32_t recipe_page_size(const model::ModelSpec& spec, const model::Recipe* recipe) {
  if (!recipe) recipe = model::find_recipe_by_architecture(spec.architecture);
  return recipe ? recipe->page_size_tokens : 16;
}

std::string read_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail_usage("--shape {}: cannot be read", path.string());
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

bool holds_safetensors(const fs::path& dir) {
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    if (entry.path().extension() == ".safetensors") return true;
  }
  return false;
}

}  // namespace

const ShapeConfig* find_shape_config(std::string_view name) {
  const std::string wanted = ascii_lower(std::string(name));
  for (const ShapeConfig& shape : embedded_shape_configs()) {
    if (ascii_lower(std::string(shape.name)) == wanted) return &shape;
  }
  return nullptr;
}

const ShapeConfig* find_shape_config(const model::Recipe& recipe) {
  if (const ShapeConfig* shape = find_shape_config(recipe.name)) return shape;
  for (const auto& alias : recipe.aliases) {
    if (const ShapeConfig* shape = find_shape_config(alias)) return shape;
  }
  return nullptr;
}

bool bench_model_random_weights(const BenchModel& model) { return model.checkpoint_dir.empty(); }

BenchModel bench_model_of_shape(const ShapeConfig& shape) {
  BenchModel m;
  m.name = std::string(shape.name);
  m.spec = model::model_spec_parse(shape.config_json, fmt::format("bench/configs/{}/config.json", shape.name));
  m.source = fmt::format("random weights of the {} config shape (embedded config.json)", shape.name);
  m.page_size_tokens = recipe_page_size(m.spec, model::find_recipe_by_alias(m.name));
  return m;
}

BenchModel bench_model_resolve(const std::string& selector) {
  if (const ShapeConfig* shape = find_shape_config(selector)) return bench_model_of_shape(*shape);
  if (const model::Recipe* recipe = model::find_recipe_by_alias(selector)) {
    if (const ShapeConfig* shape = find_shape_config(*recipe)) return bench_model_of_shape(*shape);
  }
  std::error_code ec;
  const fs::path path(selector);
  BenchModel m;
  if (fs::is_regular_file(path, ec)) {
    m.name = path.parent_path().filename().string();
    m.spec = model::model_spec_parse(read_text(path), path.string());
    m.source = fmt::format("random weights of the config shape in {}", path.string());
  } else if (fs::is_directory(path, ec)) {
    m.name = fs::absolute(path).lexically_normal().filename().string();
    if (m.name.empty()) m.name = fs::absolute(path).parent_path().filename().string();
    m.spec = model::model_spec_load(path);
    if (holds_safetensors(path)) {
      m.checkpoint_dir = fs::absolute(path);
      m.source = fmt::format("checkpoint {}", m.checkpoint_dir.string());
    } else {
      m.source = fmt::format("random weights of the config shape in {}", (path / "config.json").string());
    }
  } else {
    fail_usage("--shape '{}' is neither a known shape ({}) nor a config.json file or checkpoint directory", selector,
               shape_names());
  }
  m.page_size_tokens = recipe_page_size(m.spec, nullptr);
  return m;
}

}  // namespace flare::bench
