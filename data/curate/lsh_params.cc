#include "data/curate/lsh_params.h"

#include <cmath>
#include <limits>
#include <numbers>
#include <vector>

#include "core/status.h"

namespace mtnlg::curate {

namespace {

// Gauss-Legendre nodes and weights on [-1, 1]: the roots of P_n by Newton's method from
// Chebyshev guesses (exact for polynomials of degree <= 2n - 1).
struct GaussLegendre {
  std::vector<double> x, w;
  explicit GaussLegendre(int n) : x(static_cast<size_t>(n)), w(static_cast<size_t>(n)) {
    for (int i = 0; i < (n + 1) / 2; ++i) {
      double z = std::cos(std::numbers::pi * (i + 0.75) / (n + 0.5));
      double dp = 0;
      for (int iter = 0; iter < 100; ++iter) {
        double p0 = 1, p1 = z;  // P_0, P_1, then the recurrence up to P_n
        for (int k = 2; k <= n; ++k) {
          const double pk = ((2.0 * k - 1) * z * p1 - (k - 1.0) * p0) / k;
          p0 = p1;
          p1 = pk;
        }
        dp = n * (z * p1 - p0) / (z * z - 1);  // P_n'(z) from P_n and P_{n-1}
        const double step = p1 / dp;
        z -= step;
        if (std::abs(step) < 1e-16) break;
      }
      x[static_cast<size_t>(i)] = -z;
      x[static_cast<size_t>(n - 1 - i)] = z;
      w[static_cast<size_t>(i)] = w[static_cast<size_t>(n - 1 - i)] = 2 / ((1 - z * z) * dp * dp);
    }
  }
  template <typename F>
  double integrate(F&& f, double lo, double hi) const {
    const double half = (hi - lo) / 2, mid = (hi + lo) / 2;
    double sum = 0;
    for (size_t i = 0; i < x.size(); ++i) sum += w[i] * f(mid + half * x[i]);
    return sum * half;
  }
};

std::pair<double, double> areas(const GaussLegendre& gl, double t, int b, int r) {
  const auto miss = [&](double s) { return std::pow(1 - std::pow(s, r), b); };
  const double fp = gl.integrate([&](double s) { return 1 - miss(s); }, 0.0, t);
  const double fn = gl.integrate(miss, t, 1.0);
  return {fp, fn};
}

}  // namespace

std::pair<double, double> lsh_error_areas(double threshold, int bands, int rows) {
  return areas(GaussLegendre(bands * rows / 2 + 1), threshold, bands, rows);
}

LshParams optimal_lsh_params(double threshold, int num_perm, double fp_weight, double fn_weight) {
  if (!(threshold >= 0.0 && threshold <= 1.0))
    throw invalid_argument("--threshold must be in [0, 1], got " + std::to_string(threshold),
                           "--threshold");
  if (num_perm < 2) throw invalid_argument("--num-perm must be at least 2 for LSH", "--num-perm");
  const GaussLegendre gl(num_perm / 2 + 1);
  double best = std::numeric_limits<double>::infinity();
  LshParams opt;
  for (int b = 1; b <= num_perm; ++b)
    for (int r = 1; r <= num_perm / b; ++r) {
      const auto [fp, fn] = areas(gl, threshold, b, r);
      const double error = fp * fp_weight + fn * fn_weight;
      if (error < best) {
        best = error;
        opt = {b, r};
      }
    }
  return opt;
}

}  // namespace mtnlg::curate
