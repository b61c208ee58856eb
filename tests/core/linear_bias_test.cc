// Backend::linear_bias_forward's default (the CPU backend's): exactly gemm_weight, add_bias and,
// with an output for it, gelu_forward, bit for bit, in f32 and bf16, for 2-D and 3-D inputs.
#include <catch2/catch.hpp>

#include "core/backend.h"
#include "kernel_check.h"

using namespace mtnlg;
using namespace mtnlg::test;

TEST_CASE("linear_bias_forward is gemm_weight, add_bias and gelu_forward, bit for bit") {
  const DType dt = GENERATE(DType::kF32, DType::kBF16);
  const Activation act = GENERATE(Activation::kGelu, Activation::kGeluTanh);
  auto be = make_cpu_backend(2);
  const Tensor x = random_tensor({2, 13, 24}, dt, 1), w = random_tensor({40, 24}, dt, 2);
  const Tensor bias = random_tensor({40}, dt, 3);

  Tensor want = Tensor::cpu({26, 40}, dt), want_act = Tensor::cpu({2, 13, 40}, dt);
  be->gemm_weight(want, x.as_2d(), w, true, 1.0, 0.0);
  be->add_bias(want, bias);
  Tensor want3 = want.view({2, 13, 40});
  be->gelu_forward(want_act, want3, act);

  Tensor y = Tensor::cpu({2, 13, 40}, dt), g = Tensor::cpu({2, 13, 40}, dt);
  be->linear_bias_forward(y, x, w, bias, &g, act);
  CHECK(bitwise_equal(y.as_2d(), want));
  CHECK(bitwise_equal(g, want_act));

  Tensor y2 = Tensor::cpu({26, 40}, dt);
  be->linear_bias_forward(y2, x.as_2d(), w, bias, nullptr, act);
  CHECK(bitwise_equal(y2, want));
}
