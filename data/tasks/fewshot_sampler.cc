#include "data/tasks/fewshot_sampler.h"

#include <string>

#include "core/status.h"

namespace mtnlg::tasks {

std::vector<int64_t> FewshotSampler::sample(int64_t pool_size, int64_t n,
                                            const std::function<bool(int64_t)>& equals_eval) {
  if (n < 0) throw invalid_argument("a negative number of few-shot examples", "num_fewshot");
  if (n == 0) return {};
  const int64_t draw = equals_eval ? n + 1 : n;
  if (draw > pool_size)
    throw invalid_argument(std::to_string(n) + " few-shot examples asked from a split of " +
                               std::to_string(pool_size) + " documents" +
                               (equals_eval ? " (one more is drawn: the document itself may "
                                              "be among them)"
                                            : ""),
                           "num_fewshot");
  std::vector<int64_t> drawn = rnd_.sample(pool_size, draw);
  if (!equals_eval) return drawn;
  std::vector<int64_t> kept;
  for (const int64_t i : drawn)
    if (!equals_eval(i)) kept.push_back(i);
  if (static_cast<int64_t>(kept.size()) < n)
    throw invalid_argument("the few-shot split holds the evaluated document more than once: " +
                               std::to_string(kept.size()) + " examples left of " +
                               std::to_string(n),
                           "num_fewshot");
  kept.resize(static_cast<size_t>(n));
  return kept;
}

}  // namespace mtnlg::tasks
