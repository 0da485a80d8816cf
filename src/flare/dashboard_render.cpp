// The dashboard's text (dashboard.h): a header line and boxed sections of aligned fields, built
// from a DashboardView; also the plain line written when output is not a terminal.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "common/sizes.h"
#include "flare/dashboard.h"

namespace flare::cli {
namespace {

using Fields = std::vector<std::pair<std::string, std::string>>;

std::string seconds_text(const std::optional<double>& seconds) {
  if (!seconds) return "-";
  const double ms = *seconds * 1000.0;
  if (ms < 10.0) return fmt::format("{:.2f} ms", ms);
  if (ms < 100.0) return fmt::format("{:.1f} ms", ms);
  if (ms < 1000.0) return fmt::format("{:.0f} ms", ms);
  return fmt::format("{:.2f} s", *seconds);
}

std::string rate_text(double per_s) {
  if (per_s > 0 && per_s < 10) return fmt::format("{:.1f}", per_s);
  return format_count(static_cast<std::uint64_t>(std::llround(per_s)));
}

std::string percent_text(double fraction) { return fmt::format("{:.0f}%", fraction * 100.0); }

std::string bandwidth_text(double bytes_per_s) {
  if (bytes_per_s >= 1e12) return fmt::format("{:.2f} TB/s", bytes_per_s / 1e12);
  if (bytes_per_s >= 1e9) return fmt::format("{:.1f} GB/s", bytes_per_s / 1e9);
  return fmt::format("{:.0f} MB/s", bytes_per_s / 1e6);
}

std::string errors_text(const std::map<int, std::uint64_t>& errors) {
  if (errors.empty()) return "none";
  std::string text;
  for (const auto& [status, count] : errors) {
    if (!text.empty()) text += ", ";
    text += fmt::format("{} \u00d7{}", status, format_count(count));
  }
  return text;
}

std::string uptime_text(double seconds) {
  return format_elapsed(std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(seconds)));
}

std::string memory_text(const DeviceMemoryUse& memory) {
  if (memory.host) return fmt::format("{} resident (host)", format_bytes(memory.used_bytes));
  return fmt::format("{} of {} used ({})", format_bytes(memory.used_bytes), format_bytes(memory.total_bytes),
                     memory.total_bytes ? percent_text(static_cast<double>(memory.used_bytes) /
                                                       static_cast<double>(memory.total_bytes))
                                        : "-");
}

std::string weights_text(const DashboardInfo& info, const DashboardView& view) {
  if (!view.weight_bytes_per_s) return "-";
  std::string text = bandwidth_text(*view.weight_bytes_per_s);
  if (view.bandwidth_share) {
    text += fmt::format(" ({} of {})", percent_text(*view.bandwidth_share), bandwidth_text(*info.device_bandwidth_bytes_per_s));
  }
  return text + fmt::format(" ({} a step \u00d7 {} steps/s)", format_bytes(info.decode_weight_bytes), rate_text(view.steps_per_s));
}

struct Section {
  std::string title;
  Fields fields;
};

std::vector<Section> sections(const DashboardInfo& info, const DashboardView& v) {
  std::vector<Section> out;
  out.push_back({"Requests",
                 {{"running", fmt::format("{} of {}, {} queued", v.n_running, info.max_concurrency, v.n_waiting)},
                  {"served", fmt::format("{} ok", format_count(v.n_succeeded))},
                  {"errors", errors_text(v.errors_by_status)},
                  {"connections", fmt::format("{} open, {} evicted at the cap", v.n_connections,
                                              format_count(v.n_evicted_connections))}}});
  const std::string window = v.window_s > 0 ? fmt::format("last {:.0f}s", v.window_s) : "starting";
  out.push_back({"Throughput and latency, " + window,
                 {{"prompt", rate_text(v.prompt_tokens_per_s) + " tokens/s"},
                  {"generated", rate_text(v.generated_tokens_per_s) + " tokens/s"},
                  {"TTFT", fmt::format("p50 {}  p99 {}", seconds_text(v.ttft_p50_s), seconds_text(v.ttft_p99_s))},
                  {"inter-token", fmt::format("p50 {}  p99 {}", seconds_text(v.itl_p50_s), seconds_text(v.itl_p99_s))}}});
  Fields cache{{"KV pages", fmt::format("{} used, {} backed, {} reserved ({} tokens a page)",
                                        format_count(static_cast<std::uint64_t>(v.kv_pages_used)),
                                        format_count(static_cast<std::uint64_t>(v.kv_pages_backed)),
                                        format_count(static_cast<std::uint64_t>(v.kv_pages_reserved)), info.page_tokens)},
               {"prefix hits", v.prefix_hit_rate ? percent_text(*v.prefix_hit_rate) + " of prompt tokens" : "-"}};
  if (info.speculation) {
    cache.push_back({"drafts", v.draft_acceptance
                                   ? fmt::format("{} accepted, {:.2f} tokens a verify round",
                                                 percent_text(*v.draft_acceptance), v.tokens_per_verify.value_or(1.0))
                                   : "none verified yet"});
  }
  out.push_back({"Cache", std::move(cache)});
  Fields device{{"weights", weights_text(info, v)}};
  if (v.memory) device.push_back({"memory", memory_text(*v.memory)});
  out.push_back({"Device", std::move(device)});
  return out;
}

}  // namespace

std::vector<std::string> render_dashboard(const TerminalInfo& terminal, const DashboardInfo& info,
                                          const DashboardView& view, int columns, int rows) {
  const int width = std::clamp(columns, 24, 120);
  std::vector<std::string> lines;
  // The header's parts, the least useful last: dropped while the line is wider than the terminal.
  std::vector<std::string> parts{paint(terminal, style::bold, paint(terminal, style::cyan, "\u2726 flare")),
                                 paint(terminal, style::bold, info.model), info.url,
                                 paint(terminal, style::muted, "up " + uptime_text(view.uptime_s)),
                                 paint(terminal, style::muted, info.backend)};
  std::string header;
  for (; !parts.empty(); parts.pop_back()) {
    header.clear();
    for (const auto& part : parts) header += (header.empty() ? "" : "  ") + part;
    if (display_width(header) <= static_cast<std::size_t>(columns)) break;
  }
  lines.push_back(header);
  for (const auto& section : sections(info, view)) {
    const auto fields = render_fields(terminal, section.fields, width - 4);
    std::string box = render_box(terminal, section.title, fields, width);
    std::vector<std::string> box_lines;
    for (std::size_t start = 0; start < box.size();) {
      const std::size_t end = box.find('\n', start);
      box_lines.push_back(box.substr(start, end - start));
      if (end == std::string::npos) break;
      start = end + 1;
    }
    if (static_cast<int>(lines.size() + box_lines.size()) > rows) break;  // the lowest sections go first
    lines.insert(lines.end(), box_lines.begin(), box_lines.end());
  }
  if (static_cast<int>(lines.size()) > rows) lines.resize(static_cast<std::size_t>(std::max(rows, 0)));
  return lines;
}

std::string render_metrics_line(const DashboardInfo& info, const DashboardView& v) {
  std::string line = fmt::format(
      "metrics: running {}/{}, queued {}, prompt {} tok/s, generated {} tok/s, TTFT p50 {} p99 {}, inter-token p50 {} "
      "p99 {}, KV pages {} used {} backed {} reserved",
      v.n_running, info.max_concurrency, v.n_waiting, rate_text(v.prompt_tokens_per_s), rate_text(v.generated_tokens_per_s),
      seconds_text(v.ttft_p50_s), seconds_text(v.ttft_p99_s), seconds_text(v.itl_p50_s), seconds_text(v.itl_p99_s),
      v.kv_pages_used, v.kv_pages_backed, v.kv_pages_reserved);
  if (v.prefix_hit_rate) line += ", prefix hits " + percent_text(*v.prefix_hit_rate);
  if (v.draft_acceptance) line += ", drafts accepted " + percent_text(*v.draft_acceptance);
  if (v.weight_bytes_per_s) {
    line += ", weights " + bandwidth_text(*v.weight_bytes_per_s);
    if (v.bandwidth_share) line += " (" + percent_text(*v.bandwidth_share) + ")";
  }
  if (v.memory) line += ", memory " + memory_text(*v.memory);
  line += fmt::format(", {} ok, errors {}, connections {}", v.n_succeeded, errors_text(v.errors_by_status), v.n_connections);
  return line;
}

}  // namespace flare::cli
