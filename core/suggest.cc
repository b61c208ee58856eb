#include "core/suggest.h"

#include <algorithm>
#include <cctype>

namespace mtnlg {
namespace {

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// The words of a name, sorted, so "lr_min" matches "min_lr".
std::vector<std::string> words(const std::string& name) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= name.size()) {
    const size_t end = std::min(name.find_first_of("_-", start), name.size());
    if (end > start) out.push_back(name.substr(start, end - start));
    start = end + 1;
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

std::string suggest_name(std::string_view want_name, const std::vector<std::string_view>& valid) {
  const std::string want = lower(want_name);
  const std::vector<std::string> want_words = words(want);
  const size_t budget = want.size() <= 4 ? 1 : want.size() <= 8 ? 2 : 3;
  std::string best;
  size_t best_distance = budget + 1;
  for (const std::string_view v : valid) {
    const std::string name = lower(v);
    if (words(name) == want_words) return std::string(v);
    const size_t d = edit_distance(want, name);
    if (d < best_distance) {
      best_distance = d;
      best = std::string(v);
    }
  }
  return best;
}

}  // namespace mtnlg
