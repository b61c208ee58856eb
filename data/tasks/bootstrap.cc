#include "data/tasks/bootstrap.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "core/status.h"
#include "data/tasks/python_random.h"

namespace mtnlg::tasks {

double python_mean(const std::vector<double>& xs) {
  double sum = 0;
  for (const double x : xs) sum += x;
  return sum / static_cast<double>(xs.size());
}

double perplexity_of(const std::vector<double>& loglikelihoods) {
  return std::exp(-python_mean(loglikelihoods));
}

double sample_stddev(const std::vector<double>& xs) {
  MTNLG_CHECK_GE(xs.size(), 2u);
  const double mu = python_mean(xs);
  double ss = 0;
  for (const double x : xs) ss += (x - mu) * (x - mu);
  return std::sqrt(ss / static_cast<double>(xs.size() - 1));
}

double bootstrap_stderr(const std::function<double(const std::vector<double>&)>& f,
                        const std::vector<double>& xs, int64_t iters) {
  if (iters < 2)
    throw invalid_argument("bootstrap iterations must be at least 2 (0: no standard error), not " +
                               std::to_string(iters),
                           "--bootstrap-iters");
  if (xs.empty()) throw invalid_argument("nothing to bootstrap", "--bootstrap-iters");
  const int64_t chunk = std::min<int64_t>(1000, iters), chunks = iters / chunk;
  const auto n = static_cast<int64_t>(xs.size());
  const double nf = static_cast<double>(n);
  std::vector<double> res(static_cast<size_t>(chunks * chunk));
#pragma omp parallel
  {
    std::vector<double> sample(static_cast<size_t>(n));
#pragma omp for schedule(dynamic, 1)
    for (int64_t i = 0; i < chunks; ++i) {
      PythonRandom rnd(static_cast<uint64_t>(i));
      for (int64_t r = 0; r < chunk; ++r) {
        for (double& s : sample) s = xs[static_cast<size_t>(std::floor(rnd.random() * nf))];
        res[static_cast<size_t>(i * chunk + r)] = f(sample);
      }
    }
  }
  return sample_stddev(res);
}

}  // namespace mtnlg::tasks
