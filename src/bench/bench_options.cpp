#include "bench/bench_options.h"

#include <algorithm>
#include <charconv>
#include <initializer_list>

#include <fmt/format.h>

#include "common/error.h"

namespace flare::bench {
namespace {

std::int64_t parse_integer(std::string_view text, std::string_view option) {
  std::int64_t value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size()) {
    fail_usage("{}: '{}' is not an integer", option, text);
  }
  return value;
}

std::int32_t parse_count(std::string_view text, std::string_view option, std::int64_t min) {
  const std::int64_t value = parse_integer(text, option);
  if (value < min || value > (1 << 24)) fail_usage("{}: {} is outside {}..{}", option, value, min, 1 << 24);
  return std::int32_t(value);
}

}  // namespace

std::vector<std::int32_t> parse_positive_list(std::string_view text, std::string_view option) {
  std::vector<std::int32_t> values;
  std::size_t begin = 0;
  while (begin <= text.size()) {
    const std::size_t end = std::min(text.find(',', begin), text.size());
    const std::int32_t value = parse_count(text.substr(begin, end - begin), option, 1);
    if (std::find(values.begin(), values.end(), value) != values.end()) fail_usage("{}: {} is listed twice", option, value);
    values.push_back(value);
    begin = end + 1;
  }
  return values;
}

std::vector<helios::DType> parse_kv_dtypes(std::string_view text) {
  std::vector<helios::DType> dtypes;
  std::size_t begin = 0;
  while (begin <= text.size()) {
    const std::size_t end = std::min(text.find(',', begin), text.size());
    const std::string_view name = text.substr(begin, end - begin);
    helios::DType dtype;
    if (name == "bf16") {
      dtype = helios::DType::bf16;
    } else if (name == "fp8" || name == "f8_e4m3") {
      dtype = helios::DType::f8_e4m3;
    } else {
      fail_usage("--kv-dtype: '{}' is not a KV dtype (bf16, fp8)", name);
    }
    if (std::find(dtypes.begin(), dtypes.end(), dtype) != dtypes.end()) fail_usage("--kv-dtype: {} is listed twice", name);
    dtypes.push_back(dtype);
    begin = end + 1;
  }
  return dtypes;
}

helios::cuda::DependentLaunch parse_dependent_launch(std::string_view text) {
  using helios::cuda::DependentLaunch;
  for (const DependentLaunch mode : {DependentLaunch::early_work, DependentLaunch::all, DependentLaunch::off}) {
    if (text == helios::cuda::dependent_launch_name(mode)) return mode;
  }
  fail_usage("--dependent-launch: '{}' is not a launch mode (early-work, all, off)", text);
}

std::vector<std::uint64_t> parse_seed_list(std::string_view text, std::string_view option) {
  std::vector<std::uint64_t> seeds;
  std::size_t begin = 0;
  while (begin <= text.size()) {
    const std::size_t end = std::min(text.find(',', begin), text.size());
    const std::string_view item = text.substr(begin, end - begin);
    std::uint64_t value = 0;
    const auto [ptr, ec] = std::from_chars(item.data(), item.data() + item.size(), value);
    if (item.empty() || ec != std::errc() || ptr != item.data() + item.size()) {
      fail_usage("{}: '{}' is not a non-negative integer", option, item);
    }
    if (std::find(seeds.begin(), seeds.end(), value) != seeds.end()) fail_usage("{}: {} is listed twice", option, value);
    seeds.push_back(value);
    begin = end + 1;
  }
  return seeds;
}

void apply_round_defaults(BenchOptions& o, bool batches_set, bool contexts_set, bool width_set, bool warmup_set,
                          bool repetitions_set) {
  if (!batches_set) o.batches = {1, 2, 4};
  if (!contexts_set) o.contexts = {512, 2048, 8192, 16384};
  if (!width_set) o.verify_tokens = 8;
  if (!warmup_set) o.warmup = 5;
  if (!repetitions_set) o.repetitions = 20;
}

void bench_options_validate(const BenchOptions& o) {
  if (o.gpu < 0) fail_usage("--gpus: {} is not a GPU index", o.gpu);
  if (o.batches.empty()) fail_usage("--batches: at least one batch is needed");
  if (o.contexts.empty()) fail_usage("--contexts: at least one context length is needed");
  if (o.kv_dtypes.empty()) fail_usage("--kv-dtype: at least one dtype is needed");
  if (o.warmup < 0) fail_usage("--warmup: {} is negative", o.warmup);
  if (o.repetitions < 1) fail_usage("--repetitions: at least one timed run is needed, not {}", o.repetitions);
  if (o.prefill_tokens < 0) fail_usage("--prefill: {} is negative", o.prefill_tokens);
  if (o.attention_batch < 1) fail_usage("--attention-batch: {} must be positive", o.attention_batch);
  if (o.verify_tokens == 1 || o.verify_tokens > 16) {
    fail_usage("--verify-tokens: {} is not 0 (none) or 2 to 16 tokens a row", o.verify_tokens);
  }
  if (o.attention_context < 0) fail_usage("--attention-context: {} is negative", o.attention_context);
  if (o.rounds) {
    // Verify rows attend through the decode kernel up to 8 tokens a row.
    if (o.verify_tokens < 2 || o.verify_tokens > 8)
      fail_usage("--verify-width: {} is not 2 to 8 tokens a row (the pending token and its drafts)", o.verify_tokens);
    if (o.seeds.empty()) fail_usage("--seeds: at least one seed is needed");
    if (o.warmup < 1) fail_usage("--warmup: a rounds run needs at least one warm-up round, not {}", o.warmup);
    for (const std::int32_t context : o.contexts) {
      if (context % 128 != 0) fail_usage("--contexts: {} is not a multiple of 128 (rounds)", context);
    }
  }
  if (o.profile_batch != 0 && std::find(o.batches.begin(), o.batches.end(), o.profile_batch) == o.batches.end()) {
    fail_usage("--profile-batch: {} is not one of the decode buckets", o.profile_batch);
  }
}

BenchArgs bench_args_parse(const std::vector<std::string>& args) {
  BenchArgs a;
  BenchOptions& o = a.options;
  bool batches_set = false, contexts_set = false, width_set = false, warmup_set = false, repetitions_set = false;
  for (std::size_t i = 0; i < args.size(); ++i) {
    std::string name = args[i], value;
    if (name == "--help" || name == "-h") {
      a.help = true;
      continue;
    }
    if (name == "--no-breakdown") {
      o.breakdown = false;
      continue;
    }
    if (name == "--no-stream-gemm") {
      o.backend.stream_gemm = false;
      continue;
    }
    if (name == "--gemm-race-log") {
      o.backend.gemm_race_log = true;
      continue;
    }
    if (name == "--rounds") {
      o.rounds = true;
      continue;
    }
    if (name.rfind("--", 0) != 0) fail_usage("unexpected argument '{}'", name);
    if (const auto eq = name.find('='); eq != std::string::npos) {
      value = name.substr(eq + 1);
      name.resize(eq);
    } else {
      if (i + 1 >= args.size()) fail_usage("{} needs a value", name);
      value = args[++i];
    }
    if (name == "--shape") {
      a.shape = value;
    } else if (name == "--buckets" || name == "--batches") {
      o.batches = parse_positive_list(value, name);
      batches_set = true;
    } else if (name == "--context" || name == "--contexts") {
      o.contexts = parse_positive_list(value, name);
      contexts_set = true;
    } else if (name == "--prefill") {
      o.prefill_tokens = parse_count(value, name, 0);
    } else if (name == "--kv-dtype") {
      o.kv_dtypes = parse_kv_dtypes(value);
    } else if (name == "--weights") {
      if (value == "bf16") {
        o.weights = helios::DType::bf16;
      } else if (value == "fp8") {
        o.weights = helios::DType::f8_e4m3;
      } else {
        fail_usage("--weights: '{}' is not a weight dtype (bf16, fp8)", value);
      }
    } else if (name == "--verify-tokens" || name == "--verify-width") {
      o.verify_tokens = parse_count(value, name, 0);
      width_set = true;
    } else if (name == "--seeds") {
      o.seeds = parse_seed_list(value, name);
    } else if (name == "--attention-batch") {
      o.attention_batch = parse_count(value, name, 1);
    } else if (name == "--attention-context") {
      o.attention_context = parse_count(value, name, 0);
    } else if (name == "--profile-batch") {
      o.profile_batch = parse_count(value, name, 0);
    } else if (name == "--warmup") {
      o.warmup = parse_count(value, name, 0);
      warmup_set = true;
    } else if (name == "--repetitions") {
      o.repetitions = parse_count(value, name, 1);
      repetitions_set = true;
    } else if (name == "--gpu") {
      o.gpu = parse_count(value, name, 0);
    } else if (name == "--seed") {
      o.seed = std::uint64_t(parse_integer(value, name));
    } else if (name == "--json") {
      o.json_path = value;
    } else if (name == "--kernel-cache") {
      o.kernel_cache = value;
    } else if (name == "--dependent-launch") {
      o.backend.dependent_launch = parse_dependent_launch(value);
    } else {
      fail_usage("unknown option {} (see --help)", name);
    }
  }
  if (o.rounds) apply_round_defaults(o, batches_set, contexts_set, width_set, warmup_set, repetitions_set);
  bench_options_validate(o);
  return a;
}

std::string bench_args_usage() {
  return "usage: cuda_forward_bench [options]\n"
         "Measures a dense model's prefill and decode step times on one GPU against the device's\n"
         "measured copy bandwidth and BF16 GEMM throughput.\n"
         "  --shape S              llama-3.1-8b | qwen3-8b (random weights), a config.json, or a\n"
         "                         checkpoint directory (its weights)        [llama-3.1-8b]\n"
         "  --buckets LIST         decode batch buckets                       [1,2,4,8,16,32,64]\n"
         "  --context LIST         cached tokens per decode row               [1024]\n"
         "  --prefill N            prompt tokens of the prefill step (0: skip) [2048]\n"
         "  --kv-dtype LIST        bf16 | fp8 | bf16,fp8                       [bf16]\n"
         "  --weights W            random matrices: bf16 | fp8 (128x128 block scales) [bf16]\n"
         "  --verify-tokens N      also a verify step of N tokens a row (1 + drafts) per bucket,\n"
         "                         against its decode step (0: none)           [0]\n"
         "  --attention-batch N    decode attention alone: rows               [32]\n"
         "  --attention-context N  ... of N cached tokens (0: skip)           [8192]\n"
         "  --warmup N             untimed runs per measurement               [3]\n"
         "  --repetitions N        timed runs per measurement                 [10]\n"
         "  --no-breakdown         skip the per-operation table\n"
         "  --profile-batch N      run one decode step of bucket N (a graph replay where captured)\n"
         "                         between cuProfilerStart and cuProfilerStop, for\n"
         "                         ncu --profile-from-start off (0: none)     [0]\n"
         "  --rounds               complete speculative rounds instead of steps: per batch x\n"
         "                         context x seed, a verify step of --verify-tokens a row (its\n"
         "                         graph), every position sampled on the device, drafts accepted\n"
         "                         (defaults then: batches 1,2,4, contexts 512,2048,8192,16384,\n"
         "                         8 tokens a row, 5 warm-up and 20 timed rounds)\n"
         "  --seeds LIST           rounds: input and sampling seeds            [0,1,2]\n"
         "  --gpu N                device ordinal                             [0]\n"
         "  --seed N               random weights, KV and tokens              [1]\n"
         "  --json PATH            also write the report as JSON\n"
         "  --kernel-cache PATH    compiled kernel cache      [~/.cache/flare/kernels]\n"
         "CUDA backend switches, for measuring what a kernel or launch mode brings:\n"
         "  --no-stream-gemm       leave the sm_90 streaming GEMM out of the GEMM races\n"
         "  --dependent-launch M   programmatic dependent launch (sm_90+): early-work\n"
         "                         (the GEMMs, decode attention), all, off    [early-work]\n"
         "  --gemm-race-log        print each GEMM race's entrants and times on stderr\n"
         "Exits 1 with a message when no GPU is usable, 2 on a usage error.\n";
}

}  // namespace flare::bench
