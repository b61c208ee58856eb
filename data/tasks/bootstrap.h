// lm-evaluation-harness's bootstrapped standard error (lm_eval/api/metrics.py bootstrap_stderr at
// 4e7e0d47), which it reports for `perplexity` (LAMBADA): iters // chunk resamples in chunks of
// chunk = min(1000, iters), chunk i drawn from random.Random(i) as
// `f(rnd.choices(xs, k=len(xs)))` (each index floor(random() * n)), and the sample standard
// deviation (n - 1) of all of them. The same numbers as the harness's multiprocessing pool and
// its DISABLE_MULTIPROC loop (both keep the chunks in order).
//
// Sums are Python 3.11's sum(): left to right in double. Python 3.12 sums floats with
// compensation, which moves the last bits of a result (about 1e-15 relative), not more.
// Chunks run in parallel (OpenMP); the result does not depend on the thread count.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

namespace mtnlg::tasks {

// mean(arr): sum(arr) / len(arr).
double python_mean(const std::vector<double>& xs);
// perplexity(items): math.exp(-mean(items)).
double perplexity_of(const std::vector<double>& loglikelihoods);
// sample_stddev(arr): sqrt(sum((x - mean)^2) / (n - 1)), n >= 2.
double sample_stddev(const std::vector<double>& xs);

// bootstrap_stderr(f, xs, iters). Throws invalid_argument for iters < 2 (the harness divides by
// iters - 1; 0 means no standard error, which callers decide before calling) or an empty xs.
double bootstrap_stderr(const std::function<double(const std::vector<double>&)>& f,
                        const std::vector<double>& xs, int64_t iters);

}  // namespace mtnlg::tasks
