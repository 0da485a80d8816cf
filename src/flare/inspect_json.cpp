// JSON form of `flare inspect`: the summary object, plus "memory_map", "graphs", "frontend"
// and, with --all, "package" and "contract" (the complete signed manifest as Protobuf JSON).
// Byte counts stay exact integers; absent optional values are null; explicit zeroes are kept.
#include <google/protobuf/util/json_util.h>

#include <nlohmann/json.hpp>

#include "flare/inspect_view.h"
#include "flare/package_catalog.h"

namespace flare::cli {
namespace {

using nlohmann::json;

json optional_number(bool present, double value) { return present ? json(value) : json(nullptr); }

json sampling_json(const proto::Manifest& m) {
  const auto& s = m.sampling_defaults();
  json ranges = json::array();
  for (const auto& r : m.sampling_ranges()) {
    ranges.push_back({{"parameter", r.parameter()}, {"minimum", r.minimum()}, {"maximum", r.maximum()}});
  }
  return {{"defaults",
           {{"temperature", optional_number(s.has_temperature(), s.temperature())},
            {"top_p", optional_number(s.has_top_p(), s.top_p())},
            {"top_k", s.has_top_k() ? json(s.top_k()) : json(nullptr)},
            {"min_p", optional_number(s.has_min_p(), s.min_p())},
            {"repetition_penalty", optional_number(s.has_repetition_penalty(), s.repetition_penalty())}}},
          {"ranges", ranges}};
}

json deployments_json(const package::Package& package, const InspectView& view) {
  json deployments = json::array();
  for (const auto* d : selected_deployments(package, view)) {
    json ranks = json::array();
    for (const auto& r : d->ranks()) {
      if (rank_selected(r, view)) ranks.push_back({{"rank", r.rank()}, {"fixed_bytes", r.fixed_bytes()}, {"graphs", r.n_graphs()}});
    }
    const auto& c = d->capacities();
    deployments.push_back({{"tensor_parallel", d->tensor_parallel()},
                           {"rank_count", ranks.size()},
                           {"ranks", ranks},
                           {"max_concurrency", c.max_concurrency()},
                           {"concurrency_buckets", json(std::vector<std::uint32_t>(c.concurrency_buckets().begin(),
                                                                                   c.concurrency_buckets().end()))},
                           {"context_tokens", c.context_ceiling_tokens()},
                           {"prefill_chunk_tokens", c.prefill_chunk_tokens()},
                           {"speculative_draft_tokens", c.speculative_draft_tokens()},
                           {"speculative_method", c.speculative_method().empty() ? json(nullptr) : json(c.speculative_method())}});
  }
  return deployments;
}

json weights_json(const package::Package& package) {
  const auto s = package_weight_summary(package);
  if (!s) return nullptr;
  return {{"parameters", s->n_parameters},
          {"active_parameters", s->n_active_parameters},
          {"experts", s->n_experts},
          {"experts_per_token", s->experts_per_token},
          {"stored_bytes", s->stored_bytes},
          {"expert_bytes", s->expert_bytes},
          {"decode_weight_bytes", s->decode_weight_bytes}};
}

json speculation_json(const proto::Manifest& m) {
  const proto::Speculation& s = m.speculation();
  json draft = nullptr;
  if (!s.draft_model_config_json().empty()) {
    draft = {{"source", s.draft_source()},
             {"architecture", s.draft_architecture()},
             {"weight_bytes", s.draft_weight_bytes()},
             {"bytes_per_cached_token", s.draft_bytes_per_cached_token()}};
  }
  json measured = json::array();
  for (const proto::MeasuredStep& step : s.measured_steps()) {
    measured.push_back({{"rows", step.rows()}, {"tokens_per_row", step.tokens_per_row()},
                        {"milliseconds", step.milliseconds()}});
  }
  return {{"max_draft_tokens", s.max_draft_tokens()},
          {"measured_steps", measured},
          {"steps_measured_on", s.steps_measured_on()},
          {"adaptive_verification", s.adaptive_verification()},
          {"token_capacity", s.token_capacity()},
          {"history_drafts_available", s.max_draft_tokens() > 0},
          {"draft_model", draft}};
}

json summary_json(const package::Package& package, const InspectView& view) {
  const auto& m = package.manifest();
  return {{"verified", view.verified},
          {"verification", view.verified ? "verified" : "unverified"},
          {"format_version", m.format_version()},
          {"model", {{"id", m.model().canonical_name()},
                     {"served_names", json(std::vector<std::string>(m.model().served_names().begin(), m.model().served_names().end()))},
                     {"architecture", m.model().architecture()}}},
          {"weights", weights_json(package)},
          {"version", m.version()},
          {"publisher", {{"namespace", m.publisher_namespace()}, {"official_source", m.official_source()},
                         {"license", m.license().empty() ? json(nullptr) : json(m.license())},
                         {"key_fingerprint", package.signature().key_fingerprint}}},
          {"target", m.target()},
          {"history_kinds", m.history_kinds().empty() ? json("attention") : json(m.history_kinds())},
          {"kv_page_tokens", m.kv_page_tokens()},
          {"kv_cache_dtype", m.kv_cache_dtype().empty() ? json(nullptr) : json(m.kv_cache_dtype())},
          {"sampling", sampling_json(m)},
          {"speculation", speculation_json(m)},
          {"selected_tensor_parallel", view.tensor_parallel ? json(*view.tensor_parallel) : json(nullptr)},
          {"selected_rank", view.rank ? json(*view.rank) : json(nullptr)},
          {"deployments", deployments_json(package, view)},
          {"payload_bytes", package.distinct_payload_bytes()},
          {"payload_count", package.distinct_payloads().size()}};
}

json payload_json(const package::Package& package, const proto::Payload& p) {
  json out = {{"id", p.id()}, {"name", p.name()}, {"role", package::role_name(p.role())},
              {"length_bytes", p.length_bytes()}, {"tensor_parallel", p.tensor_parallel()}, {"rank", p.rank()}};
  auto it = package.locations().find(p.id());
  if (it != package.locations().end()) {
    out["file"] = it->second.file.empty() ? json(nullptr) : json(it->second.file);
    out["offset_bytes"] = it->second.offset_bytes;
  }
  return out;
}

json memory_map_json(const package::Package& package, const InspectView& view) {
  const auto& m = package.manifest();
  const auto& cost = m.memory_cost();
  json payloads = json::array();
  for (const auto* p : package.distinct_payloads()) {
    if (payload_selected(*p, view)) payloads.push_back(payload_json(package, *p));
  }
  json tensors = json::array();
  std::uint64_t tensor_bytes = 0;
  for (const auto& t : m.tensors()) {
    tensor_bytes += t.length_bytes();
    tensors.push_back({{"payload", t.payload()}, {"name", t.name()}, {"dtype", t.dtype()},
                       {"shape", json(std::vector<std::int64_t>(t.shape().begin(), t.shape().end()))},
                       {"offset_bytes", t.offset_bytes()}, {"length_bytes", t.length_bytes()}});
  }
  return {{"cost_model", {{"bytes_per_cached_token", cost.bytes_per_cached_token()},
                          {"bytes_per_snapshot", cost.bytes_per_snapshot()},
                          {"live_state_bytes_per_request", cost.live_state_bytes_per_request()},
                          {"graph_and_scratch_bytes", cost.graph_and_scratch_bytes()}}},
          {"serving_reserve_bytes", m.serving_reserve_bytes()},
          {"payloads", payloads},
          {"tensor_count", m.tensors_size()},
          {"tensor_bytes", tensor_bytes},
          {"tensors", tensors}};
}

json graphs_json(const package::Package& package, const InspectView& view) {
  json records = json::array();
  for (const auto* p : package.distinct_payloads()) {
    if (p->role() == proto::PAYLOAD_ROLE_GRAPH_RECORD && payload_selected(*p, view)) records.push_back(payload_json(package, *p));
  }
  json catalog = nullptr;
  if (const auto c = package_kernel_catalog(package)) {
    catalog = {{"kernel_modules", c->modules.size()}, {"step_graphs", c->graphs.size()}, {"target", c->platform.arch()}};
  }
  return {{"deployments", deployments_json(package, view)}, {"records", records}, {"kernel_catalog", catalog},
          {"timing_estimates", nullptr}, {"node_counts", nullptr}, {"edge_counts", nullptr}};
}

json frontend_json(const package::Package& package, const InspectView& view) {
  json assets = json::array();
  for (const auto* p : package.distinct_payloads()) {
    if (p->role() == proto::PAYLOAD_ROLE_FRONTEND && payload_selected(*p, view)) assets.push_back(payload_json(package, *p));
  }
  return {{"assets", assets}};
}

json contract_json(const proto::Manifest& manifest) {
  std::string text;
  google::protobuf::util::JsonPrintOptions options;
  options.preserve_proto_field_names = true;
  options.always_print_primitive_fields = true;
  if (!google::protobuf::util::MessageToJsonString(manifest, &text, options).ok()) return nullptr;
  return json::parse(text);
}

}  // namespace

std::string render_inspect_json(const package::Package& package, const InspectView& view) {
  json out = summary_json(package, view);
  if (view.memory_map || view.all) out["memory_map"] = memory_map_json(package, view);
  if (view.graphs || view.all) out["graphs"] = graphs_json(package, view);
  if (view.frontend || view.all) out["frontend"] = frontend_json(package, view);
  if (view.all) {
    const auto& m = package.manifest();
    out["package"] = {{"path", package.directory().string()},
                      {"form", package.form() == package::PackageForm::packed ? "packed" : "directory"},
                      {"execution_abi_version", m.execution_abi_version()},
                      {"prepared_contract_version", m.prepared_contract_version()},
                      {"created_at", m.created_at()}};
    out["contract"] = contract_json(m);
  }
  return out.dump(2);
}

}  // namespace flare::cli
