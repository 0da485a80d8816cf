// Helpers for package tests: a temporary directory and a small signed test package.
#pragma once

#include <unistd.h>

#include <filesystem>
#include <string>

#include <gtest/gtest.h>

#include "package/package.h"

namespace flare::package::testing {

inline std::filesystem::path make_temp_dir(const std::string& tag) {
  auto dir = std::filesystem::temp_directory_path() /
             fmt::format("flare-{}-{}-{}", tag, ::getpid(),
                         ::testing::UnitTest::GetInstance()->current_test_info()->name());
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

inline std::vector<std::byte> bytes_of(const std::string& text) {
  auto span = std::as_bytes(std::span(text.data(), text.size()));
  return {span.begin(), span.end()};
}

inline proto::Manifest test_manifest(const std::string& model = "demo") {
  proto::Manifest manifest;
  manifest.mutable_model()->set_canonical_name(model);
  manifest.mutable_model()->add_served_names(model);
  manifest.mutable_model()->set_architecture("Qwen3ForCausalLM");
  manifest.set_publisher_namespace(kDevelopmentNamespace);
  manifest.set_official_source(kDevelopmentSource);
  manifest.set_license("apache-2.0");
  manifest.set_target("cpu");
  auto* deployment = manifest.add_deployments();
  deployment->set_tensor_parallel(1);
  auto* rank = deployment->add_ranks();
  rank->set_rank(0);
  rank->set_fixed_bytes(123456);
  rank->set_n_graphs(4);
  deployment->mutable_capacities()->set_max_concurrency(8);
  deployment->mutable_capacities()->set_context_ceiling_tokens(4096);
  deployment->mutable_capacities()->set_prefill_chunk_tokens(512);
  return manifest;
}

// Three weights (two identical), a graph record and a frontend asset.
inline void write_test_package(const std::filesystem::path& dest, PackageForm form, const SigningKey& key,
                               const std::string& model = "demo", std::size_t weight_bytes = 1000,
                               const std::string& version = "") {
  PackageBuilder builder(test_manifest(model));
  if (!version.empty()) builder.manifest().set_version(version);
  std::vector<std::byte> a(weight_bytes), b(weight_bytes + 17);
  for (std::size_t i = 0; i < a.size(); ++i) a[i] = static_cast<std::byte>(i * 7 + model.size());
  for (std::size_t i = 0; i < b.size(); ++i) b[i] = static_cast<std::byte>(i * 13 + 1);
  builder.add_payload("weights/layer-000", proto::PAYLOAD_ROLE_WEIGHT, a);
  builder.add_payload("weights/layer-001", proto::PAYLOAD_ROLE_WEIGHT, b);
  builder.add_payload("weights/layer-002", proto::PAYLOAD_ROLE_WEIGHT, a);  // same bytes as layer-000
  builder.add_payload("deployments/tp1/rank-0/graphs", proto::PAYLOAD_ROLE_GRAPH_RECORD, bytes_of("graphs"), 1, 0);
  builder.add_payload("frontend/tokenizer.json", proto::PAYLOAD_ROLE_FRONTEND, bytes_of("{\"model\": {}}"));
  builder.write(dest, form, key);
}

}  // namespace flare::package::testing
