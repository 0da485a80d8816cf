// The GEMM tuning table without a GPU: m buckets, the byte format's round trip (cuBLASLt and skinny
// choices), rejection of hostile bytes (every truncation, every single-bit flip, forged checksums
// over bad fields: unknown kinds and variants, skinny choices it cannot run, the previous format
// version), the file beside the kernel cache (atomic save, damaged file = empty table, decisions
// shared through it), and effort names.
#include <unistd.h>

#include <openssl/evp.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>

#include <gtest/gtest.h>

#include "common/error.h"
#include "helios/gemm_tuning.h"

namespace flare::helios {
namespace {

namespace fs = std::filesystem;

GemmShapeKey key(std::int64_t m, std::int64_t n, std::int64_t k, DType out = DType::bf16, bool bias = false,
                 std::string arch = "sm_90", std::uint64_t version = 130100, DType weights = DType::bf16) {
  return {GemmTuning::bucket_m(m), n, k, out, weights, bias, GemmFusion::none, std::move(arch), version};
}

GemmShapeKey fp8_key(std::int64_t m, std::int64_t n, std::int64_t k) {
  return key(m, n, k, DType::bf16, false, "sm_90", 130100, DType::f8_e4m3);
}

GemmChoice choice(std::uint64_t seed) {
  GemmChoice c;
  std::mt19937_64 rng(seed);
  for (auto& w : c.algo) w = rng();
  c.time_us = float(seed % 1000) + 0.25f;
  c.n_candidates = std::uint16_t(seed % 17);
  return c;
}

GemmShapeKey into_norm_key(std::int64_t m, std::int64_t n, std::int64_t k) {
  GemmShapeKey k_ = key(m, n, k);
  k_.fusion = GemmFusion::residual_norm;
  return k_;
}

GemmShapeKey swiglu_key(std::int64_t m, std::int64_t n, std::int64_t k) {
  GemmShapeKey k_ = key(m, n, k);
  k_.fusion = GemmFusion::swiglu;
  return k_;
}

GemmChoice split_partials(std::uint8_t parts) {
  GemmChoice c = choice(parts);
  c.kind = GemmKind::split_partials;
  c.variant = parts;
  return c;
}

GemmChoice skinny(std::uint8_t variant) {
  return {.kind = GemmKind::skinny, .variant = variant, .algo = {}, .time_us = 9.5f, .n_candidates = 12};
}

GemmChoice stream(std::uint8_t variant) {
  return {.kind = GemmKind::stream, .variant = variant, .algo = {}, .time_us = 21.5f, .n_candidates = 14};
}

GemmChoice skinny_fp8(std::uint8_t variant) {
  return {.kind = GemmKind::skinny_fp8, .variant = variant, .algo = {}, .time_us = 5.5f, .n_candidates = 9};
}

GemmTuning sample_table() {
  GemmTuning t;
  t.insert(key(1, 4096, 4096), choice(1));
  t.insert(key(3, 6144, 4096, DType::bf16, true), choice(2));
  t.insert(key(200, 28672, 4096), choice(3));
  t.insert(key(17, 151936, 4096, DType::f32, false, "sm_120a", 120900), choice(4));
  t.insert(key(64, 100, 72, DType::f32, true, "sm_80"), choice(5));
  t.insert(key(1, 6144, 4096), skinny(0));
  t.insert(key(13, 4096, 14336, DType::f32, true), skinny(k_skinny_gemm_n_variants - 1));
  t.insert(fp8_key(1, 6144, 4096), skinny_fp8(2));
  t.insert(fp8_key(64, 6144, 4096), choice(6));
  return t;
}

// The table's bytes with the checksum recomputed, so a test can reach the field checks behind it.
std::string with_valid_checksum(std::string bytes) {
  bytes.resize(bytes.size() - 32);
  unsigned char digest[32];
  unsigned int n = 0;
  EVP_Digest(bytes.data(), bytes.size(), digest, &n, EVP_sha256(), nullptr);
  bytes.append(reinterpret_cast<const char*>(digest), 32);
  return bytes;
}

// The serialized table of one entry.
std::string one(const GemmShapeKey& k, const GemmChoice& c) {
  GemmTuning t;
  t.insert(k, c);
  return t.serialize();
}

std::string parse_error(const std::string& bytes) {
  try {
    GemmTuning::parse(bytes);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(GemmTuning, BucketsSmallMByPowersOfTwoAndLargeMByMultiplesOf64) {
  const std::vector<std::pair<std::int64_t, std::int64_t>> cases = {
      {1, 1}, {2, 2}, {3, 4}, {5, 8}, {17, 32}, {33, 64}, {64, 64}, {65, 128}, {128, 128}, {129, 192}, {200, 256},
      {2048, 2048}, {2049, 2112}, {4095, 4096}};
  for (const auto& [m, bucket] : cases) EXPECT_EQ(GemmTuning::bucket_m(m), bucket) << "m = " << m;
  EXPECT_THROW(GemmTuning::bucket_m(0), Error);
  for (std::int64_t m = 1; m <= 5000; ++m) {
    const std::int64_t b = GemmTuning::bucket_m(m);
    EXPECT_GE(b, m);
    EXPECT_EQ(GemmTuning::bucket_m(b), b) << "a bucket is its own bucket";
  }
}

TEST(GemmTuning, LooksUpTheBucketNotTheExactM) {
  GemmTuning t = sample_table();
  EXPECT_NE(t.find(key(1, 4096, 4096)), nullptr);
  EXPECT_EQ(t.find(key(2, 4096, 4096)), nullptr) << "m 2 is not in m 1's bucket";
  EXPECT_NE(t.find(key(230, 28672, 4096)), nullptr) << "230 and 200 share bucket 256";
  EXPECT_EQ(t.find(key(150, 28672, 4096)), nullptr) << "150 is in bucket 192";
  EXPECT_EQ(t.find(key(200, 28672, 4096, DType::f32)), nullptr) << "output dtype is part of the key";
  EXPECT_EQ(t.find(key(3, 6144, 4096)), nullptr) << "bias is part of the key";
  EXPECT_EQ(t.find(key(1, 4096, 4096, DType::bf16, false, "sm_89")), nullptr) << "arch is part of the key";
  EXPECT_EQ(t.find(key(1, 4096, 4096, DType::bf16, false, "sm_90", 130000)), nullptr) << "version is part of the key";
}

TEST(GemmTuning, SerializeParseRoundTrip) {
  const GemmTuning t = sample_table();
  const std::string bytes = t.serialize();
  const GemmTuning back = GemmTuning::parse(bytes);
  ASSERT_EQ(back.size(), t.size());
  for (const auto& [k, c] : t.entries()) {
    const GemmChoice* got = back.find(k);
    ASSERT_NE(got, nullptr) << k.arch << " " << k.m_bucket << "x" << k.n << "x" << k.k;
    EXPECT_EQ(got->kind, c.kind);
    EXPECT_EQ(got->variant, c.variant);
    EXPECT_EQ(got->algo, c.algo);
    EXPECT_EQ(got->time_us, c.time_us);
    EXPECT_EQ(got->n_candidates, c.n_candidates);
  }
  EXPECT_EQ(back.serialize(), bytes) << "serialization is canonical";
  EXPECT_FALSE(back.frozen());
  EXPECT_EQ(back.n_timed(), 0);
  EXPECT_EQ(GemmTuning::parse(GemmTuning().serialize()).size(), 0u) << "an empty table round-trips";
}

TEST(GemmTuning, RejectsEveryTruncationAndEveryBitFlip) {
  const std::string bytes = sample_table().serialize();
  for (std::size_t n = 0; n < bytes.size(); ++n) {
    EXPECT_THROW(GemmTuning::parse(bytes.substr(0, n)), Error) << "truncated to " << n;
  }
  EXPECT_THROW(GemmTuning::parse(bytes + "x"), Error);
  for (std::size_t i = 0; i < bytes.size(); ++i) {
    for (int bit = 0; bit < 8; ++bit) {
      std::string flipped = bytes;
      flipped[i] = char(flipped[i] ^ (1 << bit));
      EXPECT_THROW(GemmTuning::parse(flipped), Error) << "byte " << i << " bit " << bit;
    }
  }
  EXPECT_NE(parse_error("garbage").find("not a GEMM tuning table"), std::string::npos);
  std::string damaged = bytes;
  damaged[10] ^= 1;
  EXPECT_NE(parse_error(damaged).find("checksum"), std::string::npos);
}

TEST(GemmTuning, RejectsBadFieldsBehindAValidChecksum) {
  GemmTuning one;
  one.insert(key(1, 4096, 4096), choice(7));
  const std::string bytes = one.serialize();
  // Offsets in a one-entry table: magic 4, version 4, count 4, arch length 1, "sm_90" 5, library
  // version 8, m 8, n 8, k 8, out 1, weights 1, bias 1, fusion 1, kind 1, variant 1, algo 64,
  // time 4, candidates 2.
  const std::size_t entry = 12, arch = entry + 1, m = arch + 5 + 8, n = m + 8, out = n + 16, weights = out + 1,
                    bias = weights + 1, fusion = bias + 1, kind = fusion + 1, variant = kind + 1,
                    time = variant + 1 + 64;
  const auto patched = [&](std::size_t at, std::string_view with) {
    std::string b = bytes;
    b.replace(at, with.size(), with);
    return with_valid_checksum(b);
  };
  ASSERT_NO_THROW(GemmTuning::parse(with_valid_checksum(bytes)));
  EXPECT_NE(parse_error(patched(4, std::string("\x01\0\0\0", 4))).find("format version 1"), std::string::npos)
      << "version 1 (before the kind) is not read";
  EXPECT_NE(parse_error(patched(4, std::string("\x02\0\0\0", 4))).find("format version 2"), std::string::npos)
      << "version 2 (before the weight dtype) is not read";
  EXPECT_NE(parse_error(patched(4, std::string("\x03\0\0\0", 4))).find("format version 3"), std::string::npos)
      << "version 3 (before the fusion byte) is not read";
  EXPECT_NO_THROW(GemmTuning::parse(patched(4, std::string("\x04\0\0\0", 4)))) << "version 4 has the same bytes";
  EXPECT_NE(parse_error(patched(4, std::string("\x06\0\0\0", 4))).find("format version 6"), std::string::npos);
  EXPECT_NE(parse_error(patched(8, std::string("\xff\xff\xff\x0f", 4))).find("claims"), std::string::npos);
  EXPECT_NE(parse_error(patched(8, std::string("\0\0\0\0", 4))).find("trailing"), std::string::npos);
  EXPECT_NE(parse_error(patched(arch, "xx_90")).find("architecture"), std::string::npos);
  EXPECT_NE(parse_error(patched(m, std::string("\x03\0\0\0\0\0\0\0", 8))).find("shape"), std::string::npos)
      << "3 is not a bucket";
  EXPECT_NE(parse_error(patched(n, std::string(8, '\0'))).find("shape"), std::string::npos);
  EXPECT_NE(parse_error(patched(out, "\x04")).find("dtype"), std::string::npos);
  EXPECT_NE(parse_error(patched(weights, std::string(1, '\0'))).find("weight dtype"), std::string::npos) << "f32 weights";
  EXPECT_NE(parse_error(patched(weights, "\x09")).find("weight dtype"), std::string::npos);
  EXPECT_NO_THROW(GemmTuning::parse(patched(weights, "\x03"))) << "a cuBLASLt choice on FP8 weights";
  EXPECT_NE(parse_error(patched(bias, "\x02")).find("bias"), std::string::npos);
  EXPECT_NE(parse_error(patched(fusion, "\x03")).find("fusion"), std::string::npos);
  EXPECT_NO_THROW(GemmTuning::parse(patched(fusion, "\x01")));
  EXPECT_NO_THROW(GemmTuning::parse(patched(fusion, "\x02")));
  {
    std::string v4 = bytes;
    v4.replace(4, 4, std::string("\x04\0\0\0", 4));
    v4.replace(fusion, 1, "\x02");
    EXPECT_NE(parse_error(with_valid_checksum(v4)).find("fusion"), std::string::npos)
        << "no swiglu fusion in version 4";
  }
  EXPECT_NE(parse_error(patched(time, std::string("\0\0\xc0\x7f", 4))).find("time"), std::string::npos) << "NaN";
  EXPECT_NE(parse_error(patched(kind, "\x06")).find("unknown kind 6"), std::string::npos);
  EXPECT_NE(parse_error(patched(kind, "\x05")).find("cannot run"), std::string::npos) << "stream_swiglu, plain key";
  EXPECT_NE(parse_error(patched(kind, "\x04")).find("cannot run"), std::string::npos) << "split partials, plain key";
  EXPECT_NE(parse_error(patched(kind, "\x03")).find("algorithm bytes"), std::string::npos) << "a stream choice";
  EXPECT_NE(parse_error(patched(kind, "\x02")).find("other weights"), std::string::npos) << "FP8 kernel, BF16 weights";
  EXPECT_NE(parse_error(patched(kind, "\xff")).find("unknown kind"), std::string::npos);
  EXPECT_NE(parse_error(patched(variant, "\x01")).find("cuBLASLt choice with variant"), std::string::npos);

  GemmTuning two;
  two.insert(key(1, 4096, 4096), choice(7));
  two.insert(key(2, 4096, 4096), choice(8));
  std::string twice = two.serialize();
  const std::size_t entry_bytes = (twice.size() - 12 - 32) / 2;
  twice.replace(12 + entry_bytes + 1 + 5 + 8, 8, std::string("\x01\0\0\0\0\0\0\0", 8));  // second m := 1
  EXPECT_NE(parse_error(with_valid_checksum(twice)).find("repeats"), std::string::npos);
}

// A skinny entry replays only what the skinny kernel runs: a known variant, no algorithm bytes,
// m bucket <= 16 and k a multiple of 8.
TEST(GemmTuning, RejectsSkinnyChoicesItCannotReplay) {
  for (std::uint8_t v = 0; v < k_skinny_gemm_n_variants; ++v) {
    for (const std::int64_t m : {1, 2, 3, 8, 16}) {
      const GemmTuning back = GemmTuning::parse(one(key(m, 7, 4104), skinny(v)));
      ASSERT_NE(back.find(key(m, 7, 4104)), nullptr);
      EXPECT_EQ(back.find(key(m, 7, 4104))->kind, GemmKind::skinny);
      EXPECT_EQ(back.find(key(m, 7, 4104))->variant, v);
    }
  }
  // Offsets as in RejectsBadFieldsBehindAValidChecksum.
  const std::size_t variant = 12 + 1 + 5 + 8 + 8 + 8 + 8 + 1 + 1 + 1 + 1 + 1, algo = variant + 1;
  const std::string bytes = one(key(1, 4096, 4096), skinny(0));
  const auto patched = [&](std::size_t at, std::string_view with) {
    std::string b = bytes;
    b.replace(at, with.size(), with);
    return with_valid_checksum(b);
  };
  ASSERT_NO_THROW(GemmTuning::parse(patched(variant, std::string(1, char(k_skinny_gemm_n_variants - 1)))));
  EXPECT_NE(parse_error(patched(variant, std::string(1, char(k_skinny_gemm_n_variants)))).find("kernel variant"),
            std::string::npos);
  EXPECT_NE(parse_error(patched(variant, "\xff")).find("kernel variant"), std::string::npos);
  EXPECT_NE(parse_error(patched(algo + 17, "\x01")).find("algorithm bytes"), std::string::npos);
  EXPECT_NE(parse_error(one(key(17, 4096, 4096), skinny(0))).find("cannot run"), std::string::npos) << "m bucket 32";
  EXPECT_NE(parse_error(one(key(1, 4096, 4100), skinny(0))).find("cannot run"), std::string::npos) << "k % 8 != 0";
  EXPECT_NO_THROW(GemmTuning::parse(one(key(17, 4096, 4100), choice(3)))) << "cuBLASLt takes any shape";
}

// The FP8 skinny kernels: FP8 weights only, BF16 output; the CUDA-core variants m bucket <= 8 and k
// a multiple of 16, the tensor-core ones m bucket <= 16 and k a multiple of 128.
TEST(GemmTuning, RejectsFp8SkinnyChoicesItCannotReplay) {
  for (std::uint8_t v = 0; v < k_fp8_skinny_n_variants; ++v) {
    for (const std::int64_t m : {1, 2, 5, 8}) {
      const GemmTuning back = GemmTuning::parse(one(fp8_key(m, 7, 4096), skinny_fp8(v)));
      ASSERT_NE(back.find(fp8_key(m, 7, 4096)), nullptr);
      EXPECT_EQ(back.find(fp8_key(m, 7, 4096))->kind, GemmKind::skinny_fp8);
      EXPECT_EQ(back.find(fp8_key(m, 7, 4096))->variant, v);
      EXPECT_EQ(back.find(key(m, 7, 4096)), nullptr) << "BF16 and FP8 weights are different keys";
    }
  }
  EXPECT_NE(parse_error(one(fp8_key(1, 4096, 4096), skinny_fp8(k_fp8_skinny_n_variants))).find("kernel variant"),
            std::string::npos);
  EXPECT_NE(parse_error(one(fp8_key(9, 4096, 4096), skinny_fp8(0))).find("cannot run"), std::string::npos)
      << "m bucket 16";
  EXPECT_NE(parse_error(one(fp8_key(1, 4096, 4104), skinny_fp8(0))).find("cannot run"), std::string::npos)
      << "k % 16 != 0";
  GemmShapeKey f32_out = fp8_key(1, 4096, 4096);
  f32_out.out = DType::f32;
  EXPECT_NE(parse_error(one(f32_out, skinny_fp8(0))).find("cannot run"), std::string::npos) << "F32 output";
  EXPECT_NE(parse_error(one(key(1, 4096, 4096), skinny_fp8(0))).find("other weights"), std::string::npos);
  EXPECT_NE(parse_error(one(fp8_key(1, 4096, 4096), skinny(0))).find("other weights"), std::string::npos);
  EXPECT_NO_THROW(GemmTuning::parse(one(fp8_key(64, 4096, 4096), choice(5))));
  EXPECT_NO_THROW(GemmTuning::parse(one(fp8_key(16, 4096, 4096), skinny_fp8(k_fp8_mma_first_variant))));
  EXPECT_NE(parse_error(one(fp8_key(16, 4096, 4096), skinny_fp8(k_fp8_mma_first_variant - 1))).find("cannot run"),
            std::string::npos) << "the CUDA-core kernel stops at 8";
  EXPECT_NE(parse_error(one(fp8_key(17, 4096, 4096), skinny_fp8(k_fp8_mma_first_variant))).find("cannot run"),
            std::string::npos) << "m bucket 32";
  EXPECT_NE(parse_error(one(fp8_key(1, 4096, 4112), skinny_fp8(k_fp8_mma_first_variant))).find("cannot run"),
            std::string::npos) << "k % 128 != 0";
  EXPECT_NO_THROW(GemmTuning::parse(one(fp8_key(1, 4096, 4112), skinny_fp8(0)))) << "the CUDA-core kernel takes it";
}

// The stream kernel: BF16 weights, m bucket 16 to 128 (it takes m >= 9), k a multiple of 8.
TEST(GemmTuning, RejectsStreamChoicesItCannotReplay) {
  for (std::uint8_t v = 0; v < k_stream_gemm_n_variants; ++v) {
    for (const std::int64_t m : {9, 16, 32, 64, 128}) {
      for (const DType out : {DType::bf16, DType::f32}) {
        GemmShapeKey k = key(m, 4096, 4104);
        k.out = out;
        const GemmTuning back = GemmTuning::parse(one(k, stream(v)));
        ASSERT_NE(back.find(k), nullptr);
        EXPECT_EQ(back.find(k)->kind, GemmKind::stream);
        EXPECT_EQ(back.find(k)->variant, v);
      }
    }
  }
  EXPECT_NE(parse_error(one(key(64, 4096, 4096), stream(k_stream_gemm_n_variants))).find("kernel variant"),
            std::string::npos);
  EXPECT_NE(parse_error(one(key(8, 4096, 4096), stream(0))).find("cannot run"), std::string::npos) << "m bucket 8";
  EXPECT_NE(parse_error(one(key(192, 4096, 4096), stream(0))).find("cannot run"), std::string::npos) << "m bucket 192";
  EXPECT_NE(parse_error(one(key(64, 4096, 4100), stream(0))).find("cannot run"), std::string::npos) << "k % 8 != 0";
  EXPECT_NE(parse_error(one(fp8_key(64, 4096, 4096), stream(0))).find("other weights"), std::string::npos);
}

// Split partials: into-norm keys only (apart from the same shape's plain choice), BF16 weights and
// output, no bias, m bucket <= 128, and a listed split whose parts are multiples of 8.
TEST(GemmTuning, SplitPartialsOnlyWhereTheyRun) {
  for (const std::uint8_t parts : k_split_partials_parts) {
    for (const std::int64_t m : {1, 16, 64, 128}) {
      GemmTuning t;
      t.insert(into_norm_key(m, 4096, 12288), split_partials(parts));
      t.insert(key(m, 4096, 12288), choice(9));
      const GemmTuning back = GemmTuning::parse(t.serialize());
      ASSERT_NE(back.find(into_norm_key(m, 4096, 12288)), nullptr);
      EXPECT_EQ(back.find(into_norm_key(m, 4096, 12288))->kind, GemmKind::split_partials);
      EXPECT_EQ(back.find(into_norm_key(m, 4096, 12288))->variant, parts);
      EXPECT_EQ(back.find(key(m, 4096, 12288))->kind, GemmKind::cublaslt) << "the plain GEMM keeps its own entry";
    }
  }
  EXPECT_NO_THROW(GemmTuning::parse(one(into_norm_key(64, 4096, 4096), choice(4)))) << "plain may win an into-norm race";
  EXPECT_NE(parse_error(one(key(64, 4096, 4096), split_partials(4))).find("cannot run"), std::string::npos);
  EXPECT_NE(parse_error(one(into_norm_key(192, 4096, 4096), split_partials(4))).find("cannot run"), std::string::npos);
  EXPECT_NE(parse_error(one(into_norm_key(64, 4096, 4096), split_partials(5))).find("cannot run"), std::string::npos)
      << "5 is not a listed split";
  EXPECT_NE(parse_error(one(into_norm_key(64, 4096, 4104), split_partials(2))).find("cannot run"), std::string::npos)
      << "parts of 2052";
  EXPECT_NE(parse_error(one(into_norm_key(64, 4096, 4096), split_partials(0))).find("cannot run"), std::string::npos);
  GemmShapeKey biased = into_norm_key(64, 4096, 4096);
  biased.bias = true;
  EXPECT_NE(parse_error(one(biased, split_partials(2))).find("cannot run"), std::string::npos);
  GemmShapeKey fp8 = into_norm_key(64, 4096, 4096);
  fp8.weights = DType::f8_e4m3;
  EXPECT_NE(parse_error(one(fp8, split_partials(2))).find("cannot run"), std::string::npos);
}

// The streaming GEMM with SwiGLU in its epilogue: swiglu keys only, BF16 output, no bias, an even n
// (gate and up rows), and the stream kernel's variants, m and k.
TEST(GemmTuning, StreamSwigluOnlyWhereItRuns) {
  const auto stream_swiglu = [](std::uint8_t variant) {
    return GemmChoice{
        .kind = GemmKind::stream_swiglu, .variant = variant, .algo = {}, .time_us = 60.5f, .n_candidates = 8};
  };
  for (std::uint8_t v = 0; v < k_stream_gemm_n_variants; ++v) {
    GemmTuning t;
    t.insert(swiglu_key(64, 28672, 4096), stream_swiglu(v));
    t.insert(key(64, 28672, 4096), choice(3));
    t.insert(into_norm_key(64, 28672, 4096), choice(4));
    const GemmTuning back = GemmTuning::parse(t.serialize());
    ASSERT_EQ(back.size(), 3u) << "the fusions keep apart from the plain GEMM and from each other";
    EXPECT_EQ(back.find(swiglu_key(64, 28672, 4096))->kind, GemmKind::stream_swiglu);
    EXPECT_EQ(back.find(swiglu_key(64, 28672, 4096))->variant, v);
    EXPECT_EQ(back.find(key(64, 28672, 4096))->kind, GemmKind::cublaslt);
  }
  {
    GemmTuning t;
    t.insert(key(64, 28672, 4096), choice(1));
    t.insert(swiglu_key(64, 28672, 4096), stream_swiglu(0));
    t.insert(key(64, 4096, 14336), choice(2));
    t.insert(into_norm_key(64, 4096, 14336), split_partials(2));
    EXPECT_EQ(t.size(), 4u);
    EXPECT_EQ(t.n_fused(), 2u) << "two GEMM shapes, each with a fused operation's choice";
  }
  EXPECT_NO_THROW(GemmTuning::parse(one(swiglu_key(64, 28672, 4096), choice(5)))) << "plain may win a swiglu race";
  EXPECT_NO_THROW(GemmTuning::parse(one(swiglu_key(1, 28672, 4096), skinny(2)))) << "and so may a skinny kernel";
  EXPECT_NE(parse_error(one(key(64, 28672, 4096), stream_swiglu(0))).find("cannot run"), std::string::npos);
  EXPECT_NE(parse_error(one(into_norm_key(64, 28672, 4096), stream_swiglu(0))).find("cannot run"), std::string::npos);
  EXPECT_NE(parse_error(one(swiglu_key(64, 28671, 4096), stream_swiglu(0))).find("cannot run"), std::string::npos)
      << "odd n";
  EXPECT_NE(parse_error(one(swiglu_key(8, 28672, 4096), stream_swiglu(0))).find("cannot run"), std::string::npos)
      << "m bucket 8";
  EXPECT_NE(parse_error(one(swiglu_key(64, 28672, 4100), stream_swiglu(0))).find("cannot run"), std::string::npos)
      << "k % 8 != 0";
  EXPECT_NE(parse_error(one(swiglu_key(64, 28672, 4096), stream_swiglu(k_stream_gemm_n_variants))).find("variant"),
            std::string::npos);
  GemmShapeKey biased = swiglu_key(64, 28672, 4096);
  biased.bias = true;
  EXPECT_NE(parse_error(one(biased, stream_swiglu(0))).find("cannot run"), std::string::npos);
  GemmShapeKey logits = swiglu_key(64, 28672, 4096);
  logits.out = DType::f32;
  EXPECT_NE(parse_error(one(logits, stream_swiglu(0))).find("cannot run"), std::string::npos);
  GemmShapeKey fp8 = swiglu_key(64, 28672, 4096);
  fp8.weights = DType::f8_e4m3;
  EXPECT_NE(parse_error(one(fp8, stream_swiglu(0))).find("other weights"), std::string::npos);
}

TEST(GemmTuning, SplitPartialsDivides) {
  EXPECT_TRUE(split_partials_divides(14336, 2));
  EXPECT_TRUE(split_partials_divides(14336, 8));
  EXPECT_TRUE(split_partials_divides(4096, 4));
  EXPECT_FALSE(split_partials_divides(4096, 3)) << "4096 / 3 is not whole";
  EXPECT_TRUE(split_partials_divides(3 * 8 * 100, 3));
  EXPECT_FALSE(split_partials_divides(4104, 2)) << "parts of 2052 are not 16-byte aligned";
  EXPECT_FALSE(split_partials_divides(4096, 1));
  EXPECT_FALSE(split_partials_divides(4096, 16));
  EXPECT_FALSE(split_partials_divides(0x4000, 0));
}

TEST(GemmTuning, RandomBytesNeverParse) {
  std::mt19937 rng(12345);
  for (int i = 0; i < 2000; ++i) {
    std::string bytes(std::size_t(rng() % 400), '\0');
    for (char& c : bytes) c = char(rng());
    if (i % 2 == 0 && bytes.size() >= 4) bytes.replace(0, 4, "FLGT");
    EXPECT_THROW(GemmTuning::parse(bytes), Error);
  }
}

class GemmTuningFile : public testing::Test {
 protected:
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  fs::path dir_ = fs::temp_directory_path() / ("flare-gemm-tuning-" + std::to_string(::getpid()));
};

TEST_F(GemmTuningFile, SavesAtomicallyAndLoadsBack) {
  const fs::path path = GemmTuning::file_in(dir_, "sm_90", 130100, TuneEffort::normal);
  EXPECT_EQ(path, dir_ / "gemm" / "sm_90-cublaslt-130100-default.tuning");
  EXPECT_EQ(GemmTuning::file_in(dir_, "sm_90", 130100, TuneEffort::audit).filename(),
            "sm_90-cublaslt-130100-audit.tuning");
  EXPECT_EQ(GemmTuning::load_file(path).size(), 0u) << "no file yet: an empty table";
  const GemmTuning t = sample_table();
  t.save_file(path);
  EXPECT_EQ(GemmTuning::load_file(path).serialize(), t.serialize());
  std::size_t n_files = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(path.parent_path())) ++n_files;
  EXPECT_EQ(n_files, 1u) << "no temporary file left behind";

  std::string bytes = t.serialize();
  bytes[20] ^= 0x10;
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
  EXPECT_EQ(GemmTuning::load_file(path).size(), 0u) << "a damaged file is a miss, not an error";
  EXPECT_THROW(GemmTuning::file_in(dir_, "../x", 1, TuneEffort::normal), Error);
}

TEST_F(GemmTuningFile, AttachedTablesShareDecisionsThroughTheFile) {
  const fs::path path = GemmTuning::file_in(dir_, "sm_90", 130100, TuneEffort::normal);
  GemmTuning a, b;
  a.attach_file(path);
  b.attach_file(path);
  a.record(key(1, 4096, 4096), choice(1));
  EXPECT_EQ(b.find(key(1, 4096, 4096)), nullptr) << "b looked before a recorded";
  EXPECT_TRUE(b.refresh());
  ASSERT_NE(b.find(key(1, 4096, 4096)), nullptr);
  EXPECT_EQ(b.find(key(1, 4096, 4096))->algo, choice(1).algo);
  EXPECT_FALSE(b.refresh()) << "nothing new";
  b.record(key(8, 4096, 4096), choice(2));  // saving merges a's entries, so neither is lost
  GemmTuning c;
  c.attach_file(path);
  EXPECT_EQ(c.size(), 2u);
  EXPECT_EQ(c.find(key(1, 4096, 4096))->algo, choice(1).algo) << "b's save kept a's entry";

  c.set_frozen(true);
  c.record(key(64, 4096, 4096), choice(3));
  EXPECT_EQ(GemmTuning::load_file(path).size(), 2u) << "a frozen table records in memory only";
  GemmTuning detached;
  detached.record(key(1, 100, 72), choice(4));
  EXPECT_FALSE(detached.refresh());
  EXPECT_EQ(GemmTuning::load_file(path).size(), 2u);
}

TEST(GemmTuning, RaceCopiesWeightsThatL2WouldHold) {
  constexpr std::uint64_t l2 = 50u << 20, mib = 1u << 20;
  EXPECT_EQ(race_weight_copies(34 * mib, 0), 0u) << "unknown L2: timed in place";
  EXPECT_EQ(race_weight_copies(0, l2), 0u);
  EXPECT_EQ(race_weight_copies(2 * l2, l2), 0u) << "twice the L2 streams from HBM anyway";
  EXPECT_EQ(race_weight_copies(235 * mib, l2), 0u) << "Llama-3.1-8B gate_up";
  EXPECT_EQ(race_weight_copies(34 * mib, l2), 5u) << "Llama-3.1-8B o: 5 x 34 MiB exceed 3 x L2";
  EXPECT_EQ(race_weight_copies(48 * mib, l2), 4u) << "qkv";
  EXPECT_EQ(race_weight_copies(2 * l2 - 1, l2), 2u);
  EXPECT_EQ(race_weight_copies(64 * 1024, l2), 64u) << "capped";
  for (const std::uint64_t bytes : {1 * mib, 8 * mib, 33 * mib, 99 * mib}) {
    const std::size_t n = race_weight_copies(bytes, l2);
    EXPECT_TRUE(n == 64 || n * bytes > 3 * l2) << bytes;
  }
}

TEST(GemmTuning, EffortNamesMatchTheFlag) {
  EXPECT_EQ(parse_tune_effort("off"), TuneEffort::off);
  EXPECT_EQ(parse_tune_effort("default"), TuneEffort::normal);
  EXPECT_EQ(parse_tune_effort("audit"), TuneEffort::audit);
  for (TuneEffort e : {TuneEffort::off, TuneEffort::normal, TuneEffort::audit}) {
    EXPECT_EQ(parse_tune_effort(tune_effort_name(e)), e);
  }
  EXPECT_THROW(parse_tune_effort("max"), Error);
  GemmTuning t;
  EXPECT_EQ(t.effort(), TuneEffort::normal);
  EXPECT_FALSE(t.frozen());
  t.count_timed();
  EXPECT_EQ(t.n_timed(), 1);
}

}  // namespace
}  // namespace flare::helios
