// "Did you mean ...?": the valid name a mistyped one most likely meant, for the messages that
// name an unknown recipe key or command-line flag.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace mtnlg {

// Levenshtein distance (insertions, deletions, substitutions).
size_t edit_distance(std::string_view a, std::string_view b);

// The name in `valid` that `want` most likely meant, or "" when none is close: the same words
// ('_' or '-' separated) in another order, else the nearest within a few edits for its length
// (1 up to 4 characters, 2 up to 8, else 3), compared without case.
std::string suggest_name(std::string_view want, const std::vector<std::string_view>& valid);

}  // namespace mtnlg
