// The harness's bootstrapped standard error of perplexity (data/tasks/bootstrap.h) against the
// same algorithm in Python (/usr/bin/python3 run by the test; skipped where it is missing):
// chunks of Random(i).choices, perplexity = exp(-mean), the sample standard deviation; equal to
// the bit for 100000 iterations (100 chunks), 1500 (one chunk of 1000) and 7 (one of 7), on 1
// and 2 threads; and the iterations it refuses.
#include "data/tasks/bootstrap.h"

#include <omp.h>

#include <catch2/catch.hpp>

#include <cstdlib>
#include <string>
#include <vector>

#include "core/status.h"
#include "tests/tasks/python_reference.h"

namespace mtnlg::tasks {
namespace {

TEST_CASE("bootstrap_stderr of perplexity is the harness's, bit for bit") {
  std::vector<double> lls;
  for (int i = 0; i < 37; ++i) lls.push_back(-0.25 - 0.37 * (i % 7) - 0.001 * i * i);
  std::string list;
  for (const double x : lls) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.17g,", x);
    list += buf;
  }
  const std::vector<int64_t> iters = {100000, 1500, 7};
  std::string program = "import math, random\nxs = [" + list + "]\n" + R"PY(
def mean(a):
    return sum(a) / len(a)
def perplexity(items):
    return math.exp(-mean(items))
def sample_stddev(a):
    mu = mean(a)
    return math.sqrt(sum([(x - mu) ** 2 for x in a]) / (len(a) - 1))
def bootstrap_stderr(f, xs, iters):
    res = []
    chunk = min(1000, iters)
    for i in range(iters // chunk):
        rnd = random.Random()
        rnd.seed(i)
        for _ in range(chunk):
            res.append(f(rnd.choices(xs, k=len(xs))))
    return sample_stddev(res)
)PY";
  for (const int64_t n : iters)
    program += "print(bootstrap_stderr(perplexity, xs, " + std::to_string(n) + ").hex())\n";
  const std::vector<std::string> want = words(python(program));
  REQUIRE(want.size() == iters.size());
  for (const int threads : {1, 2}) {
    omp_set_num_threads(threads);
    for (size_t k = 0; k < iters.size(); ++k) {
      const double got = bootstrap_stderr(perplexity_of, lls, iters[k]);
      INFO(iters[k] << " iterations, " << threads << " threads: " << got << " vs " << want[k]);
      CHECK(got == std::strtod(want[k].c_str(), nullptr));
      CHECK(got > 0);
    }
  }
  CHECK_THROWS_AS(bootstrap_stderr(perplexity_of, lls, 1), Error);
  CHECK_THROWS_AS(bootstrap_stderr(perplexity_of, {}, 100), Error);
}

}  // namespace
}  // namespace mtnlg::tasks
