#include "ignition/config_template.h"

#include <fmt/format.h>

#include "package/crypto.h"

namespace flare::ignition {

void write_config_template_if_absent(const Config& config, bool explicit_path, const ResolvedModel& model,
                                     std::int64_t max_concurrency) {
  if (explicit_path || config.loaded) return;
  std::error_code ec;
  if (std::filesystem::exists(config.path, ec)) return;
  std::filesystem::create_directories(config.path.parent_path(), ec);
  const std::string text = fmt::format(
      "# Flare configuration, written by the first `ignition export`. Every key is optional; the\n"
      "# commented values are what that export resolved. Flags override this file, which overrides\n"
      "# the model's recipe.\n"
      "\n"
      "[server]\n"
      "# host = \"127.0.0.1\"\n"
      "# port = 8000\n"
      "# api_key = \"\"                     # empty: no authentication\n"
      "\n"
      "[defaults]\n"
      "# model = \"{}\"\n"
      "# max_concurrency = {}\n"
      "\n"
      "[preparation]\n"
      "# autotune_effort = \"default\"      # off, default, audit\n"
      "\n"
      "[memory]\n"
      "# reserve = \"0\"                    # GPU memory left for processes started later\n"
      "\n"
      "[paths]\n"
      "# hub_cache = \"{}\"\n"
      "# kernel_cache = \"{}\"\n"
      "# package_cache = \"{}\"\n",
      model.recipe->aliases.empty() ? model.recipe->name : model.recipe->aliases.front(), max_concurrency,
      config.hub_cache().string(), config.kernel_cache().string(), config.package_cache().string());
  package::write_file_atomic(config.path, text, 0644);
}

}  // namespace flare::ignition
