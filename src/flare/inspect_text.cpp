// Boxed text sections of `flare inspect`: the name banner, Model, Publisher, Serving and
// Execution (the summary), then Memory, Stored payloads and Prepared tensors (--memory-map),
// Graphs (--graphs), Frontend (--frontend), and Package and Checkpoint (--all).
#include <cstdio>
#include <iterator>
#include <map>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "common/sizes.h"
#include "flare/inspect_view.h"
#include "flare/name_banner.h"
#include "flare/package_catalog.h"

namespace flare::cli {
namespace {

using Fields = std::vector<std::pair<std::string, std::string>>;

struct Out {
  const TerminalInfo& term;
  int width;
  void box(const std::string& title, const std::vector<std::string>& lines) const {
    std::fputs(render_box(term, title, lines, width).c_str(), stdout);
  }
  void fields(const std::string& title, const Fields& fields) const { box(title, render_fields(term, fields, width - 4)); }
  void table(const std::string& title, const std::vector<std::string>& header,
             const std::vector<std::vector<std::string>>& rows) const {
    box(title, render_table(term, header, rows, width - 4));
  }
};

std::string bytes_text(std::uint64_t bytes) { return fmt::format("{} ({} bytes)", format_bytes(bytes), format_count(bytes)); }

std::string speculation_text(const proto::Capacities& c) {
  if (c.speculative_draft_tokens() == 0) return "off";
  return fmt::format("{} draft tokens{}", c.speculative_draft_tokens(),
                     c.speculative_method().empty() ? "" : " (" + c.speculative_method() + ")");
}

// The verify steps timed at export against decode steps of as many rows, for the fewest rows:
// "on NVIDIA H200: 1 row 1.03x (2 tokens) .. 1.22x (8); 2 rows ..." (empty when none were timed).
std::string measured_steps_text(const proto::Speculation& s) {
  std::map<std::uint32_t, std::map<std::uint32_t, double>> by_rows;  // rows -> tokens per row -> ms
  for (const proto::MeasuredStep& step : s.measured_steps()) by_rows[step.rows()][step.tokens_per_row()] = step.milliseconds();
  std::vector<std::string> parts;
  for (const auto& [rows, widths] : by_rows) {
    const auto decode = widths.find(1);
    if (decode == widths.end() || !(decode->second > 0.0) || widths.size() < 2) continue;
    const auto& [narrow, narrow_ms] = *std::next(widths.begin());
    const auto& [wide, wide_ms] = *widths.rbegin();
    parts.push_back(narrow == wide ? fmt::format("{} row{} {:.2f}x ({} tokens)", rows, rows == 1 ? "" : "s",
                                                 wide_ms / decode->second, wide)
                                   : fmt::format("{} row{} {:.2f}x ({} tokens) .. {:.2f}x ({})", rows, rows == 1 ? "" : "s",
                                                 narrow_ms / decode->second, narrow, wide_ms / decode->second, wide));
    if (parts.size() == 4) break;
  }
  if (parts.empty()) return "";
  return fmt::format("on {}, a verify step over a decode step: {}", s.steps_measured_on(), fmt::join(parts, "; "));
}

// The package's prepared speculation beyond the draft count: the learned draft, the history
// drafts flare run may add, the verification policy and its token capacity.
Fields speculation_fields(const proto::Manifest& m) {
  const proto::Speculation& s = m.speculation();
  if (s.max_draft_tokens() == 0) return {};
  Fields fields;
  if (!s.draft_model_config_json().empty()) {
    const std::uint64_t kv = m.memory_cost().bytes_per_cached_token();
    fields.push_back({"draft model", fmt::format("{} ({}), {} of weights, {} of KV a token ({:.0f}% of each cached token)",
                                                 s.draft_source(), s.draft_architecture(),
                                                 format_bytes(s.draft_weight_bytes()),
                                                 format_bytes(s.draft_bytes_per_cached_token()),
                                                 kv ? 100.0 * double(s.draft_bytes_per_cached_token()) / double(kv) : 0.0)});
  }
  fields.push_back({"history drafts", "off unless flare run --history-drafts (copied from each request's own text)"});
  fields.push_back({"verification", fmt::format("{}, at most {} verify tokens a step",
                                                s.adaptive_verification() ? "adaptive" : "fixed width",
                                                format_count(s.token_capacity()))});
  if (std::string costs = measured_steps_text(s); !costs.empty()) fields.push_back({"verify costs", std::move(costs)});
  return fields;
}

std::string sampling_defaults_text(const proto::SamplingDefaults& s) {
  std::vector<std::string> parts;
  if (s.has_temperature()) parts.push_back(fmt::format("temperature {:g}", s.temperature()));
  if (s.has_top_p()) parts.push_back(fmt::format("top_p {:g}", s.top_p()));
  if (s.has_top_k()) parts.push_back(fmt::format("top_k {}", s.top_k()));
  if (s.has_min_p()) parts.push_back(fmt::format("min_p {:g}", s.min_p()));
  if (s.has_repetition_penalty()) parts.push_back(fmt::format("repetition_penalty {:g}", s.repetition_penalty()));
  return parts.empty() ? "(none recorded)" : fmt::format("{}", fmt::join(parts, ", "));
}

void print_model_sections(const package::Package& package, const InspectView& view, const Out& out) {
  const auto& m = package.manifest();
  const std::string name = m.model().served_names_size() > 0 ? m.model().served_names(0) : m.model().canonical_name();
  if (auto banner = render_name_banner(out.term, name, out.width)) {
    for (const auto& line : *banner) std::printf("%s\n", line.c_str());
    std::printf("\n");
  }
  std::vector<std::string> served(m.model().served_names().begin(), m.model().served_names().end());
  out.fields("Model", {{"name", name},
                       {"served names", served.empty() ? "(none; the model id is served)" : fmt::format("{}", fmt::join(served, ", "))},
                       {"model id", m.model().canonical_name()},
                       {"architecture", m.model().architecture()},
                       {"version", m.version()},
                       {"target", m.target()},
                       {"verification", view.verification}});
  if (const auto weights = package_weight_summary(package)) {
    Fields fields{{"parameters", parameters_text(*weights)},
                  {"stored", weights->n_experts == 0 ? bytes_text(weights->stored_bytes)
                                                     : fmt::format("{}, experts {}", bytes_text(weights->stored_bytes),
                                                                   format_bytes(weights->expert_bytes))},
                  {"decode reads", fmt::format("{} a token (dense weights{}, output head)",
                                               format_bytes(weights->decode_weight_bytes),
                                               weights->n_experts == 0 ? "" : ", the experts it activates")}};
    out.fields("Weights", fields);
  }
  out.fields("Publisher", {{"namespace", m.publisher_namespace()},
                           {"source", m.official_source()},
                           {"license", m.license().empty() ? "(none declared)" : m.license()},
                           {"key", package.signature().key_fingerprint}});
}

void print_serving(const package::Package& package, const InspectView& view, const Out& out) {
  const auto& m = package.manifest();
  Fields fields;
  for (const auto* d : selected_deployments(package, view)) {
    const auto& c = d->capacities();
    const std::string prefix = fmt::format("TP{} ", d->tensor_parallel());
    fields.push_back({prefix + "context", fmt::format("{} tokens", format_count(c.context_ceiling_tokens()))});
    fields.push_back({prefix + "concurrency", fmt::format("{} (buckets {})", format_count(c.max_concurrency()),
                                                          fmt::join(c.concurrency_buckets(), ", "))});
    fields.push_back({prefix + "prefill chunk", fmt::format("{} tokens", format_count(c.prefill_chunk_tokens()))});
    fields.push_back({prefix + "speculation", speculation_text(c)});
  }
  for (auto& field : speculation_fields(m)) fields.push_back(std::move(field));
  fields.push_back({"history kinds", m.history_kinds().empty() ? "attention" : m.history_kinds()});
  fields.push_back({"KV pages", fmt::format("{} tokens per page, {}", m.kv_page_tokens(),
                                            m.kv_cache_dtype().empty() ? "(dtype not recorded)" : m.kv_cache_dtype())});
  fields.push_back({"sampling defaults", sampling_defaults_text(m.sampling_defaults())});
  std::vector<std::string> ranges;
  for (const auto& r : m.sampling_ranges()) ranges.push_back(fmt::format("{} {:g}..{:g}", r.parameter(), r.minimum(), r.maximum()));
  fields.push_back({"request ranges", ranges.empty() ? "(none recorded)" : fmt::format("{}", fmt::join(ranges, ", "))});
  out.fields("Serving", fields);
  std::vector<std::vector<std::string>> rows;
  for (const auto* d : selected_deployments(package, view)) {
    for (const auto& r : d->ranks()) {
      if (!rank_selected(r, view)) continue;
      rows.push_back({fmt::format("TP{}", d->tensor_parallel()), std::to_string(r.rank()),
                      format_count(d->capacities().max_concurrency()),
                      format_count(d->capacities().context_ceiling_tokens()), format_bytes(r.fixed_bytes()),
                      format_count(r.n_graphs())});
    }
  }
  out.table("Execution", {"deployment", "rank", "concurrency", "context", "fixed memory", "graphs"}, rows);
}

void print_memory_map(const package::Package& package, const InspectView& view, const Out& out) {
  const auto& m = package.manifest();
  const auto& cost = m.memory_cost();
  Fields fields = {{"per cached token", bytes_text(cost.bytes_per_cached_token())},
                   {"per snapshot", bytes_text(cost.bytes_per_snapshot())},
                   {"live state per request", bytes_text(cost.live_state_bytes_per_request()) +
                                                  (cost.live_state_bytes_per_request() > 0
                                                       ? " (sliding-window layers: two windows of pages a request, "
                                                         "given back as the window moves on)"
                                                       : "")},
                   {"graphs and scratch", bytes_text(cost.graph_and_scratch_bytes())},
                   {"serving reserve", bytes_text(m.serving_reserve_bytes())},
                   {"sizing", std::string(cost.live_state_bytes_per_request() > 0
                                              ? "KV pages = (free - fixed - reserve - concurrency x live state) / "
                                              : "KV pages = (free - fixed - reserve) / ") +
                                  "(page tokens x per cached token); physical backing is chosen at load time"}};
  for (const auto* d : selected_deployments(package, view)) {
    for (const auto& r : d->ranks()) {
      if (rank_selected(r, view)) fields.push_back({fmt::format("TP{} rank {} fixed", d->tensor_parallel(), r.rank()), bytes_text(r.fixed_bytes())});
    }
  }
  out.fields("Memory", fields);
  std::vector<std::vector<std::string>> rows;
  for (const auto* p : package.distinct_payloads()) {
    if (!payload_selected(*p, view)) continue;
    const auto& location = package.locations().at(p->id());
    rows.push_back({p->name(), package::role_name(p->role()), format_count(p->length_bytes()),
                    location.file.empty() ? "(primary)" : location.file, format_count(location.offset_bytes)});
  }
  out.table("Stored payloads", {"payload", "role", "bytes", "file", "offset"}, rows);
  std::map<std::string, std::pair<std::uint64_t, std::uint64_t>> per_payload;  // name -> (count, bytes)
  std::uint64_t n_tensors = 0, tensor_bytes = 0;
  for (const auto& t : m.tensors()) {
    auto& [count, bytes] = per_payload[t.payload()];
    ++count, bytes += t.length_bytes(), ++n_tensors, tensor_bytes += t.length_bytes();
  }
  std::vector<std::vector<std::string>> tensor_rows;
  for (const auto& [name, figures] : per_payload) {
    tensor_rows.push_back({name, format_count(figures.first), format_count(figures.second)});
  }
  tensor_rows.push_back({"total", format_count(n_tensors), format_count(tensor_bytes)});
  out.table(fmt::format("Prepared tensors ({} views, {})", format_count(n_tensors), format_bytes(tensor_bytes)),
            {"payload", "tensors", "bytes"}, tensor_rows);
}

void print_graphs(const package::Package& package, const InspectView& view, const Out& out) {
  std::vector<std::vector<std::string>> rows;
  for (const auto* d : selected_deployments(package, view)) {
    const auto& c = d->capacities();
    for (const auto& r : d->ranks()) {
      if (!rank_selected(r, view)) continue;
      rows.push_back({fmt::format("TP{}", d->tensor_parallel()), std::to_string(r.rank()), format_count(r.n_graphs()),
                      fmt::format("{}", fmt::join(c.concurrency_buckets(), " ")), format_count(c.prefill_chunk_tokens()),
                      speculation_text(c)});
    }
  }
  auto lines = render_table(out.term, {"deployment", "rank", "graphs", "concurrency buckets", "prefill chunk", "speculation"},
                            rows, out.width - 4);
  std::size_t n_records = 0;
  std::uint64_t record_bytes = 0;
  for (const auto* p : package.distinct_payloads()) {
    if (p->role() == proto::PAYLOAD_ROLE_GRAPH_RECORD && payload_selected(*p, view)) ++n_records, record_bytes += p->length_bytes();
  }
  lines.push_back("");
  lines.push_back(fmt::format("{} graph records ({}); timing estimates and node and edge counts are not recorded",
                              n_records, format_bytes(record_bytes)));
  if (const auto catalog = package_kernel_catalog(package)) {
    lines.push_back(fmt::format("kernel catalog: {} kernel modules and {} step graphs on {}", catalog->modules.size(),
                                catalog->graphs.size(), catalog->platform.arch()));
  }
  out.box("Graphs", lines);
}

void print_frontend(const package::Package& package, const InspectView& view, const Out& out) {
  std::vector<std::vector<std::string>> rows;
  for (const auto* p : package.distinct_payloads()) {
    if (p->role() != proto::PAYLOAD_ROLE_FRONTEND || !payload_selected(*p, view)) continue;
    std::string asset = p->name().starts_with("frontend/") ? p->name().substr(9) : p->name();
    rows.push_back({asset, format_count(p->length_bytes()), p->id().substr(0, 16)});
  }
  if (rows.empty()) {
    out.box("Frontend", {"no frontend assets (the package has no tokenizer)"});
    return;
  }
  out.table("Frontend", {"asset", "bytes", "sha256"}, rows);
}

void print_package_details(const package::Package& package, const Out& out) {
  const auto& m = package.manifest();
  out.fields("Package", {{"path", package.directory().string()},
                         {"form", package.form() == package::PackageForm::packed ? "packed" : "directory"},
                         {"format version", std::to_string(m.format_version())},
                         {"execution ABI", std::to_string(m.execution_abi_version())},
                         {"prepared contract", std::to_string(m.prepared_contract_version())},
                         {"created", m.created_at()},
                         {"payloads", fmt::format("{} distinct, {}", package.distinct_payloads().size(),
                                                  bytes_text(package.distinct_payload_bytes()))}});
  std::vector<std::string> aliases(m.model().aliases().begin(), m.model().aliases().end());
  out.fields("Checkpoint", {{"recipe", m.model().recipe()},
                            {"aliases", aliases.empty() ? "(none)" : fmt::format("{}", fmt::join(aliases, ", "))},
                            {"repository", m.model().checkpoint_repository().empty() ? "(local checkpoint)" : m.model().checkpoint_repository()},
                            {"revision", m.model().checkpoint_revision()},
                            {"model config", m.model_config_json().empty() ? "(not recorded)"
                                                                           : bytes_text(m.model_config_json().size())}});
}

}  // namespace

void print_inspect_text(const package::Package& package, const InspectView& view, const TerminalInfo& terminal) {
  Out out{terminal, content_width(terminal)};
  print_model_sections(package, view, out);
  print_serving(package, view, out);
  if (view.all) print_package_details(package, out);
  if (view.memory_map || view.all) print_memory_map(package, view, out);
  if (view.graphs || view.all) print_graphs(package, view, out);
  if (view.frontend || view.all) print_frontend(package, view, out);
}

}  // namespace flare::cli
