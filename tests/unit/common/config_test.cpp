#include "common/config.h"

#include <gtest/gtest.h>

#include <fstream>

#include "common/error.h"
#include "common/sizes.h"

namespace flare {
namespace {

Config parse(const std::string& text) { return parse_config(text, "/test/config.toml"); }

std::string usage_error(const std::string& text) {
  try {
    parse(text);
  } catch (const Error& error) {
    EXPECT_EQ(error.code(), ExitCode::usage);
    return error.what();
  }
  ADD_FAILURE() << "expected an error for: " << text;
  return "";
}

TEST(Config, EmptyFileSuppliesNothing) {
  const Config config = parse("");
  EXPECT_FALSE(config.server.port);
  EXPECT_FALSE(config.default_model);
  EXPECT_EQ(config.prefix_cache.drain_on_shutdown, "off");
}

TEST(Config, EverySpecKey) {
  const Config config = parse(R"(
[server]
host = "::1"
port = 8001
api_key = "secret"

[defaults]
model = "demo"
max_concurrency = 4
speculative_token_capacity = 128
speculative_graph_budget = 64

[preparation]
compile_workers = 24
autotune_effort = "audit"
collective_tuning = "static"

[memory]
reserve = "12G"

[prefix_cache]
memory = "8G"
drain_on_shutdown = "30s"
disk_limit = ""
disk_transport = "direct"

[models."qwen3-8b"]
max_concurrency = 2

[paths]
hub_cache = "~/hub"
kernel_cache = "/data/kernels"
package_cache = "/data/packages"
prefix_cache = ""
export_staging = ""
cuda = "/opt/cuda"

[publishing]
signing_key = "/private/key.pem"
namespace = "example"
official_source = "https://huggingface.co/example/MODEL"
)");
  EXPECT_EQ(*config.server.host, "::1");
  EXPECT_EQ(*config.server.port, 8001);
  EXPECT_EQ(*config.server.api_key, "secret");
  EXPECT_EQ(*config.default_model, "demo");
  EXPECT_EQ(*config.defaults.max_concurrency, 4);
  EXPECT_EQ(*config.preparation.compile_workers, 24);
  EXPECT_EQ(*config.preparation.autotune_effort, "audit");
  EXPECT_EQ(*config.memory.reserve_bytes, 12 * kGiB);
  EXPECT_EQ(*config.prefix_cache.memory_bytes, 8 * kGiB);
  EXPECT_FALSE(config.prefix_cache.disk_limit_bytes);
  EXPECT_EQ(config.prefix_cache.drain_on_shutdown, "30s");
  EXPECT_EQ(config.prefix_cache.disk_transport, "direct");
  EXPECT_EQ(*config.models.at("qwen3-8b").max_concurrency, 2);
  EXPECT_EQ(config.hub_cache(), home_directory() / "hub");
  EXPECT_EQ(config.package_cache(), "/data/packages");
  EXPECT_FALSE(config.paths.prefix_cache);
  EXPECT_TRUE(config.publishing.configured());
}

TEST(Config, DefaultsAndModelOverrides) {
  const Config config = parse(R"(
[defaults]
max_concurrency = 8
[models."demo"]
max_concurrency = 2
[models."other"]
max_concurrency = 3
)");
  EXPECT_EQ(*config.settings_for({"demo"}, false).max_concurrency, 2);
  EXPECT_EQ(*config.settings_for({"unrelated"}, false).max_concurrency, 8);
  EXPECT_THROW(config.settings_for({"demo", "other"}, false), Error);
  EXPECT_NO_THROW(config.settings_for({"demo", "other"}, true));
}

TEST(Config, Precedence) {
  EXPECT_EQ(resolve<int>(5, 4, 3), 5);
  EXPECT_EQ(resolve<int>(std::nullopt, 4, 3), 4);
  EXPECT_EQ(resolve<int>(std::nullopt, std::nullopt, 3), 3);
  EXPECT_EQ(resolve<int>(0, 4, 3), 0);  // explicit zero wins
}

TEST(Config, ErrorsNameTheKeyAndReason) {
  EXPECT_NE(usage_error("[server]\nport = \"eighty\"").find("[server] port: expected an integer"), std::string::npos);
  EXPECT_NE(usage_error("[server]\nport = 70000").find("from 1 to 65535"), std::string::npos);
  EXPECT_NE(usage_error("[server]\nport = 0").find("[server] port"), std::string::npos);
  EXPECT_NE(usage_error("[server]\nprot = 1").find("did you mean 'port'"), std::string::npos);
  EXPECT_NE(usage_error("[srever]\n").find("did you mean 'server'"), std::string::npos);
  EXPECT_NE(usage_error("[memory]\nreserve = \"12\"").find("[memory] reserve"), std::string::npos);
  EXPECT_NE(usage_error("[memory]\nreserve = 12").find("expected a string"), std::string::npos);
  EXPECT_NE(usage_error("[preparation]\nautotune_effort = \"max\"").find("off, default, audit"), std::string::npos);
  EXPECT_NE(usage_error("[prefix_cache]\ndrain_on_shutdown = \"sometimes\"").find("drain_on_shutdown"), std::string::npos);
  EXPECT_NE(usage_error("[publishing]\nnamespace = \"x\"").find("set together"), std::string::npos);
  EXPECT_NE(usage_error("[defaults]\nmax_concurrency = -1").find("max_concurrency"), std::string::npos);
  EXPECT_NE(usage_error("[defaults]\nmax_concurrency = 1.5").find("expected an integer"), std::string::npos);
  EXPECT_NE(usage_error("[models]\ndemo = 3").find("expected a table"), std::string::npos);
  EXPECT_NE(usage_error("server = 1").find("expected a table"), std::string::npos);
}

TEST(Config, MalformedTomlReportsLineAndColumn) {
  const std::string message = usage_error("[server]\nhost = \"unterminated\n");
  EXPECT_NE(message.find("/test/config.toml:2:"), std::string::npos) << message;
  usage_error("[server");
  usage_error("[server]\nport = 1\nport = 2");
  usage_error("= 3");
  usage_error(std::string("[server]\nhost = \"a\0b\"", 20));
  usage_error("[server]\nport = 99999999999999999999999");
}

TEST(Config, Files) {
  const auto dir = std::filesystem::temp_directory_path() / ("flare-config-test-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  // An explicitly named missing file is an error.
  EXPECT_THROW(load_config(dir / "missing.toml"), Error);
  // A directory is not a config file.
  EXPECT_THROW(load_config(dir), Error);
  // A real file is read.
  {
    std::ofstream(dir / "config.toml") << "[server]\nport = 9000\n";
  }
  EXPECT_EQ(*load_config(dir / "config.toml").server.port, 9000);
  EXPECT_EQ(load_config(dir / "config.toml").directory(), dir);
  // Oversized files are refused.
  {
    std::ofstream(dir / "big.toml") << std::string(2 << 20, '#');
  }
  EXPECT_THROW(load_config(dir / "big.toml"), Error);
  std::filesystem::remove_all(dir);
}

TEST(Config, ExpandUser) {
  EXPECT_EQ(expand_user("~"), home_directory());
  EXPECT_EQ(expand_user("~/x/y"), home_directory() / "x/y");
  EXPECT_EQ(expand_user("/abs/~"), "/abs/~");
  EXPECT_EQ(expand_user("~other/x"), "~other/x");
}

TEST(Config, HubSection) {
  Config config = parse("[hub]\nendpoint = \"http://127.0.0.1:8080/\"\ntoken_file = \"~/hf-token\"\n");
  EXPECT_EQ(config.hub_endpoint(), "http://127.0.0.1:8080");
  EXPECT_EQ(config.hub.token_file, home_directory() / "hf-token");
  EXPECT_EQ(parse("").hub_endpoint(), "https://huggingface.co");
  for (const char* bad : {"[hub]\nendpoint = \"ftp://x\"\n", "[hub]\nendpoint = \"https://a b\"\n",
                          "[hub]\nendpoint = \"https://h/?q=1\"\n", "[hub]\nendpoint = 5\n", "[hub]\ntoken = \"x\"\n",
                          "hub = 1\n"}) {
    EXPECT_THROW(parse(bad), Error) << bad;
  }
}

}  // namespace
}  // namespace flare
