// The serving catalog without a GPU: the step shapes a rank captures, the JSON form's round trip
// and its refusal of malformed bytes, and the check that refuses kernel images lacking a module,
// with the message and exit code `flare run` reports.
#include <cstdio>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "common/error.h"
#include "helios/serving_catalog.h"

namespace flare::helios {
namespace {

ServingCatalog sample_catalog() {
  ServingCatalog c;
  c.platform = {.compute_major = 9, .compute_minor = 0, .max_shared_bytes_per_block = 232448, .cublaslt = true,
                .stream_gemm = true, .sampler_one_cta = false};
  c.needs.attention = {{32, 8, 128, 64}};
  c.needs.vocab_size = 128256;
  c.needs.kv_dtypes = {DType::bf16, DType::f8_e4m3};
  c.needs.page_size_tokens = 16;
  c.needs.decode_buckets = {1, 2, 4};
  c.needs.prefill_chunk_tokens = 2048;
  c.needs.max_verify_tokens = 4;
  c.needs.verify_token_capacity = 8;
  c.needs.verify_graph_budget = 64;
  c.modules = {"attention_decode -DHEAD_DIM=128 -DPAGE_SIZE=16 -DGROUP=4 -DKV_FP8=0 -DKV_STAGES=2", "embedding",
               "rms_norm"};
  c.graphs = serving_step_shapes(c.needs);
  return c;
}

std::map<std::string, std::string> images_of(const std::vector<std::string>& keys) {
  std::map<std::string, std::string> images;
  for (const std::string& key : keys) images.emplace(key, "cubin of " + key);
  return images;
}

TEST(ServingCatalog, DecodeBucketsArePowersOfTwoUpToTheConcurrency) {
  EXPECT_EQ(serving_decode_buckets(1), (std::vector<std::int32_t>{1}));
  EXPECT_EQ(serving_decode_buckets(6), (std::vector<std::int32_t>{1, 2, 4, 8}));
  EXPECT_EQ(serving_decode_buckets(64), (std::vector<std::int32_t>{1, 2, 4, 8, 16, 32, 64}));
}

TEST(ServingCatalog, StepShapesArePrefillChunksThenDecodeBucketsLargestFirstPerKvDtype) {
  const std::vector<std::int32_t> buckets = {2, 1, 4, 4};
  const DType kv[] = {DType::bf16, DType::f8_e4m3};
  const std::vector<StepShape> shapes = serving_step_shapes(buckets, 512, kv);
  const std::vector<StepShape> expected = {
      {1, 512, 0, DType::bf16},    {1, 512, 1, DType::bf16},    {4, 1, 1, DType::bf16},    {2, 1, 1, DType::bf16},
      {1, 1, 1, DType::bf16},      {1, 512, 0, DType::f8_e4m3}, {1, 512, 1, DType::f8_e4m3}, {4, 1, 1, DType::f8_e4m3},
      {2, 1, 1, DType::f8_e4m3},   {1, 1, 1, DType::f8_e4m3}};
  EXPECT_EQ(shapes, expected);
  // A one-token chunk has no prefill graph (it is a decode step).
  const DType bf16[] = {DType::bf16};
  EXPECT_EQ(serving_step_shapes(buckets, 1, bf16).size(), 3u);
}

// Verify shapes: every width of 2..max at the smallest buckets first, within the token capacity and
// the budget, ordered largest step first; only verify shapes when speculating.
TEST(ServingCatalog, VerifyShapesAreBoundedByCapacityAndBudget) {
  const std::vector<std::int32_t> buckets = {4, 1, 2};
  const auto shape = [](std::int32_t rows, std::int32_t width) { return StepShape{rows, width, width, DType::bf16}; };
  // Capacity 8: bucket 4 takes width 2 only; the budget (64) binds nothing.
  EXPECT_EQ(serving_verify_shapes(buckets, 4, 8, 64, DType::bf16),
            (std::vector<StepShape>{shape(4, 2), shape(2, 4), shape(2, 3), shape(2, 2), shape(1, 4), shape(1, 3),
                                    shape(1, 2)}));
  // A budget of 4: bucket 1's three widths, then bucket 2's widest.
  EXPECT_EQ(serving_verify_shapes(buckets, 4, 128, 4, DType::bf16),
            (std::vector<StepShape>{shape(2, 4), shape(1, 4), shape(1, 3), shape(1, 2)}));
  EXPECT_TRUE(serving_verify_shapes(buckets, 0, 128, 64, DType::bf16).empty());  // not speculating
  EXPECT_TRUE(serving_verify_shapes(buckets, 1, 128, 64, DType::bf16).empty());  // no drafts
  EXPECT_TRUE(serving_verify_shapes(buckets, 8, 128, 0, DType::bf16).empty());
  for (const StepShape& s : serving_verify_shapes(buckets, 16, 128, 64, DType::bf16)) {
    EXPECT_TRUE(s.is_verify()) << s.describe();
    EXPECT_LE(s.n_tokens(), 128);
  }
  // In the step shapes: after the prefill chunk, before the decode buckets.
  const DType bf16[] = {DType::bf16};
  const std::vector<StepShape> all = serving_step_shapes(buckets, 512, bf16, 3, 128, 64);
  ASSERT_EQ(all.size(), 2u + 6u + 3u);
  EXPECT_EQ(all[2], shape(4, 3));
  EXPECT_EQ(all[7], shape(1, 2));
  EXPECT_EQ(all[8], (StepShape{4, 1, 1, DType::bf16}));
}

// A catalog recorded before verify graphs (no verify members) reads as one without speculation.
TEST(ServingCatalog, CatalogsWithoutVerifyMembersReadAsNotSpeculating) {
  ServingCatalog c = sample_catalog();
  std::string text = serving_catalog_serialize(c);
  for (const std::string member : {",\"max_verify_tokens\":4", ",\"verify_token_capacity\":8", ",\"verify_graph_budget\":64"}) {
    const std::size_t at = text.find(member);
    ASSERT_NE(at, std::string::npos) << member << " in " << text;
    text.erase(at, member.size());
  }
  const ServingCatalog parsed = serving_catalog_parse(text, "test");
  EXPECT_EQ(parsed.needs.max_verify_tokens, 0);
  EXPECT_EQ(parsed.needs.verify_token_capacity, 0);
  EXPECT_EQ(parsed.needs.verify_graph_budget, 0);
  EXPECT_EQ(parsed.modules, c.modules);
}

TEST(ServingCatalog, SerializationRoundTrips) {
  const ServingCatalog c = sample_catalog();
  const std::string text = serving_catalog_serialize(c);
  EXPECT_EQ(serving_catalog_parse(text, "test"), c);
  EXPECT_EQ(serving_catalog_serialize(serving_catalog_parse(text, "test")), text);
}

// Every malformed form is an input error (exit 1) naming the origin and what is wrong.
TEST(ServingCatalog, MalformedBytesAreClearInputErrors) {
  const std::string good = serving_catalog_serialize(sample_catalog());
  const auto expect_refused = [](const std::string& text, const std::string& what) {
    try {
      serving_catalog_parse(text, "package /p: kernel catalog");
      ADD_FAILURE() << "accepted: " << text;
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ExitCode::failure) << e.what();
      EXPECT_NE(std::string(e.what()).find("package /p: kernel catalog"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
    }
  };
  const auto replaced = [&](const std::string& from, const std::string& to) {
    std::string text = good;
    const std::size_t at = text.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    return text.replace(at, from.size(), to);
  };
  expect_refused(good.substr(0, good.size() / 2), "not JSON");
  expect_refused("[1, 2]", "not an object");
  expect_refused("", "not JSON");
  expect_refused(replaced("\"format\":1", "\"format\":2"), "format 2");
  expect_refused(replaced("\"page_size_tokens\":16", "\"page_size_tokens\":-16"), "needs.page_size_tokens");
  expect_refused(replaced("\"page_size_tokens\":16,", ""), "has no \"page_size_tokens\"");
  expect_refused(replaced("\"cublaslt\":true", "\"cublaslt\":1"), "platform.cublaslt");
  expect_refused(replaced("\"kv_dtypes\":[\"bf16\",\"f8_e4m3\"]", "\"kv_dtypes\":[\"fp4\"]"), "needs.kv_dtypes[0]");
  expect_refused(replaced("\"kv_dtypes\":[\"bf16\",\"f8_e4m3\"]", "\"kv_dtypes\":[\"f8_e4m3\",\"bf16\"]"), "ascending");
  expect_refused(replaced("\"embedding\",\"rms_norm\"", "\"rms_norm\",\"embedding\""), "modules must be distinct");
  expect_refused(replaced("\"embedding\"", "7"), "modules[1]");
  expect_refused(replaced("\"logits_per_row\":0", "\"logits_per_row\":4096"), "graphs[0].logits_per_row");
  expect_refused(replaced("\"n_heads\":32", "\"n_heads\":\"32\""), "needs.attention[0].n_heads");
}

TEST(ServingCatalog, RequirePassesWhenEveryModuleIsThereExtrasAllowed) {
  const ServingCatalog c = sample_catalog();
  std::vector<std::string> keys = c.modules;
  keys.push_back("linear");  // an older export's extra module does no harm
  EXPECT_NO_THROW(serving_catalog_require(c, images_of(keys), "package /p", &c));
  EXPECT_TRUE(serving_catalog_missing(c, images_of(keys)).empty());
}

// The refusal `flare run` prints for a package missing one kernel: exit 2 (the package does not fit
// this GPU or these settings), the package, the module, what differs and what to do.
TEST(ServingCatalog, RequireRefusesImagesMissingOneModule) {
  const ServingCatalog recorded = sample_catalog();
  ServingCatalog run = recorded;
  run.platform.max_shared_bytes_per_block = 101376;  // another GPU of the same architecture
  run.modules[0] = "attention_decode -DHEAD_DIM=128 -DPAGE_SIZE=16 -DGROUP=4 -DKV_FP8=0 -DKV_STAGES=1";
  const auto images = images_of(recorded.modules);
  EXPECT_EQ(serving_catalog_missing(run, images), (std::vector<std::string>{run.modules[0]}));
  try {
    serving_catalog_require(run, images, "package /cache/llama@v1", &recorded);
    FAIL() << "a package missing a kernel was accepted";
  } catch (const Error& e) {
    const std::string message = e.what();
    std::printf("[ refusal  ] %s\n", message.c_str());
    EXPECT_EQ(e.code(), ExitCode::usage);
    EXPECT_EQ(e.exit_status(), 2);
    EXPECT_NE(message.find("package /cache/llama@v1 lacks 1 of the 3 kernel modules"), std::string::npos) << message;
    EXPECT_NE(message.find("on this sm_90 GPU"), std::string::npos) << message;
    EXPECT_NE(message.find("\n  attention_decode -DHEAD_DIM=128 -DPAGE_SIZE=16 -DGROUP=4 -DKV_FP8=0 -DKV_STAGES=1"),
              std::string::npos)
        << message;
    EXPECT_NE(message.find("shared memory per CTA 232448 bytes, here 101376 bytes"), std::string::npos) << message;
    EXPECT_NE(message.find("Export the model again on this GPU"), std::string::npos) << message;
  }
  // Without a recorded catalog the message says the package predates them.
  try {
    serving_catalog_require(run, images, "package /old", nullptr);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ExitCode::usage);
    EXPECT_NE(std::string(e.what()).find("It was exported before packages recorded their kernel catalog"), std::string::npos);
  }
}

TEST(ServingCatalog, RequireListsManyMissingModulesWithACount) {
  ServingCatalog run = sample_catalog();
  run.modules.clear();
  for (int i = 0; i < 20; ++i) run.modules.push_back(fmt::format("m{:02}", i));
  try {
    serving_catalog_require(run, {}, "package /p", nullptr);
    FAIL();
  } catch (const Error& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("lacks 20 of the 20"), std::string::npos) << message;
    EXPECT_NE(message.find("\n  m11\n  and 8 more"), std::string::npos) << message;
    EXPECT_EQ(message.find("m12"), std::string::npos) << message;
  }
}

TEST(ServingCatalog, DifferencesNameEachInputThatChanged) {
  const ServingCatalog a = sample_catalog();
  EXPECT_TRUE(serving_catalog_differences(a, a).empty());
  ServingCatalog b = a;
  b.platform.cublaslt = false;
  b.needs.page_size_tokens = 32;
  b.needs.kv_dtypes = {DType::bf16};
  const std::vector<std::string> d = serving_catalog_differences(a, b);
  const std::vector<std::string> expected = {"cuBLASLt yes, here no", "KV dtypes bf16, f8_e4m3, here bf16",
                                             "KV page size 16 tokens, here 32 tokens"};
  EXPECT_EQ(d, expected);
}

}  // namespace
}  // namespace flare::helios
