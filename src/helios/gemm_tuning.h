// The GEMM tuning table: for each GEMM shape the CUDA backend runs, the kernel that won a timed race
// among the candidates cuBLASLt's heuristic proposed and, for small m, the variants of Flare's
// skinny kernels (kernels/skinny_gemm.cu for BF16 weights, kernels/fp8_linear.cu for FP8 weights)
// and, for decode batches on Hopper, of the tensor-core streaming kernel (kernels/stream_gemm.cu)
// (DESIGN.md section 2: preparation tunes, loading does not). The
// table is plain data with no CUDA dependency, so it can be tested, serialized into a package and
// parsed back on any machine.
//
// Key: (m bucket, n, k, output dtype, weight dtype, bias, fusion, architecture, cuBLASLt version).
// The fusion marks a GEMM whose only reader is the operation after it, which the race may fold in;
// its choice is kept apart from the same shape's plain GEMM, and any plain kind under such a key
// means "the plain GEMM, then that operation":
// - residual_norm: the output goes straight into a residual add and RMSNorm that can sum split-K
//   partials itself (Backend::linear_residual_rms_norm): the race also has the split_partials kernels;
// - swiglu: the output [m, 2 x inter] (gate, then up) goes straight into SwiGLU
//   (Backend::linear_swiglu): the race also has the stream kernel with SwiGLU in its epilogue.
// A cuBLASLt algorithm is opaque bytes (cublasLtMatmulAlgo_t is 8 x uint64) that only the same
// cuBLASLt version on the same architecture may reuse, hence both are part of the key. A skinny
// choice is a variant number.
//
// m buckets (bucket_m): decode and small batches (m <= 64) round up to a power of two (1, 2, 4, ...,
// 64), because the best kernel changes quickly there; larger m rounds up to a multiple of 64, the
// granularity of cuBLASLt's tiles, so a prefill chunk of 200 tokens shares the choice of 256. A bucket
// is tuned on the first real m that falls into it; the runner re-checks the algorithm for every
// exact shape it is used with and asks the heuristic instead when cuBLASLt rejects it.
//
// Serialized form (serialize/parse), little-endian: "FLGT", u32 format version, u32 entry count,
// entries, then SHA-256 of everything before. Entry: u8 arch length, arch ("sm_90"), u64 library
// version, i64 m bucket, i64 n, i64 k, u8 output dtype, u8 weight dtype, u8 bias, u8 fusion, u8
// kind, u8 variant, 8 x u64 algorithm, f32 time (us), u16 candidates raced. parse() rejects anything
// else with flare::Error (package bytes are untrusted): an unknown kind, a kind that does not take
// the weight dtype, a cuBLASLt entry with a variant, a skinny entry with an unknown variant, algorithm
// bytes, or a shape its kernel cannot run, a split_partials entry outside a residual_norm key or with
// a split that does not divide k, a stream_swiglu entry outside a swiglu key, and any format version
// but 4 (no swiglu fusion yet) and 5 (1 to 3, before the kind, the weight dtype and the fusion byte,
// included: their tables are re-tuned or re-exported).
//
// Ownership: one GemmTuning per backend, used by its engine thread; not thread-safe.
#pragma once

#include <array>
#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <string_view>
#include <tuple>

#include "helios/dtype.h"

namespace flare::helios {

// --autotune-effort: off takes the heuristic's first algorithm without timing; normal ("default")
// races the heuristic's top 8; audit races its top 16 with more repetitions.
enum class TuneEffort : std::uint8_t { off, normal, audit };

TuneEffort parse_tune_effort(std::string_view text);  // "off", "default", "audit"; usage error otherwise
std::string_view tune_effort_name(TuneEffort effort);

// What a GemmShapeKey's GEMM feeds (the header comment); its serialized byte.
enum class GemmFusion : std::uint8_t {
  none = 0,
  residual_norm = 1,  // Backend::linear_residual_rms_norm
  swiglu = 2,         // Backend::linear_swiglu
};

struct GemmShapeKey {
  std::int64_t m_bucket = 0;  // bucket_m(m)
  std::int64_t n = 0;         // output columns (weight rows)
  std::int64_t k = 0;         // reduction length
  DType out = DType::bf16;    // bf16 activations or f32 logits
  DType weights = DType::bf16;  // bf16, or f8_e4m3 with scales
  bool bias = false;
  GemmFusion fusion = GemmFusion::none;
  std::string arch;                 // "sm_90"
  std::uint64_t library_version = 0;  // cublasLtGetVersion()

  auto tie() const { return std::tie(m_bucket, n, k, out, weights, bias, fusion, arch, library_version); }
  bool operator<(const GemmShapeKey& o) const { return tie() < o.tie(); }
  bool operator==(const GemmShapeKey& o) const { return tie() == o.tie(); }
};

// Which kernel runs a GEMM.
enum class GemmKind : std::uint8_t {
  cublaslt = 0,  // cublasLtMatmul with GemmChoice::algo
  skinny = 1,    // flare_skinny_gemm variant GemmChoice::variant (bf16 weights, m <= 16, k % 8 == 0)
  skinny_fp8 = 2,  // kernels/fp8_linear.cu variant GemmChoice::variant (f8_e4m3 weights): 0-3 the
                   // CUDA-core kernel (m <= 8, k % 16 == 0), 4-7 the tensor-core one (m <= 16, k % 128 == 0)
  stream = 3,      // kernels/stream_gemm.cu (bf16 weights, sm_90, 9 <= m <= 128, k % 8 == 0), split k
                   // ways as k_stream_gemm_splits[GemmChoice::variant] says
  split_partials = 4,  // into-norm keys only: one strided-batched cublasLtMatmul with GemmChoice::algo
                       // computes k split GemmChoice::variant ways into F32 partials, which the
                       // norm sums (bf16 weights and output, no bias, m <= k_split_partials_max_m,
                       // k % (8 x variant) == 0)
  stream_swiglu = 5,   // swiglu keys only: kernels/stream_gemm.cu with SwiGLU in its epilogue, writing
                       // [m, inter] (bf16 weights and output, no bias, even n = 2 x inter, m and k as
                       // stream), split as k_stream_gemm_splits[GemmChoice::variant] says
};

// The skinny kernels' limits and variant counts (kernels/skinny_gemm.cu, kernels/fp8_linear.cu,
// cuda/skinny_gemm.h).
inline constexpr std::int64_t k_skinny_gemm_max_m = 16;
inline constexpr std::int64_t k_skinny_gemm_k_multiple = 8;
inline constexpr std::uint8_t k_skinny_gemm_n_variants = 4;
inline constexpr std::int64_t k_fp8_skinny_max_m = 8;
inline constexpr std::int64_t k_fp8_skinny_k_multiple = 16;
inline constexpr std::uint8_t k_fp8_skinny_n_variants = 8;
inline constexpr std::uint8_t k_fp8_mma_first_variant = 4;  // variants from here on: tensor cores
inline constexpr std::int64_t k_fp8_mma_max_m = 16;
inline constexpr std::int64_t k_fp8_mma_k_multiple = 128;
inline constexpr std::int64_t k_stream_gemm_min_m = 9;
inline constexpr std::int64_t k_stream_gemm_max_m = 128;
inline constexpr std::int64_t k_stream_gemm_k_multiple = 8;
// The stream kernel's variants: how many ways each weight tile's k is split (a cluster of that many
// CTAs, at most the portable 8).
inline constexpr std::array<std::uint8_t, 7> k_stream_gemm_splits = {1, 2, 3, 4, 5, 6, 8};
inline constexpr std::uint8_t k_stream_gemm_n_variants = std::uint8_t(k_stream_gemm_splits.size());

// The split_partials kernels' limits: the ways k may be split, and the rows (decode batches; a
// prefill chunk's tiles fill the GPU without a split).
inline constexpr std::array<std::uint8_t, 5> k_split_partials_parts = {2, 3, 4, 6, 8};
inline constexpr std::int64_t k_split_partials_max_m = 128;
inline constexpr std::int64_t k_split_partials_k_multiple = 8;  // of each part: 16-byte aligned slices
// Whether k splits `parts` ways for the split_partials kernels (parts one of k_split_partials_parts).
bool split_partials_divides(std::int64_t k, std::int64_t parts);

// How many copies of a weight matrix of `weight_bytes` the race takes in turn so that each run
// reads it from HBM, as a decode step does (the layers' weights together dwarf L2): 0 where it is at
// least twice the L2 (nothing of it survives to the next run) or the L2 size is unknown (0); else
// enough that L2 holds none of them when a copy's turn comes again (3 x L2 together), at most 64.
std::size_t race_weight_copies(std::uint64_t weight_bytes, std::uint64_t l2_bytes);

struct GemmChoice {
  GemmKind kind = GemmKind::cublaslt;
  std::uint8_t variant = 0;             // Flare kernel variant, or split_partials' parts; 0 for cuBLASLt
  std::array<std::uint64_t, 8> algo{};  // cublasLtMatmulAlgo_t, opaque; all zero for skinny
  float time_us = 0.0f;                 // mean time of one GEMM when it won (informational)
  std::uint16_t n_candidates = 0;       // how many candidates the race had
};

class GemmTuning {
 public:
  // The bucket of m (see the header comment); m >= 1.
  static std::int64_t bucket_m(std::int64_t m);

  const GemmChoice* find(const GemmShapeKey& key) const;
  void insert(const GemmShapeKey& key, const GemmChoice& choice);  // replaces an existing entry
  const std::map<GemmShapeKey, GemmChoice>& entries() const { return entries_; }
  std::size_t size() const { return entries_.size(); }
  // Entries under a fusion key: a fused operation's choice, kept beside its GEMM's own entry.
  std::size_t n_fused() const;

  // Frozen: a shape missing from the table takes the heuristic's first algorithm without timing
  // (flare run loads tuned packages frozen and asserts n_timed() == 0).
  bool frozen() const { return frozen_; }
  void set_frozen(bool frozen) { frozen_ = frozen; }
  TuneEffort effort() const { return effort_; }
  void set_effort(TuneEffort effort) { effort_ = effort; }
  // Races run (one per shape tuned); counted by the tuner.
  std::int64_t n_timed() const { return n_timed_; }
  void count_timed() { ++n_timed_; }

  // The table's entries as bytes (settings, counters and the attached file are not part of it).
  std::string serialize() const;
  // Throws flare::Error naming what is wrong with `bytes`.
  static GemmTuning parse(std::string_view bytes);

  // The table's file beside the kernel cache, shared by every backend and process on this GPU
  // model and cuBLASLt version. attach_file() merges the file's entries in and makes record() save
  // there; refresh() merges what others saved since. A backend refreshes before deciding a shape it
  // lacks, so two backends (or a captured graph and an eager step) never pick different algorithms
  // for one shape: the first decision saved wins.
  void attach_file(std::filesystem::path path);
  bool refresh();  // true when it added entries
  // insert(); when attached and not frozen, also merges the file and saves atomically.
  void record(const GemmShapeKey& key, const GemmChoice& choice);

  // `path` absent or damaged gives an empty table (a cache miss, never an error); save_file()
  // writes atomically (temporary file + rename).
  static GemmTuning load_file(const std::filesystem::path& path);
  void save_file(const std::filesystem::path& path) const;
  // <kernel cache>/gemm/<arch>-cublaslt-<version>-<effort>.tuning: efforts keep separate tables
  // (the spec: "effort separates cached selections"), so an audit re-races what default chose.
  static std::filesystem::path file_in(const std::filesystem::path& kernel_cache_dir, std::string_view arch,
                                       std::uint64_t library_version, TuneEffort effort);

 private:
  std::map<GemmShapeKey, GemmChoice> entries_;
  std::filesystem::path file_;  // "" when not attached
  bool frozen_ = false;
  TuneEffort effort_ = TuneEffort::normal;
  std::int64_t n_timed_ = 0;
};

}  // namespace flare::helios
