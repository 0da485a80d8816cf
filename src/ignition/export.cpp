#include "ignition/export.h"

#include <algorithm>
#include <cstring>
#include <fstream>

#include "common/config.h"
#include "common/error.h"
#include "common/gpu.h"
#include "common/host_memory.h"
#include "common/sizes.h"
#include "common/terminal.h"
#include "engine/engine_options.h"
#include "ignition/config_template.h"
#include "ignition/draft_model.h"
#include "ignition/gpu_preparation.h"
#include "ignition/measured_steps.h"
#include "ignition/memory_plan.h"
#include "ignition/recipe_help.h"
#include "ignition/resolve.h"
#include "ignition/signing_identity.h"
#include "ignition/weight_reuse.h"
#include "helios/history.h"
#include "helios/serving_catalog.h"
#include "model/architecture.h"
#include "model/prepared_views.h"
#include "model/prepared_weights.h"
#include "model/spec.h"
#include "package/cache.h"
#include "package/crypto.h"
#include "package/executables.h"
#include "package/package.h"

#ifndef FLARE_ASSETS_DIR
#define FLARE_ASSETS_DIR "assets"
#endif

namespace flare::ignition {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

constexpr std::uint64_t kTensorAlignment = 64;
constexpr std::int32_t kMinTokensPerRequest = 8192;

// Frontend assets copied from the checkpoint into the package, when present.
const char* const kFrontendFiles[] = {"tokenizer.json", "tokenizer_config.json", "generation_config.json",
                                      "chat_template.jinja", "special_tokens_map.json"};

std::vector<std::uint32_t> concurrency_buckets(std::int32_t max_concurrency) {
  const std::vector<std::int32_t> buckets = helios::serving_decode_buckets(max_concurrency);
  return {buckets.begin(), buckets.end()};
}

// The safetensors name of a prepared tensor's dtype (prepared_views.cpp reads it back).
std::string dtype_text(helios::DType dtype) {
  switch (dtype) {
    case helios::DType::bf16: return "BF16";
    case helios::DType::f8_e4m3: return "F8_E4M3";
    case helios::DType::i32: return "I32";
    case helios::DType::u8: return "U8";
    default: return "F32";
  }
}

// Lays one group's tensors out in one payload (64-byte aligned) and records their views.
std::vector<std::byte> pack_group(const model::PreparedGroup& group, proto::Manifest& manifest) {
  std::vector<std::byte> bytes;
  for (const auto& tensor : group.tensors) {
    const std::uint64_t offset = (bytes.size() + kTensorAlignment - 1) / kTensorAlignment * kTensorAlignment;
    bytes.resize(offset);
    bytes.insert(bytes.end(), tensor.bytes.begin(), tensor.bytes.end());
    proto::TensorView* view = manifest.add_tensors();
    view->set_payload(group.payload_name);
    view->set_name(tensor.name);
    view->set_dtype(dtype_text(tensor.dtype));
    for (auto dim : tensor.shape) view->add_shape(dim);
    view->set_offset_bytes(offset);
    view->set_length_bytes(tensor.bytes.size());
  }
  return bytes;
}

std::vector<std::byte> read_file_bytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::vector<char> chars((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::byte> bytes(chars.size());
  std::memcpy(bytes.data(), chars.data(), chars.size());
  return bytes;
}

struct Phase {
  ProgressStage stage;
  Phase(const TerminalInfo& terminal, const std::string& name, std::optional<std::uint64_t> total = std::nullopt)
      : stage(terminal, stderr, name, total) {}
};

void set_sampling(const model::Recipe& recipe, proto::Manifest& manifest) {
  auto* defaults = manifest.mutable_sampling_defaults();
  defaults->set_temperature(recipe.sampling.temperature);
  defaults->set_top_p(recipe.sampling.top_p);
  defaults->set_top_k(recipe.sampling.top_k);
  defaults->set_min_p(recipe.sampling.min_p);
  defaults->set_repetition_penalty(recipe.sampling.repetition_penalty);
  auto add_range = [&](const char* name, double minimum, double maximum) {
    auto* range = manifest.add_sampling_ranges();
    range->set_parameter(name);
    range->set_minimum(minimum);
    range->set_maximum(maximum);
  };
  const auto& r = recipe.ranges;
  add_range("temperature", r.temperature_min, r.temperature_max);
  add_range("top_p", r.top_p_min, r.top_p_max);
  if (r.top_k_max > 0) add_range("top_k", 0, r.top_k_max);  // no range: any top_k up to the vocabulary
  add_range("min_p", 0, r.min_p_max);
  add_range("repetition_penalty", r.repetition_penalty_min, r.repetition_penalty_max);
}

// Flags > recipe. --no-mtp excludes the other speculation flags.
SpeculationSettings speculation_settings(const ExportOptions& options, const model::Recipe& recipe,
                                         const ModelSettings& file_settings) {
  if (options.no_mtp && (options.mtp_draft_tokens || options.speculative_token_capacity ||
                         options.no_mtp_adaptive_verification)) {
    fail_usage("--no-mtp excludes --mtp-draft-tokens, --speculative-token-capacity and --no-mtp-adaptive-verification");
  }
  SpeculationSettings s;
  s.max_draft_tokens = options.no_mtp ? 0 : options.mtp_draft_tokens.value_or(recipe.default_draft_tokens);
  if (s.max_draft_tokens < 0 || s.max_draft_tokens > engine::k_max_draft_tokens) {
    fail_usage("--mtp-draft-tokens must be from 0 to {}, got {}", engine::k_max_draft_tokens, s.max_draft_tokens);
  }
  s.adaptive_verification = !options.no_mtp_adaptive_verification;
  s.token_capacity = options.speculative_token_capacity
                         ? *options.speculative_token_capacity
                         : static_cast<std::int32_t>(file_settings.speculative_token_capacity.value_or(128));
  if (s.token_capacity < 1 || s.token_capacity > 65536) {
    fail_usage("--speculative-token-capacity must be from 1 to 65536, got {}", s.token_capacity);
  }
  return s;
}

}  // namespace

fs::path assets_directory() {
  // The source tree the programs were built from; a copied tree (binaries carried to another
  // machine) has them beside the binaries' folder or under the current folder.
  std::error_code ec;
  const fs::path built = FLARE_ASSETS_DIR;
  if (fs::is_directory(built, ec)) return built;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec)
    for (const fs::path& candidate : {exe.parent_path().parent_path() / "assets", exe.parent_path() / "assets"})
      if (fs::is_directory(candidate / "demo-model", ec)) return candidate;
  if (fs::is_directory(fs::path("assets") / "demo-model", ec)) return fs::absolute("assets", ec);
  return built;
}

int run_export(const ExportOptions& options) {
  const Clock::time_point started = Clock::now();
  const Config config = load_config(options.global.config);
  const TerminalInfo terminal = detect_terminal(stderr, options.global.plain);
  if (options.no_weights && options.reuse_weights) fail_usage("--no-weights and --reuse-weights cannot be combined");
  if (options.autotune_effort && *options.autotune_effort != "off" && *options.autotune_effort != "default" &&
      *options.autotune_effort != "audit")
    fail_usage("--autotune-effort must be off, default or audit");
  if (options.compile_workers && *options.compile_workers < 1) fail_usage("--compile-workers must be at least 1");

  // Resolve the model.
  const std::string selector = !options.model.empty() ? options.model : config.default_model.value_or("");
  HubOptions hub;
  hub.allow_download = true;
  hub.offline = options.offline;
  hub.token_file = options.token_file;
  hub.terminal = terminal;
  const ResolvedModel resolved = resolve_model(selector, config, assets_directory(), hub);
  const model::Recipe& recipe = *resolved.recipe;
  std::fprintf(stderr, "Model %s\n", resolved.description.c_str());

  // Select the backend.
  std::optional<std::vector<int>> gpus;
  if (options.gpus) gpus = parse_gpu_list(*options.gpus);
  const BackendSelection selection = select_backend(discover_gpus(), gpus, options.cpu);
  const bool on_gpu = !selection.cpu;
  if (on_gpu && selection.gpus.size() != 1)
    fail_usage("--gpus names {} GPUs, but {} is prepared for tensor parallel size 1 only; name one GPU",
               selection.gpus.size(), recipe.name);
  std::fprintf(stderr, "Select GPUs. %s\n", selection.summary.c_str());

  // Settings: flags > configuration > recipe.
  const ModelSettings file_settings = config.settings_for(resolved.served_names, options.max_concurrency.has_value());
  std::optional<std::int64_t> flag_concurrency;
  if (options.max_concurrency) flag_concurrency = *options.max_concurrency;
  const std::int64_t max_concurrency =
      resolve<std::int64_t>(flag_concurrency, file_settings.max_concurrency, recipe.default_max_concurrency);
  if (max_concurrency < 1 || max_concurrency > recipe.max_concurrency_limit)
    fail_usage("--max-concurrency must be from 1 to {} for {}", recipe.max_concurrency_limit, recipe.name);
  const std::int32_t prefill_chunk = options.prefill_chunk_size.value_or(recipe.prefill_chunk_tokens);
  if (prefill_chunk < 64 || prefill_chunk % 64 != 0 || prefill_chunk > 65536)
    fail_usage("--prefill-chunk-size must be a positive multiple of 64 (at most 65536), got {}", prefill_chunk);

  const model::ModelSpec spec = model::model_spec_load(resolved.checkpoint_dir);
  if (!fs::is_regular_file(resolved.checkpoint_dir / "tokenizer.json"))
    fail(ExitCode::preparation, "{} has no tokenizer.json; a package needs its tokenizer",
         resolved.checkpoint_dir.string());
  const std::int64_t context = recipe.context_ceiling ? std::min<std::int64_t>(*recipe.context_ceiling, spec.max_position_embeddings)
                                                      : spec.max_position_embeddings;
  const model::Architecture& architecture = model::architecture_of(spec);
  const SpeculationSettings speculation = speculation_settings(options, recipe, file_settings);
  std::optional<PreparedDraft> draft = resolve_draft(options.draft_model, options.no_mtp, recipe, config,
                                                     assets_directory(), resolved.checkpoint_dir, spec);
  // Draft pages share the target's page ids: a cached token holds both models' KV.
  // Sliding-window layers keep about a window of pages per request, in pools of their own.
  const std::vector<helios::HistorySpec> history = architecture.history(spec);
  const std::uint64_t kv_bytes_per_token =
      helios::history_token_bytes(history, helios::DType::bf16) + (draft ? draft->kv_bytes_per_token : 0);
  const std::uint64_t window_bytes = helios::history_window_pool_bytes(history, max_concurrency, prefill_chunk,
                                                                      recipe.page_size_tokens, helios::DType::bf16);
  std::fprintf(stderr, "Settings: max concurrency %lld, prefill chunk %d tokens, context %s tokens, KV pages of %d tokens (BF16)\n",
               static_cast<long long>(max_concurrency), prefill_chunk, format_count(static_cast<std::uint64_t>(context)).c_str(),
               recipe.page_size_tokens);

  // Memory plan, before any weight is read.
  MemoryDemand demand;
  demand.weight_bytes = architecture.weight_table(spec).prepared_bytes() + (draft ? draft->weight_bytes : 0);
  // The activations of the largest step (a prefill chunk beside a verify row per slot), as BF16,
  // for the target and (its forwards run one at a time, but keep their own arenas) the draft.
  const auto step_rows = static_cast<std::int32_t>(max_concurrency) + 1;
  const helios::ArenaCapacity largest_step{prefill_chunk + step_rows * (1 + speculation.max_draft_tokens), step_rows,
                                       step_rows * (1 + speculation.max_draft_tokens)};
  demand.scratch_bytes = model::arena_bytes(spec, helios::DType::bf16, largest_step) +
                         (draft ? model::arena_bytes(draft->spec, helios::DType::bf16, largest_step) : 0);
  demand.kv_bytes_per_token = kv_bytes_per_token;
  demand.window_bytes = window_bytes;
  demand.max_concurrency = static_cast<std::int32_t>(max_concurrency);
  demand.min_tokens_per_request = static_cast<std::int32_t>(std::min<std::int64_t>(kMinTokensPerRequest, context));
  MemorySupply supply{host_memory_bytes("MemAvailable"), kGiB, config.memory.reserve_bytes.value_or(0), "CPU memory"};
  if (on_gpu) {
    // Warm-up and capture headroom (spec: 1 GiB plus 128 KiB per prefill token above 4096).
    const std::uint64_t extra = prefill_chunk > 4096 ? std::uint64_t(prefill_chunk - 4096) * 128 * kKiB : 0;
    supply = {selection.gpus[0].free_bytes, kGiB + extra, config.memory.reserve_bytes.value_or(0),
              fmt::format("GPU {}", selection.gpus[0].visible_index)};
  }
  const MemoryPlan plan = plan_memory(demand, supply);
  if (options.verbose)
    std::fprintf(stderr, "  memory plan: needs %s (weights %s, scratch %s, minimum pages); has %s of %s after headroom and reserve\n",
                 format_bytes(plan.needed_bytes).c_str(), format_bytes(demand.weight_bytes).c_str(),
                 format_bytes(demand.scratch_bytes).c_str(), format_bytes(plan.available_bytes).c_str(),
                 supply.device.c_str());

  // Load weights: the prepared layout, one payload per layer.
  proto::Manifest manifest;
  package::ModelCache cache(options.model_cache ? *options.model_cache : config.package_cache());
  std::vector<std::pair<std::string, std::vector<std::byte>>> weight_payloads;
  std::vector<std::string> known_ids;  // each weight payload's SHA-256, hashed once (or signed, when reused)
  std::int32_t n_reused = 0;
  std::unique_ptr<GpuPreparation> gpu;
  if (on_gpu) {
    GpuPreparationOptions gpu_options;
    gpu_options.device_index = selection.gpus[0].visible_index;
    gpu_options.kernel_cache_dir = config.kernel_cache();
    if (config.paths.cuda) gpu_options.cuda_root = *config.paths.cuda;
    gpu_options.autotune_effort = options.autotune_effort.value_or("default");
    gpu_options.buckets = concurrency_buckets(static_cast<std::int32_t>(max_concurrency));
    gpu_options.prefill_chunk_tokens = prefill_chunk;
    gpu_options.page_size_tokens = recipe.page_size_tokens;
    if (speculation.max_draft_tokens > 0) {
      gpu_options.max_verify_tokens = 1 + speculation.max_draft_tokens;
      gpu_options.verify_token_capacity = speculation.token_capacity;
      gpu_options.verify_graph_budget = static_cast<std::int32_t>(file_settings.speculative_graph_budget.value_or(64));
    }
    if (draft) gpu_options.draft = draft->spec;
    gpu = std::make_unique<GpuPreparation>(spec, gpu_options);
  }
  {
    Phase phase(terminal, "Load weights",
                static_cast<std::uint64_t>(spec.n_layers + 1 + (draft ? draft->spec.n_layers + 1 : 0)));
    auto add_group = [&](model::PreparedGroup&& group) {
      weight_payloads.emplace_back(group.payload_name, pack_group(group, manifest));
      known_ids.push_back(package::sha256_hex(weight_payloads.back().second));
      const std::string& id = known_ids.back();
      std::error_code ec;
      const bool cached = fs::exists(cache.root() / "blobs" / (id + ".safetensors"), ec);
      if (cached) ++n_reused;
      if (options.verbose)
        std::fprintf(stderr, "  %-20s %10s  %zu tensors  sha256 %.16s%s\n", weight_payloads.back().first.c_str(),
                     format_bytes(weight_payloads.back().second.size()).c_str(), group.tensors.size(), id.c_str(),
                     cached ? "  (cached)" : "");
      phase.stage.advance(1);
    };
    if (options.reuse_weights) {
      std::ifstream in(resolved.checkpoint_dir / "config.json", std::ios::binary);
      const std::string config_json((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      ReusedWeights reused = reuse_cached_weights(cache, resolved.served_names.front(), resolved, config_json);
      for (auto& view : reused.views) *manifest.add_tensors() = std::move(view);
      for (auto& payload : reused.payloads) {
        weight_payloads.emplace_back(payload.name, std::move(payload.bytes));
        known_ids.push_back(payload.id);
        phase.stage.advance(1);
      }
      n_reused = static_cast<std::int32_t>(weight_payloads.size());
      std::fprintf(stderr, "  weights from %s (--reuse-weights; the checkpoint's tensors are not read)\n",
                   reused.source.c_str());
    } else {
      model::prepare_weights(spec, resolved.checkpoint_dir, add_group);
    }
    if (draft) prepare_draft_weights(*draft, add_group);
    if (options.no_weights && n_reused != static_cast<std::int32_t>(weight_payloads.size()))
      fail(ExitCode::preparation, "--no-weights: {} of {} weight payloads are not in the cache {}",
           weight_payloads.size() - n_reused, weight_payloads.size(), cache.root().string());
    if (gpu) {
      gpu->load_weights(model::lookup_from_views(
          manifest, [&](const std::string& payload) -> std::optional<std::span<const std::byte>> {
            for (const auto& [name, bytes] : weight_payloads)
              if (name == payload) return std::span<const std::byte>(bytes);
            return std::nullopt;
          }));
    }
    phase.stage.ok(fmt::format("{} payloads, {}, {} already cached{}", weight_payloads.size(),
                               format_bytes(demand.weight_bytes), n_reused,
                               gpu ? " (uploaded to " + gpu->device_name() + ")" : ""));
  }
  {
    Phase phase(terminal, "Tune kernels");
    if (gpu) {
      gpu->compile_catalog();  // every module the catalog lists, before any forward runs
      gpu->tune_gemms();
      phase.stage.ok(fmt::format("{} GEMM shapes timed ({} effort)", gpu->counts().n_tuned,
                                 options.autotune_effort.value_or("default")));
    } else {
      phase.stage.ok("0 kernels (the CPU backend runs fixed kernels)");
    }
  }
  {
    Phase phase(terminal, "Compile forwards");
    if (gpu) {
      gpu->compile_forwards();
      const GpuPreparationCounts& c = gpu->counts();
      phase.stage.ok(fmt::format("{} forwards; {} kernel modules in the catalog ({} compiled, {} from the kernel "
                                 "cache); {} GEMM shapes and {} fused-operation choices tuned in all",
                                 c.n_forwards, gpu->catalog().modules.size(), c.n_compiled, c.n_reused, c.n_shapes,
                                 c.n_fused));
    } else {
      phase.stage.ok("0 forwards (the CPU backend executes steps directly)");
    }
  }
  // The CPU shares its memory with everything else on the host: its pages are bounded by one
  // context per request slot rather than by all free memory.
  const std::int64_t kv_tokens = on_gpu ? plan.kv_tokens : std::min<std::int64_t>(plan.kv_tokens, max_concurrency * context);
  const std::int64_t n_pages = (kv_tokens + recipe.page_size_tokens - 1) / recipe.page_size_tokens;
  {
    Phase phase(terminal, "Allocate KV cache");
    phase.stage.ok(fmt::format("{} pages planned ({} tokens; sized again from free memory by flare run)",
                               format_count(static_cast<std::uint64_t>(n_pages)),
                               format_count(static_cast<std::uint64_t>(kv_tokens))));
  }
  const auto buckets = concurrency_buckets(static_cast<std::int32_t>(max_concurrency));
  std::vector<MeasuredStepTime> step_times;
  {
    Phase phase(terminal, "Capture graphs");
    if (gpu) {
      gpu->capture_graphs();
      // Verify rounds are timed against decode steps here, so adaptive verification starts from
      // this GPU's costs rather than a guess.
      if (gpu->counts().n_verify_graphs > 0) step_times = gpu->time_steps();
      phase.stage.ok(fmt::format("{} decode graphs, {} prefill-chunk graphs, {} verify graphs{}{}", gpu->counts().n_graphs,
                                 gpu->counts().n_prefill_graphs, gpu->counts().n_verify_graphs,
                                 draft ? fmt::format(", {} draft-model decode graphs", gpu->counts().n_draft_graphs) : "",
                                 measured_steps_summary(step_times)));
    } else {
      phase.stage.ok("0 graphs (CPU)");
    }
  }
  std::fprintf(stderr, "Graph catalog: %s; decode buckets %s; prefill chunk %d tokens; %s\n",
               gpu ? fmt::format("{} kernel modules, {} graphs", gpu->catalog().modules.size(),
                                 gpu->catalog().graphs.size()).c_str()
                   : "no kernels",
               fmt::format("{}", fmt::join(buckets, ", ")).c_str(), prefill_chunk,
               !gpu ? "no captured graphs on the CPU backend"
                    : gpu->counts().n_graphs > 0 ? "decode buckets and the prefill chunk captured at load"
                                                 : "steps run eagerly (no graphs captured)");

  // Manifest: identity, capacities, memory model, sampling.
  auto* identity = manifest.mutable_model();
  identity->set_canonical_name(resolved.served_names.front());
  for (const auto& alias : recipe.aliases) identity->add_aliases(alias);
  for (const auto& name : resolved.served_names) identity->add_served_names(name);
  identity->set_recipe(recipe.name);
  identity->set_checkpoint_repository(options.repo_id.value_or(resolved.repository));
  identity->set_checkpoint_revision(resolved.revision);
  identity->set_architecture(resolved.architecture);
  manifest.set_license(recipe.license);
  manifest.set_target(gpu ? gpu->arch() : "cpu");
  if (gpu) {
    manifest.set_kernel_compiler(gpu->compiler());
    manifest.set_kernel_catalog(helios::serving_catalog_serialize(gpu->catalog()));
  }
  manifest.set_kv_page_tokens(static_cast<std::uint32_t>(recipe.page_size_tokens));
  manifest.set_kv_cache_dtype("BF16");
  manifest.set_history_kinds(helios::history_kinds(architecture.history(spec)));
  manifest.set_serving_reserve_bytes(config.memory.reserve_bytes.value_or(0));
  {
    std::ifstream in(resolved.checkpoint_dir / "config.json", std::ios::binary);
    manifest.set_model_config_json(std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>()));
  }
  auto* deployment = manifest.add_deployments();
  deployment->set_tensor_parallel(1);
  auto* rank = deployment->add_ranks();
  rank->set_rank(0);
  rank->set_fixed_bytes(std::max<std::uint64_t>(demand.weight_bytes + demand.scratch_bytes,
                                                gpu ? gpu->device_bytes_in_use() : 0));
  rank->set_n_graphs(gpu ? static_cast<std::uint32_t>(gpu->counts().n_graphs) : 0);
  auto* capacities = deployment->mutable_capacities();
  for (auto bucket : buckets) capacities->add_concurrency_buckets(bucket);
  capacities->set_max_concurrency(static_cast<std::uint32_t>(max_concurrency));
  capacities->set_prefill_chunk_tokens(static_cast<std::uint32_t>(prefill_chunk));
  capacities->set_context_ceiling_tokens(static_cast<std::uint64_t>(context));
  auto* cost = manifest.mutable_memory_cost();
  cost->set_bytes_per_cached_token(kv_bytes_per_token);
  cost->set_live_state_bytes_per_request(window_bytes / static_cast<std::uint64_t>(std::max<std::int64_t>(max_concurrency, 1)));
  cost->set_graph_and_scratch_bytes(demand.scratch_bytes);
  set_sampling(recipe, manifest);
  record_speculation(manifest, speculation, draft);
  if (gpu) record_measured_steps(manifest, step_times, gpu->device_name());

  // Export package: sign and publish in the cache, selected as the default.
  SigningIdentity signer = load_signing_identity(config);
  manifest.set_publisher_namespace(signer.namespace_name);
  manifest.set_official_source(options.official_source.value_or(signer.official_source));
  package::EntryRef entry;
  {
    Phase phase(terminal, "Export package");
    package::PackageBuilder builder(manifest);
    for (std::size_t i = 0; i < weight_payloads.size(); ++i)
      builder.add_payload_with_id(weight_payloads[i].first, proto::PAYLOAD_ROLE_WEIGHT, known_ids[i],
                                  std::move(weight_payloads[i].second));
    std::size_t n_executables = 0;
    if (gpu) {
      const auto images = gpu->kernel_images();  // exactly the catalog's (it fails on a module beyond it)
      package::add_executables(builder, images, "kernels");
      n_executables = images.size();
      if (const std::string table = gpu->gemm_tuning_table(); !table.empty()) {
        package::add_executables(builder, {{std::string(package::kGemmTuningKey), table}}, "tuning");
        ++n_executables;
      }
    }
    std::int32_t n_frontend = 0;
    for (const char* file : kFrontendFiles) {
      const fs::path path = resolved.checkpoint_dir / file;
      std::error_code ec;
      if (!fs::is_regular_file(path, ec)) continue;
      builder.add_payload(std::string("frontend/") + file, proto::PAYLOAD_ROLE_FRONTEND, read_file_bytes(path));
      ++n_frontend;
    }
    entry = cache.publish_package(builder, signer.key, true);
    phase.stage.ok(fmt::format("{} weight + {} executable + {} frontend payloads, signed by {} ({})",
                               weight_payloads.size(), n_executables, n_frontend, signer.namespace_name,
                               signer.key.fingerprint().substr(0, 16)));
  }
  write_config_template_if_absent(config, options.global.config.has_value(), resolved, max_concurrency);
  std::fprintf(stderr, "Published %s as the default of %s in %s\n", entry.text().c_str(), entry.model_key.c_str(),
               format_elapsed(Clock::now() - started).c_str());
  std::printf("%s\n", cache.entry_path(entry).string().c_str());
  return 0;
}

void add_export_command(CLI::App& app, ExportOptions& options) {
  CLI::App* command = add_command(app, "export", "Prepare a model and publish a signed package in the model cache",
                                  [&options] { return run_export(options); });
  add_preparation_flags(*command, options);
}

void add_preparation_flags(CLI::App& app, ExportOptions& options) {
  CLI::App* command = &app;
  command->add_option("MODEL", options.model,
                      "Recipe alias, Hugging Face repository (org/name[@revision]) or checkpoint directory "
                      "(default: [defaults] model)");
  command->add_option("--gpus", options.gpus, "GPU indices (0, 0,1, 0-3), relative to CUDA_VISIBLE_DEVICES");
  command->add_flag("--cpu", options.cpu, "Prepare for the CPU backend even when a GPU is visible");
  command->add_option("--max-concurrency", options.max_concurrency,
                      "Maximum simultaneously active requests (default: configuration, else the recipe's)");
  command->add_option("--prefill-chunk-size", options.prefill_chunk_size,
                      "Most prompt tokens in one prefill step, a multiple of 64 (default: the recipe's)");
  command->add_option("--config", options.global.config, "Configuration file (default ~/.config/flare/config.toml)");
  command->add_option("--model-cache", options.model_cache, "Model cache directory (default [paths] package_cache)");
  command->add_option("--token-file", options.token_file,
                      "File holding a Hugging Face token, for gated or private repositories (default [hub] token_file)");
  command->add_flag("--offline", options.offline, "Resolve Hugging Face repositories from the hub cache alone; no network");
  command->add_flag("--verbose", options.verbose, "Per-phase detail on stderr");
  command->add_flag("--plain", options.global.plain, "No styling or animation");
  command->add_flag("--no-weights", options.no_weights, "Export only when the exact weight payloads are cached");
  command->add_flag("--reuse-weights", options.reuse_weights,
                    "Take the prepared weights from the model's cached default version (same checkpoint and layout)");
  command->add_option("--autotune-effort", options.autotune_effort, "Kernel search effort: off, default, audit");
  command->add_option("--compile-workers", options.compile_workers, "CPU compiler process budget per host");
  command->add_option("--repo-id", options.repo_id, "Hugging Face target recorded for the exported entry");
  command->add_option("--official-source", options.official_source,
                      "Published repository URL under the configured publisher namespace");
  command->add_option("--draft-model", options.draft_model,
                      "Learned draft model for speculative decoding: a checkpoint directory or ORG/NAME[@REVISION] "
                      "in the hub cache (same tokenizer as the target; default: the recipe's, if any)");
  command->add_option("--mtp-draft-tokens", options.mtp_draft_tokens,
                      "Most draft tokens verified in one round, 0-15 (default: the recipe's, 5)");
  command->add_flag("--no-mtp", options.no_mtp, "No speculation: no draft model, one token per step");
  command->add_option("--speculative-token-capacity", options.speculative_token_capacity,
                      "Most target tokens of verify rows in one step (default 128)");
  command->add_flag("--no-mtp-adaptive-verification", options.no_mtp_adaptive_verification,
                    "Verify a fixed number of drafts every round instead of adapting to measured acceptance");
  // Help after MODEL shows that recipe's declarations; otherwise every recipe's summary.
  // (Help is answered before parsing: main() sets options.model from `COMMAND MODEL --help`.)
  command->footer([&options] {
    const std::string one = options.model.empty() ? "" : recipe_help(options.model);
    return one.empty() ? recipes_help() : one;
  });
}

}  // namespace flare::ignition
