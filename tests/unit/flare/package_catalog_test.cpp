// The serving catalog in a signed package: it survives export's write and flare's read, malformed
// catalog bytes are a clear input error naming the package, and a package whose kernels lack one
// module of the run's catalog (the Llama-3.1-8B shape on an H200) is refused with exit 2, naming
// the package and the module, as `flare run` refuses it before it opens a socket.
#include <cstdio>
#include <fstream>
#include <sstream>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "../package/test_package.h"
#include "common/error.h"
#include "flare/inspect_view.h"
#include "flare/package_catalog.h"
#include "helios/serving_catalog.h"
#include "package/executables.h"
#include "package/package.h"

#ifdef FLARE_HAVE_CUDA
#include "helios/cuda/kernel_catalog.h"
#include "model/kernel_needs.h"
#include "model/spec.h"
#endif

namespace flare::cli {
namespace {

using package::testing::make_temp_dir;

helios::ServingCatalog small_catalog() {
  helios::ServingCatalog c;
  c.platform = {.compute_major = 9, .compute_minor = 0, .max_shared_bytes_per_block = 232448, .cublaslt = true,
                .stream_gemm = true, .sampler_one_cta = false};
  c.needs.attention = {{4, 2, 64, 32}};
  c.needs.vocab_size = 1000;
  c.needs.kv_dtypes = {helios::DType::bf16};
  c.needs.page_size_tokens = 16;
  c.needs.decode_buckets = {1, 2};
  c.needs.prefill_chunk_tokens = 64;
  c.modules = {"embedding", "rms_norm", "swiglu"};
  c.graphs = helios::serving_step_shapes(c.needs);
  return c;
}

class PackageCatalog : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = make_temp_dir("catalog"); }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // A signed sm_90 package recording `catalog_text` and carrying `kernels` (module key -> image).
  std::unique_ptr<package::Package> write(const std::string& catalog_text,
                                          const std::map<std::string, std::string>& kernels) {
    proto::Manifest manifest = package::testing::test_manifest();
    manifest.set_target("sm_90");
    manifest.set_kernel_catalog(catalog_text);
    package::PackageBuilder builder(manifest);
    builder.add_payload("weights/layer-000", proto::PAYLOAD_ROLE_WEIGHT, package::testing::bytes_of("weights"));
    package::add_executables(builder, kernels, "kernels");
    const std::filesystem::path path = dir_ / ("p" + std::to_string(n_written_++));
    builder.write(path, package::PackageForm::directory, key_);
    auto pkg = package::Package::open(path);
    pkg->verify_signature(key_.public_key());
    pkg->check_layout();
    return pkg;
  }

  static std::map<std::string, std::string> images_of(const std::vector<std::string>& keys) {
    std::map<std::string, std::string> images;
    for (const std::string& key : keys) images.emplace(key, "cubin of " + key);
    return images;
  }

  std::filesystem::path dir_;
  int n_written_ = 0;
  package::SigningKey key_ = package::SigningKey::generate();
};

TEST_F(PackageCatalog, RoundTripsThroughASignedPackage) {
  const helios::ServingCatalog catalog = small_catalog();
  const auto pkg = write(helios::serving_catalog_serialize(catalog), images_of(catalog.modules));
  const std::optional<helios::ServingCatalog> read = package_kernel_catalog(*pkg);
  ASSERT_TRUE(read.has_value());
  EXPECT_EQ(*read, catalog);
  EXPECT_NO_THROW(helios::serving_catalog_require(catalog, package::read_executables(*pkg), "package", &*read));
}

// `flare inspect --graphs --json` reports the catalog's size from the manifest alone.
TEST_F(PackageCatalog, InspectShowsItsSize) {
  const helios::ServingCatalog catalog = small_catalog();
  const auto pkg = write(helios::serving_catalog_serialize(catalog), images_of(catalog.modules));
  InspectView view;
  view.verified = true;
  view.graphs = true;
  const nlohmann::json out = nlohmann::json::parse(render_inspect_json(*pkg, view));
  const nlohmann::json& c = out.at("graphs").at("kernel_catalog");
  EXPECT_EQ(c.at("kernel_modules"), 3);
  EXPECT_EQ(c.at("step_graphs"), catalog.graphs.size());
  EXPECT_EQ(c.at("target"), "sm_90");
}

TEST_F(PackageCatalog, AbsentForPackagesWithoutOne) {
  const auto pkg = write("", images_of({"embedding"}));
  EXPECT_FALSE(package_kernel_catalog(*pkg).has_value());
}

TEST_F(PackageCatalog, MalformedBytesAreAnInputErrorNamingThePackage) {
  std::string text = helios::serving_catalog_serialize(small_catalog());
  text.replace(text.find("\"page_size_tokens\":16"), 21, "\"page_size_tokens\":\"16\"");
  for (const std::string& bad : {std::string("{not json"), text}) {
    const auto pkg = write(bad, images_of({"embedding"}));
    try {
      package_kernel_catalog(*pkg);
      ADD_FAILURE() << "accepted " << bad;
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ExitCode::failure) << e.what();
      EXPECT_NE(std::string(e.what()).find("package " + pkg->directory().string() + ": kernel catalog"),
                std::string::npos)
          << e.what();
    }
  }
}

#ifdef FLARE_HAVE_CUDA

// The whole catalog of the Llama-3.1-8B shape on an H200, exported without one of its modules.
TEST_F(PackageCatalog, APackageMissingOneKernelIsRefused) {
  std::ifstream in(std::string(FLARE_SOURCE_DIR) + "/bench/configs/llama-3.1-8b/config.json");
  std::stringstream config;
  config << in.rdbuf();
  const model::ModelSpec spec = model::model_spec_parse(config.str(), "llama-3.1-8b");
  const model::ServingSettings serving{.decode_buckets = helios::serving_decode_buckets(64),
                                       .prefill_chunk_tokens = 2048,
                                       .page_size_tokens = 16,
                                       .kv_dtypes = {helios::DType::bf16}};
  const helios::KernelPlatform h200{.compute_major = 9, .compute_minor = 0, .max_shared_bytes_per_block = 232448,
                                    .cublaslt = true, .stream_gemm = true, .sampler_one_cta = false};
  const helios::ServingCatalog catalog = helios::cuda::kernel_catalog(h200, model::kernel_needs(spec, serving));
  const std::string dropped = "attention_decode -DHEAD_DIM=128 -DPAGE_SIZE=16 -DGROUP=4 -DKV_FP8=0 -DKV_STAGES=2";
  std::vector<std::string> kept;
  for (const std::string& key : catalog.modules) {
    if (key != dropped) kept.push_back(key);
  }
  ASSERT_EQ(kept.size() + 1, catalog.modules.size());
  const auto pkg = write(helios::serving_catalog_serialize(catalog), images_of(kept));
  const std::optional<helios::ServingCatalog> recorded = package_kernel_catalog(*pkg);
  const std::string origin = "package " + pkg->directory().string();
  try {
    helios::serving_catalog_require(catalog, package::read_executables(*pkg), origin, &*recorded);
    FAIL() << "a package missing a kernel was accepted";
  } catch (const Error& e) {
    const std::string message = e.what();
    std::printf("[ refusal  ] error: %s\n", message.c_str());
    EXPECT_EQ(e.exit_status(), 2);
    EXPECT_NE(message.find(fmt::format("{} lacks 1 of the {} kernel modules", origin, catalog.modules.size())),
              std::string::npos)
        << message;
    EXPECT_NE(message.find("\n  " + dropped + "\n"), std::string::npos) << message;
    EXPECT_NE(message.find("Its kernels do not match the catalog it records"), std::string::npos) << message;
    EXPECT_NE(message.find("Export the model again on this GPU"), std::string::npos) << message;
  }
}

#endif  // FLARE_HAVE_CUDA

}  // namespace
}  // namespace flare::cli
