#include "ignition/bench_command.h"

#include <cstdio>

#include "bench/gpu_bench.h"
#include "common/cli.h"
#include "common/error.h"
#include "common/sizes.h"
#include "ignition/export.h"
#include "ignition/resolve.h"
#include "model/recipes/recipe.h"

namespace flare::ignition {

bench::BenchOptions bench_options_from(const BenchCommandOptions& options) {
  bench::BenchOptions o = options.bench;
  if (options.gpus) {
    const std::vector<int> gpus = parse_gpu_list(*options.gpus);
    if (gpus.size() != 1) fail_usage("--gpus names {} GPUs; the benchmark runs on one GPU", gpus.size());
    o.gpu = gpus.front();
  }
  if (options.batches) o.batches = bench::parse_positive_list(*options.batches, "--batches");
  if (options.contexts) o.contexts = bench::parse_positive_list(*options.contexts, "--contexts");
  if (options.kv_dtype) o.kv_dtypes = bench::parse_kv_dtypes(*options.kv_dtype);
  if (options.dependent_launch) o.backend.dependent_launch = bench::parse_dependent_launch(*options.dependent_launch);
  if (options.seeds) o.seeds = bench::parse_seed_list(*options.seeds, "--seeds");
  if (options.verify_width) o.verify_tokens = *options.verify_width;
  if (options.warmup) o.warmup = *options.warmup;
  if (options.repetitions) o.repetitions = *options.repetitions;
  if (o.rounds) {
    bench::apply_round_defaults(o, options.batches.has_value(), options.contexts.has_value(),
                                options.verify_width.has_value(), options.warmup.has_value(),
                                options.repetitions.has_value());
  } else if (options.seeds) {
    fail_usage("--seeds applies to --rounds");
  }
  bench::bench_options_validate(o);
  return o;
}

bench::BenchModel resolve_bench_model(const std::string& selector, const Config& config) {
  const model::Recipe* alias_recipe = model::find_recipe_by_alias(selector);
  ResolvedModel resolved;
  try {
    resolved = resolve_model(selector, config, assets_directory());
  } catch (const Error& e) {
    if (e.code() != ExitCode::fetch || !alias_recipe) throw;
    const bench::ShapeConfig* shape = bench::find_shape_config(*alias_recipe);
    if (!shape) {
      fail(ExitCode::fetch, "{}\nno benchmark shape is declared for recipe {} either (shapes: bench/configs/)", e.what(),
           alias_recipe->name);
    }
    bench::BenchModel m = bench::bench_model_of_shape(*shape);
    m.source = fmt::format("random weights of the {} config shape ({}@{} is not present)", shape->name,
                           alias_recipe->checkpoint.repository, alias_recipe->checkpoint.revision);
    m.page_size_tokens = alias_recipe->page_size_tokens;
    return m;
  }
  bench::BenchModel m;
  m.name = resolved.recipe->name;
  m.spec = model::model_spec_load(resolved.checkpoint_dir);
  m.checkpoint_dir = resolved.checkpoint_dir;
  m.source = fmt::format("checkpoint {}", resolved.description);
  m.page_size_tokens = resolved.recipe->page_size_tokens;
  return m;
}

int run_bench(const BenchCommandOptions& options) {
  const Config config = load_config(options.config);
  bench::BenchOptions bench_options = bench_options_from(options);
  if (!bench_options.kernel_cache) bench_options.kernel_cache = config.kernel_cache();
  const std::string selector =
      !options.model.empty() ? options.model : config.default_model.value_or(k_bench_default_model);
  const bench::BenchModel model = resolve_bench_model(selector, config);
  return bench::run_gpu_bench_and_report(model, bench_options);
}

void add_bench_command(CLI::App& app) {
  auto options = std::make_shared<BenchCommandOptions>();
  CLI::App* command = add_command(app, "bench", "Measure a model's prefill and decode steps, or complete speculative rounds, on one GPU",
                                  [options] { return run_bench(*options); });
  bench::BenchOptions& b = options->bench;
  command->add_option("MODEL", options->model,
                      "Recipe alias, checkpoint directory or org/name[@revision] (default: [defaults] model, then "
                      "llama-3.1-8b); an alias whose checkpoint is absent runs random weights of its shape");
  command->add_option("--gpus", options->gpus, "One GPU index (default 0), relative to CUDA_VISIBLE_DEVICES");
  command->add_option("--batches", options->batches, "Decode batch buckets (default 1,2,4,8,16,32,64)");
  command->add_option("--contexts", options->contexts, "Cached tokens per decode row (default 1024)");
  command->add_option("--prefill", b.prefill_tokens, "Prompt tokens of the prefill step; 0 skips it (default 2048)");
  command->add_option("--kv-dtype", options->kv_dtype, "KV page dtypes: bf16, fp8 or bf16,fp8 (default bf16)");
  command->add_option("--attention-batch", b.attention_batch, "Decode attention alone: rows (default 32)");
  command->add_option("--attention-context", b.attention_context,
                      "Decode attention alone: cached tokens per row; 0 skips it (default 8192)");
  command->add_option("--warmup", options->warmup, "Untimed runs before each measurement (default 3; rounds 5)");
  command->add_option("--repetitions", options->repetitions, "Timed runs per measurement (default 10; rounds 20)");
  command->add_flag("--rounds", b.rounds,
                    "Complete speculative rounds instead of steps: per batch, context and seed, the verify graph "
                    "of --verify-width tokens a row, every position sampled on the device, drafts accepted "
                    "(defaults then: --batches 1,2,4 --contexts 512,2048,8192,16384)");
  command->add_option("--verify-width", options->verify_width,
                      "Rounds: tokens a row verifies, the pending token and its drafts, 2 to 8 (default 8); steps: "
                      "also time a verify step of this width per bucket");
  command->add_option("--seeds", options->seeds, "Rounds: distinct input and sampling seeds (default 0,1,2)");
  command->add_option("--seed", b.seed, "Seed of random weights, KV pages and tokens (default 1)");
  command->add_flag_function("--no-breakdown", [options](std::int64_t) { options->bench.breakdown = false; },
                    "Skip the per-operation table of a decode step");
  command->add_option("--output", b.json_path, "JSON report (rewritten after each part; the table still prints)");
  command->add_flag_function(
      "--no-stream-gemm", [options](std::int64_t) { options->bench.backend.stream_gemm = false; },
      "Leave the sm_90 streaming GEMM out of the GEMM races (to measure what it brings)");
  command->add_option("--dependent-launch", options->dependent_launch,
                      "Programmatic dependent launch (sm_90+) for the kernels with early work (early-work, the "
                      "default), every kernel (all) or none (off)");
  command->add_flag("--gemm-race-log", b.backend.gemm_race_log, "Print each GEMM race's entrants and times on stderr");
  command->add_option("--config", options->config, "Configuration file (default ~/.config/flare/config.toml)");
}

}  // namespace flare::ignition
