#include "common/capacity.h"

#include "common/sizes.h"

namespace flare {
namespace {

// Capacity figures are always in GiB with one decimal, as the spec's form shows them.
std::string gib(std::uint64_t bytes) { return fmt::format("{:.1f} GiB", static_cast<double>(bytes) / kGiB); }

std::string term_text(const CapacityTerm& term) {
  std::string text = gib(term.bytes);
  if (!term.label.empty()) text += " " + term.label;
  if (!term.detail.empty()) text += " (" + term.detail + ")";
  return text;
}

// Display width of UTF-8 text: counts code points (the operators used here are one column).
std::size_t columns(const std::string& text) {
  std::size_t n = 0;
  for (unsigned char c : text) n += (c & 0xC0) != 0x80;
  return n;
}

// Appends `piece` to the paragraph, breaking before it (with the continuation indent) when the
// current line would pass the wrap column. Breaks keep the operator at the start of the line.
void append_wrapped(std::string& out, std::size_t& line_length, const std::string& separator,
                    const std::string& piece) {
  const std::size_t piece_length = columns(separator) + columns(piece);
  if (line_length + piece_length > kCapacityWrapColumns && line_length > 0) {
    std::string trimmed = separator;
    while (!trimmed.empty() && trimmed.front() == ' ') trimmed.erase(trimmed.begin());
    out += "\n";
    out += kErrorIndent;
    out += trimmed + piece;
    line_length = columns(kErrorIndent) + columns(trimmed) + columns(piece);
  } else {
    out += separator + piece;
    line_length += piece_length;
  }
}

}  // namespace

std::string format_capacity_shortfall(const CapacityShortfall& shortfall) {
  std::uint64_t needed = 0;
  for (const auto& term : shortfall.needed) needed += term.bytes;
  std::uint64_t available = shortfall.available.bytes;
  for (const auto& term : shortfall.deductions) available = available > term.bytes ? available - term.bytes : 0;

  std::string out = "needs ";
  std::size_t line_length = std::string("error: needs ").size();
  for (std::size_t i = 0; i < shortfall.needed.size(); ++i) {
    const std::string piece = term_text(shortfall.needed[i]);
    if (i == 0) {
      out += piece;
      line_length += columns(piece);
    } else {
      append_wrapped(out, line_length, " + ", piece);
    }
  }
  if (shortfall.needed.size() > 1) append_wrapped(out, line_length, " = ", gib(needed) + ";");
  else out += ";";

  out += "\n";
  out += kErrorIndent;
  std::string has = "has " + term_text(shortfall.available);
  for (const auto& term : shortfall.deductions) has += " \u2212 " + term_text(term);
  if (!shortfall.deductions.empty()) has += " = " + gib(available);
  out += has + ".";

  if (!shortfall.options.empty()) {
    out += "\n";
    out += kErrorIndent;
    out += "Options: ";
    for (std::size_t i = 0; i < shortfall.options.size(); ++i) {
      if (i > 0) out += "; ";
      out += shortfall.options[i];
    }
    out += ".";
  }
  return out;
}

std::string format_gpu_shortfall(int n_needed, std::uint64_t bytes_per_gpu, int n_selected,
                                 const std::string& option) {
  return fmt::format("needs {} GPU{} with {}; {} selected; use {}", n_needed, n_needed == 1 ? "" : "s",
                     gib(bytes_per_gpu), n_selected, option);
}

void fail_capacity(const CapacityShortfall& shortfall) {
  throw Error(ExitCode::capacity, format_capacity_shortfall(shortfall));
}

}  // namespace flare
