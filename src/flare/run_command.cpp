#include "flare/run_command.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <fstream>
#include <map>

#include <CLI/CLI.hpp>

#include "common/capacity.h"
#include "common/cli.h"
#include "common/config.h"
#include "common/error.h"
#include "common/gpu.h"
#include "common/host_memory.h"
#include "common/sizes.h"
#include "common/terminal.h"
#include "engine/engine.h"
#include "engine/model_runner.h"
#include "flare/dashboard.h"
#include "flare/download_command.h"
#include "flare/gpu_runtime.h"
#include "flare/inspect_view.h"
#include "flare/kv_groups.h"
#include "flare/kv_sizing.h"
#include "flare/package_selection.h"
#include "helios/cpu/cpu_backend.h"
#include "helios/kv_backing.h"
#include "model/kernel_needs.h"
#include "model/model.h"
#include "model/prepared_views.h"
#include "model/prepared_weights.h"
#include "package/crypto.h"
#include "package/package.h"
#include "package/trust.h"
#include "server/connection_limits.h"
#include "server/router.h"
#include "server/server.h"
#include "server/text_frontend.h"

namespace flare::cli {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

constexpr std::uint64_t kHostHeadroomBytes = 512 * kMiB;
constexpr std::uint64_t kGpuHeadroomBytes = kGiB;  // driver, cuBLASLt workspace, sampling scratch

// Payload name -> id, for the prepared tensor views and frontend assets.
std::map<std::string, std::string> payload_ids_by_name(const package::Package& pkg) {
  std::map<std::string, std::string> ids;
  for (const auto& payload : pkg.manifest().payloads()) ids.emplace(payload.name(), payload.id());
  return ids;
}

std::string frontend_asset(const package::Package& pkg, const std::map<std::string, std::string>& ids,
                           const std::string& file) {
  const auto it = ids.find("frontend/" + file);
  if (it == ids.end()) return "";
  const auto bytes = pkg.payload_bytes(it->second);
  return std::string(reinterpret_cast<const char*>(bytes.data()), bytes.size());
}

// Hashes the frontend payloads (always) or every payload (--verify-weights).
void verify_stored_data(const package::Package& pkg, bool all, ProgressStage& stage) {
  if (all) {
    pkg.verify_payloads([&](std::uint64_t n) { stage.advance(n); });
    return;
  }
  for (const auto& payload : pkg.manifest().payloads()) {
    if (payload.role() != proto::PAYLOAD_ROLE_FRONTEND) continue;
    const auto bytes = pkg.payload_bytes(payload.id());
    if (package::sha256_hex(bytes) != payload.id())
      fail_input("package {}: stored data of payload {} does not match its signed hash", pkg.directory().string(),
                 payload.name());
    stage.advance(bytes.size());
  }
}

std::uint64_t frontend_bytes(const package::Package& pkg) {
  std::uint64_t total = 0;
  for (const auto& payload : pkg.manifest().payloads())
    if (payload.role() == proto::PAYLOAD_ROLE_FRONTEND) total += payload.length_bytes();
  return total;
}

std::string read_api_key_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail_usage("cannot read --api-key-file {}", path.string());
  std::string key((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  while (!key.empty() && (key.back() == '\n' || key.back() == '\r' || key.back() == ' ')) key.pop_back();
  if (key.size() > 4096) fail_usage("--api-key-file {} is larger than 4 KiB", path.string());
  return key;
}

// What a run serves: the package's decode buckets up to the first that holds `concurrency`, its
// prefill chunk and page size, over BF16 pages (what its kernel catalog is enumerated for), and
// when speculating the verify rows' widths, token capacity and graph budget (its verify graphs).
model::ServingSettings serving_settings(const proto::Capacities& capacities, std::int64_t page_tokens,
                                        std::int64_t concurrency, const RunSpeculation& speculation) {
  model::ServingSettings serving;
  for (auto bucket : capacities.concurrency_buckets()) {
    if (serving.decode_buckets.empty() || serving.decode_buckets.back() < concurrency)
      serving.decode_buckets.push_back(static_cast<std::int32_t>(bucket));
  }
  serving.prefill_chunk_tokens = static_cast<std::int32_t>(capacities.prefill_chunk_tokens());
  serving.page_size_tokens = static_cast<std::int32_t>(page_tokens);
  serving.kv_dtypes = {helios::DType::bf16};
  if (speculation.max_draft_tokens > 0) {
    serving.max_verify_tokens = 1 + speculation.max_draft_tokens;
    serving.verify_token_capacity = speculation.token_capacity;
    serving.verify_graph_budget = speculation.graph_budget;
  }
  return serving;
}

void print_banner(const TerminalInfo& terminal) {
  if (!terminal.styled) return;
  std::fprintf(stderr, "%s\n", paint(terminal, style::bold, paint(terminal, style::cyan, "  \u2726 flare")).c_str());
}

// The dashboard's fixed lines: the model, the listener, the backend, the pool and the weight
// bytes a step reads (what weight bandwidth is counted from).
DashboardInfo dashboard_info(const package::Package& pkg, const server::ModelInfo& info,
                             const server::ServerOptions& listener, std::uint16_t port, const GpuRuntime* gpu,
                             std::int32_t cpu_threads, const engine::EngineOptions& engine_options) {
  DashboardInfo d;
  d.model = info.primary_name();
  const std::string host = listener.host.find(':') != std::string::npos ? "[" + listener.host + "]" : listener.host;
  d.url = fmt::format("http://{}:{}", host, port);
  d.backend = gpu ? gpu->device_label() : fmt::format("CPU backend, {} threads", cpu_threads);
  d.max_concurrency = engine_options.max_concurrency;
  d.n_kv_pages = engine_options.n_pages;
  d.page_tokens = engine_options.page_size_tokens;
  d.speculation = engine_options.speculates();
  if (const auto weights = package_weight_summary(pkg)) d.decode_weight_bytes = weights->decode_weight_bytes;
  if (gpu && gpu->gpu_info().peak_memory_bytes_per_s > 0) d.device_bandwidth_bytes_per_s = gpu->gpu_info().peak_memory_bytes_per_s;
  return d;
}

// Samples for the dashboard thread: the server's counters and the engine's stats (both
// thread-safe), and memory: the GPU's through NVML (no CUDA context on this thread; NVML is opened
// for each reading, so once every five seconds), or this process's resident memory on the CPU
// backend, once a second.
Dashboard::Sampler dashboard_sampler(server::Server& http, const engine::LocalEngine& engine, const GpuRuntime* gpu) {
  struct MemoryProbe {
    std::string uuid;
    DashboardClock::time_point last{};
    std::optional<DeviceMemoryUse> value;
  };
  auto probe = std::make_shared<MemoryProbe>();
  if (gpu) probe->uuid = gpu->gpu_info().uuid;
  return [&http, &engine, probe] {
    DashboardSample sample;
    sample.at = DashboardClock::now();
    sample.metrics = http.metrics().snapshot();
    sample.engine = engine.stats();
    sample.n_steps = engine.counters().n_steps;
    if (sample.at - probe->last >= std::chrono::seconds(probe->uuid.empty() ? 1 : 5)) {
      probe->last = sample.at;
      if (probe->uuid.empty()) {
        probe->value = DeviceMemoryUse{process_resident_bytes(), 0, true};
      } else {
        for (const auto& g : discover_gpus().gpus)
          if (g.uuid == probe->uuid) probe->value = DeviceMemoryUse{g.total_bytes - g.free_bytes, g.total_bytes, false};
      }
    }
    sample.memory = probe->value;
    return sample;
  };
}

}  // namespace

int run_serve(const PackageCommandGlobals& globals, const RunOptions& options) {
  const Clock::time_point started = Clock::now();
  const Config config = load_config(globals.config);
  const TerminalInfo terminal = detect_terminal(stderr, globals.plain);
  if (options.kv_cache_limit != "memory" && options.kv_cache_limit != "context" &&
      options.kv_cache_limit != "concurrency")
    fail_usage("--kv-cache-limit must be memory, context or concurrency");
  if (options.memory_limit) parse_memory_limit(*options.memory_limit);  // validate before any work
  const engine::SchedulerPolicy policy = engine::scheduler_policy_parse(options.scheduler_policy);
  for (const auto& value : {options.scheduler_terminal_value, options.scheduler_terminal_age_price})
    if (value && !(std::isfinite(*value) && *value >= 0))
      fail_usage("--scheduler-terminal-value and --scheduler-terminal-age-price must be finite and nonnegative");
  if (options.approve_key.has_value() != options.accept_publisher.has_value())
    fail_usage("--dangerously-approve-key and --dangerously-accept-publisher must be given together");
  if (options.served_model_name && options.served_model_name->find_first_not_of(" \t") == std::string::npos)
    fail_usage("--served-model-name must not be blank");
  print_banner(terminal);

  package::ModelCache cache(globals.model_cache ? *globals.model_cache : config.package_cache());
  SelectedPackage selected = select_or_download(options.target, options.download, config, cache, terminal);

  // Verify package: signature and publisher trust.
  std::unique_ptr<package::Package> pkg;
  {
    ProgressStage stage(terminal, stderr, "Verify package");
    pkg = package::Package::open(selected.path);
    package::TrustOptions trust;
    trust.publisher_keys = options.publisher_keys;
    trust.trust_store = options.trust_store;
    trust.development_profile = package::home_directory_profile();
    trust.approve_key = options.approve_key;
    trust.accept_publisher = options.accept_publisher;
    const package::SignerResolution signer = package::resolve_signer(*pkg, trust);
    stage.ok(fmt::format("{} signed by {}", pkg->manifest().model().canonical_name(), pkg->manifest().publisher_namespace()));
    package::ensure_accepted(*pkg, signer, trust, isatty(STDIN_FILENO) && isatty(STDERR_FILENO), stdin, stderr);
  }
  const proto::Manifest& manifest = pkg->manifest();
  {
    ProgressStage stage(terminal, stderr, "Verify stored data",
                        options.verify_weights ? pkg->distinct_payload_bytes() : frontend_bytes(*pkg));
    pkg->check_layout();
    verify_stored_data(*pkg, options.verify_weights, stage);
    stage.ok(options.verify_weights ? "every payload" : "frontend payloads and layout");
  }

  const bool on_gpu = manifest.target() != "cpu";
  if (!on_gpu && options.gpus) fail_usage("--gpus: package {} was prepared for the CPU backend", selected.path.string());
  if (manifest.deployments_size() != 1) fail_input("package {} has {} deployments; expected one", selected.path.string(),
                                                   manifest.deployments_size());
  const proto::Capacities& capacities = manifest.deployments(0).capacities();

  // Concurrency: flag > configuration > package, within the prepared buckets.
  std::vector<std::string> names(manifest.model().served_names().begin(), manifest.model().served_names().end());
  names.push_back(manifest.model().canonical_name());
  for (const auto& alias : manifest.model().aliases()) names.push_back(alias);
  const ModelSettings settings = config.settings_for(names, options.max_concurrency.has_value());
  std::optional<std::int64_t> flag_concurrency;
  if (options.max_concurrency) flag_concurrency = *options.max_concurrency;
  const std::int64_t concurrency =
      resolve<std::int64_t>(flag_concurrency, settings.max_concurrency, capacities.max_concurrency());
  if (concurrency < 1 || concurrency > static_cast<std::int64_t>(capacities.max_concurrency()))
    fail_usage("--max-concurrency {} exceeds the package's prepared capacity of {}; export again with a larger "
               "--max-concurrency",
               concurrency, capacities.max_concurrency());

  const model::ModelSpec spec = model::model_spec_parse(manifest.model_config_json(), "package model configuration");
  const RunSpeculation speculation = run_speculation(manifest, options.speculation, settings.speculative_graph_budget);
  const std::int64_t page_tokens = manifest.kv_page_tokens() ? manifest.kv_page_tokens() : 16;
  const model::ServingSettings serving = serving_settings(capacities, page_tokens, concurrency, speculation);
  // A learned draft runs on the target's backend: its kernels are part of the run's catalog.
  std::optional<model::ModelSpec> draft_spec;
  if (speculation.learned_drafts) {
    draft_spec = model::model_spec_parse(manifest.speculation().draft_model_config_json(), "package draft model configuration");
  }

  // Target and GPUs: a CPU package runs on the CPU backend; an sm_NN package on a GPU of that
  // architecture, from its own kernels, which must hold the whole kernel catalog of this run on
  // this GPU: a package lacking a module is refused here, before any weight loads.
  std::unique_ptr<GpuRuntime> gpu;
  std::uint64_t gpu_free_before_load = 0;
  if (on_gpu) {
    std::optional<std::vector<int>> gpus;
    if (options.gpus) gpus = parse_gpu_list(*options.gpus);
    gpu = std::make_unique<GpuRuntime>(*pkg, gpus, model::kernel_needs(spec, serving, draft_spec ? &*draft_spec : nullptr), config.kernel_cache(),
                                       config.paths.cuda.value_or(std::filesystem::path("/usr/local/cuda")));
    gpu_free_before_load = gpu->memory().free_bytes;
  }

  // Load weights.
  std::unique_ptr<helios::Backend> backend;
  std::int32_t cpu_threads = 0;
  if (gpu) {
    backend = gpu->take_backend();
  } else {
    auto cpu = std::make_unique<helios::cpu::CpuBackend>();
    cpu_threads = cpu->n_threads();
    backend = std::move(cpu);
  }
  std::unique_ptr<model::Model> loaded;
  std::unique_ptr<model::Model> draft;
  {
    std::uint64_t weight_bytes = 0;
    for (const auto& view : manifest.tensors()) weight_bytes += view.length_bytes();
    ProgressStage stage(terminal, stderr, "Load weights", weight_bytes);
    const auto ids = payload_ids_by_name(*pkg);
    const model::PreparedLookup lookup = model::lookup_from_views(
        manifest,
        [&](const std::string& payload) -> std::optional<std::span<const std::byte>> {
          const auto id = ids.find(payload);
          if (id == ids.end()) return std::nullopt;
          return pkg->payload_bytes(id->second);
        },
        [&](std::uint64_t n) { stage.advance(n); });
    model::LoadedWeights weights = model::weights_from_prepared(spec, lookup, *backend);
    loaded = std::make_unique<model::Model>(spec, *backend, std::move(weights));
    if (speculation.learned_drafts) draft = load_draft_model(manifest, lookup, *backend);
    stage.ok(fmt::format("{} tensors, {}{}", manifest.tensors_size(), format_bytes(weight_bytes),
                         draft ? " (with the draft model " + manifest.speculation().draft_source() + ")" : ""));
  }
  {
    ProgressStage stage(terminal, stderr, "Load kernels");
    if (gpu) {
      const std::size_t n_modules = gpu->load_kernels();
      stage.ok(fmt::format("{} kernel modules (the run's whole catalog) and {} tuned GEMM shapes from the package; {} "
                           "compiled, {} tuned ({})",
                           n_modules, gpu->n_tuned_shapes(), gpu->n_compiled(), gpu->n_tuned(), gpu->device_label()));
    } else {
      stage.ok(fmt::format("0 compiled, 0 tuned (CPU backend, {} threads)", cpu_threads));
    }
  }

  // Allocate caches.
  std::unique_ptr<engine::ModelStepRunner> runner;
  const std::int64_t context = static_cast<std::int64_t>(capacities.context_ceiling_tokens());
  engine::EngineOptions engine_options;
  KvSizing kv;
  {
    ProgressStage stage(terminal, stderr, "Allocate caches");
    // Sliding-window layers keep about a window of pages per request (kv_groups.h): their pools
    // are set aside first and the context-long pages are sized from what is left.
    const WindowPools windows = window_pools(*loaded, concurrency, capacities.prefill_chunk_tokens(), page_tokens);
    const std::uint64_t bytes_per_token =
        windows.full_bytes_per_token + manifest.speculation().draft_bytes_per_cached_token();
    std::uint64_t fixed = manifest.memory_cost().graph_and_scratch_bytes() + windows.bytes;
    for (const auto& view : manifest.tensors()) fixed += view.length_bytes();
    KvMemory memory = host_kv_memory(kHostHeadroomBytes);
    // The device sampler's scratch for the largest batch, before the free memory the pool is
    // sized from is measured (the package's scratch estimate does not count it).
    backend->reserve_sampling(static_cast<std::int32_t>(concurrency), spec.vocab_size);
    if (gpu) {
      const GpuDeviceMemory now = gpu->memory();
      memory = {true, now.free_bytes, now.total_bytes,
                gpu_free_before_load > now.free_bytes ? gpu_free_before_load - now.free_bytes : 0, kGpuHeadroomBytes,
                manifest.serving_reserve_bytes()};
      // Scratch for the largest step is allocated on the first step; keep it out of the pages.
      memory.held += manifest.memory_cost().graph_and_scratch_bytes();
      memory.available -= std::min(memory.available, manifest.memory_cost().graph_and_scratch_bytes());
      memory.held += windows.bytes;
      memory.available -= std::min(memory.available, windows.bytes);
    }
    KvRequest request{options.memory_limit, options.kv_cache_limit, config.memory.reserve_bytes};
    kv = size_kv_cache(request, memory, fixed, bytes_per_token, context, concurrency, page_tokens);
    engine_options.max_concurrency = static_cast<std::int32_t>(concurrency);
    engine_options.prefill_chunk_tokens = static_cast<std::int32_t>(capacities.prefill_chunk_tokens());
    engine_options.page_size_tokens = static_cast<std::int32_t>(page_tokens);
    engine_options.n_pages = static_cast<std::int32_t>(std::min<std::int64_t>(kv.n_pages, 1 << 30));
    engine_options.kv_groups = kv_groups(windows, engine_options.n_pages);
    engine_options.context_limit = static_cast<std::int32_t>(context);
    engine_options.scheduler_policy = policy;
    if (options.scheduler_terminal_value) engine_options.terminal_value = *options.scheduler_terminal_value;
    if (options.scheduler_terminal_age_price) engine_options.terminal_age_price = *options.scheduler_terminal_age_price;
    apply_speculation(speculation, engine_options);
    // The pool's pages are reserved whole; device memory backs a first chunk now, more as it fills.
    try {
      runner = std::make_unique<engine::ModelStepRunner>(std::move(backend), std::move(loaded), engine_options,
                                                         helios::DType::bf16);
      if (draft) runner->attach_draft(std::move(draft));
    } catch (const Error& e) {
      if (!gpu || (e.code() != ExitCode::failure && e.code() != ExitCode::capacity)) throw;
      // The device refused the planned pool (another process took memory since it was measured).
      fail(ExitCode::capacity, "cannot allocate {} KV tokens on {}: {}\nOptions: a lower --max-concurrency, "
           "--kv-cache-limit context, or a reserve (--memory-limit -8G)", format_count(static_cast<std::uint64_t>(kv.tokens)),
           gpu->device_label(), e.what());
    }
    const helios::HistoryCaches& cache = runner->kv_cache();
    std::size_t backed = 0;
    for (const helios::KvCache& group : cache.groups) backed += helios::kv_backed_bytes(group);
    stage.ok(fmt::format("{} KV tokens reserved in {} pages ({}), {} backed{}",
                         format_count(static_cast<std::uint64_t>(kv.tokens)),
                         format_count(static_cast<std::uint64_t>(kv.n_pages)), format_bytes(cache.size_bytes()),
                         format_bytes(backed), window_pools_text(windows)));
  }

  // Frontend assets.
  const auto ids = payload_ids_by_name(*pkg);
  server::TextFrontendAssets assets;
  assets.tokenizer_json = frontend_asset(*pkg, ids, "tokenizer.json");
  assets.tokenizer_config_json = frontend_asset(*pkg, ids, "tokenizer_config.json");
  assets.chat_template = frontend_asset(*pkg, ids, "chat_template.jinja");
  assets.generation_config_json = frontend_asset(*pkg, ids, "generation_config.json");
  assets.architecture = manifest.model().architecture();
  const std::unique_ptr<server::Frontend> frontend = server::make_text_frontend(assets);
  for (auto id : server::eos_token_ids(assets, *frontend)) engine_options.eos_token_ids.push_back(id);

  {
    // After the pool: a decode graph records the KV cache's address.
    ProgressStage stage(terminal, stderr, "Build graphs");
    const std::int32_t n_graphs = runner->capture_graphs(serving.decode_buckets);
    const model::Model& model = runner->model();
    stage.ok(gpu ? fmt::format("{} decode graphs (batch buckets {}), {} prefill-chunk graphs and {} verify graphs, "
                               "{} operations",
                               n_graphs, fmt::join(runner->graph_buckets(), ", "), model.n_prefill_graphs(),
                               model.n_verify_graphs(), model.n_decode_graph_nodes() + model.n_prefill_graph_nodes())
                 : "0 graphs (CPU)");
  }
  engine::LocalEngine engine(engine_options, std::move(runner));

  // Start HTTP.
  server::ModelInfo info;
  info.canonical_id = manifest.model().canonical_name();
  if (options.served_model_name) info.served_names = {*options.served_model_name};
  else info.served_names.assign(manifest.model().served_names().begin(), manifest.model().served_names().end());
  info.max_context_tokens = static_cast<std::int32_t>(context);
  info.max_concurrency = static_cast<std::int32_t>(concurrency);
  info.eos_token_ids.assign(engine_options.eos_token_ids.begin(), engine_options.eos_token_ids.end());
  const auto& defaults = manifest.sampling_defaults();
  if (defaults.has_temperature()) info.sampling_defaults.temperature = static_cast<float>(defaults.temperature());
  if (defaults.has_top_p()) info.sampling_defaults.top_p = static_cast<float>(defaults.top_p());
  if (defaults.has_top_k()) info.sampling_defaults.top_k = defaults.top_k();
  if (defaults.has_min_p()) info.sampling_defaults.min_p = static_cast<float>(defaults.min_p());
  if (defaults.has_repetition_penalty())
    info.sampling_defaults.repetition_penalty = static_cast<float>(defaults.repetition_penalty());
  for (const auto& range : manifest.sampling_ranges()) {
    if (range.parameter() == "temperature") info.sampling_ranges.temperature_max = static_cast<float>(range.maximum());
    if (range.parameter() == "top_k" && range.maximum() < 1e8) info.sampling_ranges.top_k_max = static_cast<std::int32_t>(range.maximum());
  }
  info.sampling_ranges.n_max = static_cast<std::int32_t>(concurrency);

  server::ServerOptions server_options;
  server_options.host = options.host.value_or(config.server.host.value_or("127.0.0.1"));
  server_options.port = static_cast<std::uint16_t>(options.port.value_or(config.server.port.value_or(8000)));
  if (options.port && (*options.port < 0 || *options.port > 65535)) fail_usage("--port must be from 0 to 65535");
  server_options.api_key = options.api_key_file ? read_api_key_file(*options.api_key_file) : config.server.api_key.value_or("");
  server_options.limits = server::derive_limits(info, server::raise_open_file_limit());
  std::atomic<Dashboard*> live_dashboard{nullptr};
  server_options.on_stopping = [&live_dashboard] {
    if (Dashboard* dashboard = live_dashboard.load()) dashboard->set_status("Stopping: draining active requests");
  };
  server::Server http(server_options, engine, *frontend, info);
  {
    ProgressStage stage(terminal, stderr, "Start HTTP");
    http.bind();
    stage.ok(fmt::format("http://{}:{}", server_options.host.find(':') != std::string::npos ? "[" + server_options.host + "]"
                                                                                          : server_options.host,
                         http.port()));
  }
  std::fprintf(stderr,
               "Serving %s as %s: policy %s, concurrency %lld, speculation %s, context %s tokens, KV %s tokens "
               "(limited by %s), memory limit %s; ready in %s\n",
               info.canonical_id.c_str(), fmt::format("{}", fmt::join(info.served_names, ", ")).c_str(),
               engine::scheduler_policy_name(policy), static_cast<long long>(concurrency), speculation.summary.c_str(),
               format_count(static_cast<std::uint64_t>(context)).c_str(),
               format_count(static_cast<std::uint64_t>(kv.tokens)).c_str(), kv.limited_by.c_str(),
               options.memory_limit.value_or("none").c_str(), format_elapsed(Clock::now() - started).c_str());
  std::fflush(stderr);
  {
    Dashboard dashboard(terminal, stderr,
                        dashboard_info(*pkg, info, server_options, http.port(), gpu.get(), cpu_threads, engine_options),
                        dashboard_sampler(http, engine, gpu.get()));
    live_dashboard = &dashboard;
    http.run();
    live_dashboard = nullptr;
  }  // the terminal is restored here, after the drain
  if (gpu)
    std::fprintf(stderr, "Stopped. While serving: %lld kernels compiled, %lld GEMM shapes tuned.\n",
                 static_cast<long long>(gpu->n_compiled()), static_cast<long long>(gpu->n_tuned()));
  else
    std::fprintf(stderr, "Stopped.\n");
  return 0;
}

void add_run_command(CLI::App& app, PackageCommandGlobals& globals, RunOptions& options) {
  CLI::App* command = add_command(app, "run", "Serve a prepared package over HTTP",
                                  [&globals, &options] { return run_serve(globals, options); });
  command->add_option("PACKAGE", options.target, "Package path, or MODEL[@VERSION] in the model cache");
  command->add_option("--publisher-keys", options.publisher_keys, "Additional publisher verification profiles (JSON)");
  command->add_option("--dangerously-approve-key", options.approve_key,
                      "Approve this full lowercase SHA-256 key fingerprint (with --dangerously-accept-publisher)");
  command->add_option("--dangerously-accept-publisher", options.accept_publisher,
                      "Accept this exact publisher namespace (with --dangerously-approve-key)");
  command->add_option("--trust-store", options.trust_store, "Trust store (default ~/.config/flare/trust.toml)");
  command->add_flag("--verify-weights", options.verify_weights, "Hash every stored payload before loading");
  command->add_option("--gpus", options.gpus, "GPUs in rank order (indices follow CUDA_VISIBLE_DEVICES)");
  add_download_flags(*command, options.download);
  command->add_option("--host", options.host, "Listener IP address, IPv4 or IPv6 (default [server] host, else 127.0.0.1)");
  command->add_option("--port", options.port, "Listener port (default [server] port, else 8000)");
  command->add_option("--served-model-name", options.served_model_name, "Replace the package's serving aliases");
  command->add_option("--api-key-file", options.api_key_file, "File holding the API key; an empty file disables auth");
  command->add_option("--max-concurrency", options.max_concurrency, "Reduce concurrency within the prepared capacity");
  command->add_option("--kv-cache-limit", options.kv_cache_limit, "Bound KV history: memory, context or concurrency");
  command->add_option("--memory-limit", options.memory_limit,
                      "Occupied size (30G), free-memory reserve (-30G) or fraction of total memory (0.8)");
  command->add_option("--scheduler-policy", options.scheduler_policy, "balanced (default) or throughput");
  command->add_option("--scheduler-terminal-value", options.scheduler_terminal_value,
                      "Terminal-retirement value in prompt-token units (default 256)");
  command->add_option("--scheduler-terminal-age-price", options.scheduler_terminal_age_price,
                      "Terminal age price in value/ms\u00b2 (default 1)");
  command->add_option("--mtp-draft-tokens", options.speculation.mtp_draft_tokens,
                      "Most draft tokens per round, within the package's (0: ordinary decoding)");
  command->add_flag_callback("--history-drafts", [&options] { options.speculation.history_drafts = true; },
                             "Draft from each request's own prompt and output (n-gram lookup)");
  command->add_flag_callback("--no-history-drafts", [&options] { options.speculation.history_drafts = false; },
                             "No history drafts (the default)");
  command->add_flag_callback("--mtp-adaptive-verification",
                             [&options] { options.speculation.adaptive_verification = true; },
                             "Pick each round's draft count from measured acceptance (package default)");
  command->add_flag_callback("--no-mtp-adaptive-verification",
                             [&options] { options.speculation.adaptive_verification = false; },
                             "Verify the full draft count every round");
  command->add_option("--config", globals.config, "Configuration file (default ~/.config/flare/config.toml)");
  command->add_option("--model-cache", globals.model_cache, "Model cache directory (default [paths] package_cache)");
  command->add_flag("--plain", globals.plain, "No styling, animation or live dashboard (plain metrics lines instead)");
}

}  // namespace flare::cli
