// The LSH banding of MinHash signatures: b bands of r rows (b * r <= num_perm); two documents are
// candidates when all r values of some band agree, which happens with probability
// 1 - (1 - s^r)^b for Jaccard similarity s.
//
// optimal_lsh_params is datasketch's _optimal_param(threshold, num_perm, fp_weight, fn_weight):
// over b = 1..num_perm and r = 1..num_perm / b, in that order, the first (b, r) with the least
// fp_weight * FP + fn_weight * FN, where FP = the integral of 1 - (1 - s^r)^b over [0, threshold]
// and FN = the integral of (1 - s^r)^b over [threshold, 1]. datasketch integrates with
// scipy's quad (adaptive Gauss-Kronrod); the integrands are polynomials of degree b * r, which a
// Gauss-Legendre rule of num_perm / 2 + 1 points integrates exactly, so the two agree to
// rounding. tests/curate checks the choices against exact rational integrals in Python.
#pragma once

#include <utility>

namespace mtnlg::curate {

struct LshParams {
  int bands = 0, rows = 0;
};

LshParams optimal_lsh_params(double threshold, int num_perm, double fp_weight = 0.5,
                             double fn_weight = 0.5);

// The false positive and false negative areas of one (b, r) at `threshold`.
std::pair<double, double> lsh_error_areas(double threshold, int bands, int rows);

}  // namespace mtnlg::curate
