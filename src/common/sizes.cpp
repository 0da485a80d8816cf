#include "common/sizes.h"

#include <cctype>
#include <cmath>
#include <limits>

#include "common/error.h"

namespace flare {
namespace {

std::string lower(std::string_view text) {
  std::string out(text);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// Parses an unsigned decimal number ("12", "1.5", ".5"); no sign, exponent or spaces.
bool parse_decimal(std::string_view text, double& value) {
  if (text.empty() || text.size() > 64) return false;
  bool seen_digit = false, seen_dot = false;
  for (char c : text) {
    if (c == '.') {
      if (seen_dot) return false;
      seen_dot = true;
    } else if (std::isdigit(static_cast<unsigned char>(c))) {
      seen_digit = true;
    } else {
      return false;
    }
  }
  if (!seen_digit) return false;
  value = std::strtod(std::string(text).c_str(), nullptr);
  return std::isfinite(value);
}

// Splits "1.5GiB" into number "1.5" and multiplier; returns false when there is no known suffix.
bool split_suffix(std::string_view text, std::string_view& number, std::uint64_t& multiplier) {
  std::size_t split = text.size();
  while (split > 0 && std::isalpha(static_cast<unsigned char>(text[split - 1]))) --split;
  const std::string suffix = lower(text.substr(split));
  number = text.substr(0, split);
  if (suffix.empty()) return false;
  static const struct { const char* names[3]; std::uint64_t multiplier; } units[] = {
      {{"k", "kb", "kib"}, kKiB}, {{"m", "mb", "mib"}, kMiB},
      {{"g", "gb", "gib"}, kGiB}, {{"t", "tb", "tib"}, kTiB}, {{"b", "b", "b"}, 1}};
  for (const auto& unit : units) {
    for (const char* name : unit.names) {
      if (suffix == name) {
        multiplier = unit.multiplier;
        return true;
      }
    }
  }
  fail_usage("invalid size '{}': unknown unit '{}' (use K, M, G or T, e.g. 30G)", text, suffix);
}

std::uint64_t to_bytes(std::string_view original, double number, std::uint64_t multiplier) {
  const long double bytes = static_cast<long double>(number) * multiplier;
  if (!(bytes < static_cast<long double>(std::numeric_limits<std::uint64_t>::max())))
    fail_usage("invalid size '{}': too large", original);
  return static_cast<std::uint64_t>(std::llround(bytes));
}

}  // namespace

MemoryLimit parse_memory_limit(std::string_view text) {
  if (text.empty()) fail_usage("invalid --memory-limit '': expected a size (30G), a reserve (-30G) or a fraction (0.8)");
  if (text.size() > 64) fail_usage("invalid --memory-limit: value too long");
  const bool negative = text.front() == '-';
  const std::string_view body = negative ? text.substr(1) : text;
  std::string_view number;
  std::uint64_t multiplier = 0;
  double value = 0;
  if (split_suffix(body, number, multiplier)) {
    if (!parse_decimal(number, value))
      fail_usage("invalid --memory-limit '{}': expected a number before the unit", text);
    MemoryLimit limit;
    limit.bytes = to_bytes(text, value, multiplier);
    limit.kind = negative ? MemoryLimit::Kind::reserve_bytes : MemoryLimit::Kind::occupied_bytes;
    if (!negative && limit.bytes == 0)
      fail_usage("invalid --memory-limit '{}': an occupied size must be greater than zero", text);
    return limit;
  }
  if (negative) fail_usage("invalid --memory-limit '{}': a negative value must be a size with a unit (-30G)", text);
  if (!parse_decimal(body, value))
    fail_usage("invalid --memory-limit '{}': expected a size (30G), a reserve (-30G) or a fraction (0.8)", text);
  if (value <= 0.0 || value > 1.0)
    fail_usage("invalid --memory-limit '{}': a bare number is a fraction of total memory, greater than 0 and at most 1; sizes need a unit (30G)", text);
  MemoryLimit limit;
  limit.kind = MemoryLimit::Kind::fraction_of_total;
  limit.fraction = value;
  return limit;
}

std::uint64_t parse_byte_size(std::string_view text, ByteSizeRules rules) {
  if (text.empty()) fail_usage("invalid size '': expected a size such as 1G or 2GiB");
  if (text.size() > 64) fail_usage("invalid size: value too long");
  std::string_view number;
  std::uint64_t multiplier = 0;
  double value = 0;
  if (split_suffix(text, number, multiplier)) {
    if (!parse_decimal(number, value)) fail_usage("invalid size '{}': expected a number before the unit", text);
    return to_bytes(text, value, multiplier);
  }
  if (rules.allow_bare_zero && parse_decimal(text, value) && value == 0.0) return 0;
  fail_usage("invalid size '{}': a size needs a unit, such as 1G or 2GiB", text);
}

std::vector<int> parse_gpu_list(std::string_view text) {
  if (text.empty()) fail_usage("invalid --gpus '': expected indices such as 0, 0,1 or 0-3");
  if (text.size() > 1024) fail_usage("invalid --gpus: value too long");
  auto parse_index = [&](std::string_view part) {
    if (part.empty() || part.size() > 4)
      fail_usage("invalid --gpus '{}': expected indices such as 0, 0,1 or 0-3", text);
    int value = 0;
    for (char c : part) {
      if (!std::isdigit(static_cast<unsigned char>(c)))
        fail_usage("invalid --gpus '{}': '{}' is not a GPU index", text, part);
      value = value * 10 + (c - '0');
    }
    return value;
  };
  std::vector<int> indices;
  std::size_t start = 0;
  while (start <= text.size()) {
    std::size_t comma = text.find(',', start);
    if (comma == std::string_view::npos) comma = text.size();
    const std::string_view item = text.substr(start, comma - start);
    const std::size_t dash = item.find('-');
    if (dash == std::string_view::npos) {
      indices.push_back(parse_index(item));
    } else {
      const int first = parse_index(item.substr(0, dash));
      const int last = parse_index(item.substr(dash + 1));
      if (last < first) fail_usage("invalid --gpus '{}': range {} runs backwards", text, item);
      for (int i = first; i <= last; ++i) indices.push_back(i);
    }
    start = comma + 1;
  }
  for (std::size_t i = 0; i < indices.size(); ++i)
    for (std::size_t j = i + 1; j < indices.size(); ++j)
      if (indices[i] == indices[j]) fail_usage("invalid --gpus '{}': GPU {} is listed twice", text, indices[i]);
  if (indices.size() > 64) fail_usage("invalid --gpus '{}': at most 64 GPUs", text);
  return indices;
}

std::string format_bytes(std::uint64_t bytes) {
  if (bytes >= kGiB) return fmt::format("{:.1f} GiB", static_cast<double>(bytes) / kGiB);
  if (bytes >= kMiB) return fmt::format("{:.0f} MiB", static_cast<double>(bytes) / kMiB);
  if (bytes >= kKiB) return fmt::format("{:.0f} KiB", static_cast<double>(bytes) / kKiB);
  return fmt::format("{} B", bytes);
}

std::string format_count(std::uint64_t value) {
  std::string digits = std::to_string(value);
  std::string out;
  for (std::size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out.push_back(',');
    out.push_back(digits[i]);
  }
  return out;
}

std::string format_size_option(std::uint64_t bytes) {
  return fmt::format("{}G", (bytes + kGiB - 1) / kGiB);
}

}  // namespace flare
