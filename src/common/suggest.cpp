#include "common/suggest.h"

#include <algorithm>
#include <cctype>

namespace flare {

std::string ascii_lower(std::string text) {
  std::transform(text.begin(), text.end(), text.begin(), [](unsigned char c) { return std::tolower(c); });
  return text;
}

// Optimal string alignment distance: Levenshtein plus adjacent transpositions ("rnu" -> "run").
std::size_t edit_distance(std::string_view a, std::string_view b) {
  auto same = [](char x, char y) {
    return std::tolower(static_cast<unsigned char>(x)) == std::tolower(static_cast<unsigned char>(y));
  };
  const std::size_t width = b.size() + 1;
  std::vector<std::size_t> d((a.size() + 1) * width);
  for (std::size_t i = 0; i <= a.size(); ++i) d[i * width] = i;
  for (std::size_t j = 0; j <= b.size(); ++j) d[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    for (std::size_t j = 1; j <= b.size(); ++j) {
      std::size_t best = std::min({d[(i - 1) * width + j] + 1, d[i * width + j - 1] + 1,
                                   d[(i - 1) * width + j - 1] + (same(a[i - 1], b[j - 1]) ? 0 : 1)});
      if (i > 1 && j > 1 && same(a[i - 1], b[j - 2]) && same(a[i - 2], b[j - 1]))
        best = std::min(best, d[(i - 2) * width + j - 2] + 1);
      d[i * width + j] = best;
    }
  }
  return d[a.size() * width + b.size()];
}

std::optional<std::string> suggest_close_match(std::string_view input, const std::vector<std::string>& candidates) {
  if (input.size() > 256) return std::nullopt;
  std::optional<std::string> best;
  std::size_t best_distance = 0;
  for (const auto& candidate : candidates) {
    const std::size_t distance = edit_distance(input, candidate);
    const std::size_t limit = std::max<std::size_t>(1, std::max(input.size(), candidate.size()) / 3);
    if (distance > limit) continue;
    if (!best || distance < best_distance) {
      best = candidate;
      best_distance = distance;
    }
  }
  return best;
}

}  // namespace flare
