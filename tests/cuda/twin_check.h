// Helpers for the CUDA tests: a CPU and a CUDA backend side by side, moving tensors between them,
// and the comparison of a CUDA result with its CPU twin within the dtype's tolerance.
#pragma once

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "core/backend.h"
#include "core/cuda/cuda_backend.h"
#include "tests/core/kernel_check.h"

namespace mtnlg::test {

struct Twin {
  std::unique_ptr<Backend> cpu = make_cpu_backend();
  std::unique_ptr<Backend> gpu = make_cuda_backend(0);

  Tensor dev(const Tensor& host) {
    Tensor d = gpu->alloc(host.shape(), host.dtype());
    gpu->copy(d, host);
    return d;
  }
  Tensor host(const Tensor& d) {
    Tensor h = Tensor::cpu(d.shape(), d.dtype());
    gpu->copy(h, d);
    return h;
  }
};

// Unit roundoff of the dtype the result is stored in.
inline double unit_roundoff(DType dt) {
  switch (dt) {
    case DType::kBF16:
      return 1.0 / 256;
    case DType::kF16:
      return 1.0 / 2048;
    case DType::kF64:
      return 1e-15;
    default:
      return 1.0 / (1 << 23);
  }
}

// How expect_close scales its bound beyond the element itself.
enum class Scale {
  kRms,  // the tensor's rms: results whose inputs were rounded near their own size
  // The tensor's largest element: long dot products whose operands were rounded (attention's
  // bf16 probabilities and softmax gradient): an output that cancels to 0.02 from terms of
  // about 1 carries the terms' rounding, not its own (measured on an H100: 0.0037 at s = 1100).
  kMax,
};

// |gpu - cpu| <= ulps * u * (|cpu| + scale(cpu)) element-wise: a few roundings of the stored
// format, relative to the element or (for values near zero after cancellation) to the tensor's
// scale. Reports the worst element.
inline void expect_close(const Tensor& gpu_result, const Tensor& cpu_result, double ulps,
                         const std::string& what, Scale scale = Scale::kRms) {
  REQUIRE(gpu_result.numel() == cpu_result.numel());
  const auto g = to_vec(gpu_result), c = to_vec(cpu_result);
  double ss = 0;
  for (double v : c) ss += v * v;
  double rms = c.empty() ? 0 : std::sqrt(ss / static_cast<double>(c.size()));
  if (scale == Scale::kMax) {
    rms = 0;
    for (double v : c) rms = std::max(rms, std::abs(v));
  }
  const double u = unit_roundoff(cpu_result.dtype());
  size_t worst = 0;
  double worst_ratio = 0;
  for (size_t i = 0; i < c.size(); ++i) {
    const double bound = ulps * u * (std::abs(c[i]) + rms) + 1e-300;
    const double ratio = std::abs(g[i] - c[i]) / bound;
    if (!(ratio <= worst_ratio)) {  // NaN counts as worst
      worst_ratio = ratio;
      worst = i;
    }
  }
  std::ostringstream os;
  os << what << " (" << dtype_name(cpu_result.dtype()) << "): worst element " << worst << " gpu "
     << (g.empty() ? 0 : g[worst]) << " cpu " << (c.empty() ? 0 : c[worst]) << ", " << worst_ratio
     << " of the bound (" << ulps << " ulps)";
  INFO(os.str());
  CHECK(worst_ratio <= 1.0);
}

// Attention forward then backward (dropout 0.1, one seed) twice on the same random bf16 inputs
// through the GPU backend's chosen kernels; checks that the second run's out, statistics and
// dqkv equal the first's bit for bit.
inline void check_attention_reruns_bitwise(Twin& tw, int64_t b, int64_t s, int64_t heads,
                                           int64_t hd) {
  const DType dt = DType::kBF16;
  const Tensor qkv = random_tensor({b, s, heads * 3 * hd}, dt, 1);
  const Tensor dout = random_tensor({b, s, heads * hd}, dt, 2);
  Tensor qg = tw.dev(qkv), dog = tw.dev(dout);
  std::vector<Tensor> runs;
  for (int r = 0; r < 2; ++r) {
    Tensor o = tw.gpu->alloc(dout.shape(), dt), st = tw.gpu->alloc({b, heads, s}, DType::kF32);
    tw.gpu->attention_forward(o, st, qg, heads, 0.1, RngStream{1, 2, 3});
    Tensor dq = tw.gpu->alloc(qkv.shape(), dt);
    tw.gpu->attention_backward(dq, dog, qg, o, st, heads, 0.1, RngStream{1, 2, 3});
    runs.push_back(tw.host(o));
    runs.push_back(tw.host(st));
    runs.push_back(tw.host(dq));
  }
  CHECK(bitwise_equal(runs[0], runs[3]));
  CHECK(bitwise_equal(runs[1], runs[4]));
  CHECK(bitwise_equal(runs[2], runs[5]));
}

}  // namespace mtnlg::test
