// "Did you mean ...?" for unknown names (model aliases, configuration keys, commands).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace flare {

std::string ascii_lower(std::string text);  // for case-insensitive names (aliases, repository ids)

std::size_t edit_distance(std::string_view a, std::string_view b);  // case-insensitive, transpositions count 1

// The closest candidate when it is close enough to be a plausible typo (distance at most a
// third of the longer name, at least 1), else nullopt. Ties go to the earlier candidate.
std::optional<std::string> suggest_close_match(std::string_view input, const std::vector<std::string>& candidates);

}  // namespace flare
