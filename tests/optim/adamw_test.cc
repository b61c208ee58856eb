#include <catch2/catch.hpp>

#include <chrono>
#include <cmath>
#include <thread>

#include "core/kernels/bf16_math.h"
#include "optim/adamw.h"
#include "parallel/gloo_communicator.h"
#include "parallel/store.h"

using namespace mtnlg;

namespace {

struct Fixture {
  std::unique_ptr<Backend> be = make_cpu_backend(1);
  ParamRegistry reg;
  Fixture() {
    reg.add({"w", {2, 2}, {}, 0, false, 0.0, 0.0});
    reg.add({"b", {2}, {}, -1, true, 0.0, 0.0});
    reg.allocate(*be, DType::kF64);
    double* w = reg.get("w").value.data_as<double>();
    double* gw = reg.get("w").grad.data_as<double>();
    double* b = reg.get("b").value.data_as<double>();
    double* gb = reg.get("b").grad.data_as<double>();
    for (int i = 0; i < 4; ++i) {
      w[i] = 1.0 + i;
      gw[i] = 0.5 * (i + 1);
    }
    b[0] = 1.0;
    b[1] = -1.0;
    gb[0] = 3.0;
    gb[1] = -4.0;
  }
};

}  // namespace

TEST_CASE("global grad norm is the L2 norm over every parameter") {
  Fixture f;
  const double expect = std::sqrt(0.25 + 1.0 + 2.25 + 4.0 + 9.0 + 16.0);
  CHECK(global_grad_norm(*f.be, f.reg) == Approx(expect).epsilon(1e-15));
}

TEST_CASE("clip coefficient") {
  CHECK(clip_coefficient(0.5, 1.0) == 1.0);
  CHECK(clip_coefficient(4.0, 1.0) == Approx(1.0 / (4.0 + 1e-6)));
  CHECK(clip_coefficient(4.0, 0.0) == 1.0);  // clipping off
}

TEST_CASE("AdamW first step - weight decay only where the spec allows it") {
  Fixture f;
  OptimizerConfig cfg;
  cfg.beta1 = 0.9;
  cfg.beta2 = 0.95;
  cfg.eps = 1e-8;
  cfg.weight_decay = 0.1;
  AdamW opt(f.reg, *f.be, cfg);
  opt.step(0.01, 0.5);
  // Step 1: mhat = g, vhat = g^2, so the Adam direction is sign(g) * |g| / (|g| + eps).
  const double* w = f.reg.get("w").value.data_as<double>();
  for (int i = 0; i < 4; ++i) {
    const double g = 0.5 * (i + 1) * 0.5;
    const double p0 = 1.0 + i;
    CHECK(w[i] == Approx(p0 - 0.01 * (g / (g + 1e-8) + 0.1 * p0)).epsilon(1e-12));
  }
  const double* b = f.reg.get("b").value.data_as<double>();
  CHECK(b[0] == Approx(1.0 - 0.01 * (1.5 / (1.5 + 1e-8))).epsilon(1e-12));   // no decay
  CHECK(b[1] == Approx(-1.0 + 0.01 * (2.0 / (2.0 + 1e-8))).epsilon(1e-12));  // no decay
  CHECK(opt.steps() == 1);
}

TEST_CASE("AdamW bias correction over two steps matches the formula") {
  Fixture f;
  OptimizerConfig cfg;
  cfg.beta1 = 0.8;
  cfg.beta2 = 0.9;
  cfg.eps = 1e-6;
  cfg.weight_decay = 0.0;
  AdamW opt(f.reg, *f.be, cfg);
  opt.step(0.1, 1.0);
  opt.step(0.1, 1.0);  // same gradient twice
  const double g = 3.0, p0 = 1.0;
  double m = 0.2 * g, v = 0.1 * g * g, p = p0;
  p -= 0.1 * (m / 0.2) / (std::sqrt(v / 0.1) + 1e-6);
  m = 0.8 * m + 0.2 * g;
  v = 0.9 * v + 0.1 * g * g;
  p -= 0.1 * (m / (1 - 0.64)) / (std::sqrt(v / (1 - 0.81)) + 1e-6);
  CHECK(f.reg.get("b").value.data_as<double>()[0] == Approx(p).epsilon(1e-12));
}

TEST_CASE("global grad norm with a tensor group counts shards over the group, replicated once") {
  // Two tensor ranks as threads: "w" is a dim-0 shard (each rank holds 2 of 4 rows), "b" is
  // replicated (the same gradient on both ranks).
  MemoryStore store;
  std::vector<double> norms(2);
  std::vector<std::thread> threads;
  for (int rank = 0; rank < 2; ++rank)
    threads.emplace_back([&, rank] {
      auto be = make_cpu_backend(1);
      ParamRegistry reg;
      reg.add({"w", {4, 2}, {2, 2}, 0, false, 0.0, 0.0, rank});
      reg.add({"b", {2}, {}, -1, true, 0.0, 0.0});
      reg.allocate(*be, DType::kF64);
      for (int i = 0; i < 4; ++i) reg.get("w").grad.data_as<double>()[i] = rank * 4 + i;
      reg.get("b").grad.data_as<double>()[0] = 3.0;
      reg.get("b").grad.data_as<double>()[1] = -4.0;
      auto tensor =
          make_gloo_communicator(store, "tensor", rank, {0, 1}, std::chrono::milliseconds(20000));
      norms[rank] = global_grad_norm(*be, reg, tensor.get());
    });
  for (auto& t : threads) t.join();
  double expect = 25.0;  // b once
  for (int i = 0; i < 8; ++i) expect += i * i;
  CHECK(norms[0] == Approx(std::sqrt(expect)).epsilon(1e-15));
  CHECK(norms[1] == Approx(std::sqrt(expect)).epsilon(1e-15));
}

TEST_CASE(
    "bf16 values: AdamW updates fp32 masters exactly as fp32 AdamW - values are them rounded") {
  auto be = make_cpu_backend(1);
  OptimizerConfig cfg;
  cfg.lr = 1e-2;
  cfg.weight_decay = 0.1;
  ParamRegistry full, mixed;
  for (ParamRegistry* reg : {&full, &mixed}) {
    reg->add({"w", {3, 5}, {3, 5}, -1, false, 0.0, 0.0});
    reg->add({"b", {5}, {5}, -1, true, 0.0, 0.0});
  }
  full.allocate(*be, DType::kF32);
  mixed.allocate(*be, DType::kBF16, DType::kF32);
  // Start from bf16-representable values, so the masters (cloned from the bf16 values, as
  // Megatron does) start equal to the fp32 run's parameters.
  for (size_t p = 0; p < 2; ++p) {
    Tensor& v32 = full.params()[p].value;
    for (int64_t i = 0; i < v32.numel(); ++i)
      v32.data_as<float>()[i] = bf16_to_f32(f32_to_bf16(0.37f * static_cast<float>(i) - 1.1f));
    be->copy(mixed.params()[p].value, v32);
  }
  AdamW a32(full, *be, cfg), a16(mixed, *be, cfg);
  CHECK(a16.describe() == "AdamW with fp32 master weights");
  CHECK(a32.masters().empty());
  REQUIRE(a16.masters().size() == 2);
  CHECK(a16.state_bytes() == a32.state_bytes() + (15 + 5) * 4);
  for (int step = 0; step < 5; ++step) {
    for (size_t p = 0; p < 2; ++p) {
      Tensor& g32 = full.params()[p].grad;
      for (int64_t i = 0; i < g32.numel(); ++i)
        g32.data_as<float>()[i] = std::sin(0.7f * static_cast<float>(i + 13 * step)) * 0.01f;
      be->copy(mixed.params()[p].grad, g32);
    }
    CHECK(a16.grad_norm() == a32.grad_norm());
    a32.step(1e-2, 0.9);
    a16.step(1e-2, 0.9);
  }
  int64_t differ = 0;
  for (size_t p = 0; p < 2; ++p) {
    const Tensor& v32 = full.params()[p].value;
    const Tensor& master = a16.masters()[p];
    const auto* bits = static_cast<const uint16_t*>(mixed.params()[p].value.data());
    for (int64_t i = 0; i < v32.numel(); ++i) {
      differ += master.data_as<float>()[i] != v32.data_as<float>()[i];
      differ += bits[i] != f32_to_bf16(v32.data_as<float>()[i]);
    }
  }
  CHECK(differ == 0);
  // The masters are checkpoint state beside the moments.
  std::vector<std::string> names;
  for (const auto& s : a16.state()) names.push_back(s.name);
  CHECK(names == std::vector<std::string>{"exp_avg.w", "exp_avg_sq.w", "master.w", "exp_avg.b",
                                          "exp_avg_sq.b", "master.b"});
}

TEST_CASE("bf16 values need fp32 gradients") {
  auto be = make_cpu_backend(1);
  ParamRegistry reg;
  reg.add({"w", {4}, {4}, -1, false, 0.0, 0.0});
  reg.allocate(*be, DType::kBF16);  // bf16 gradients too
  CHECK_THROWS_WITH(AdamW(reg, *be, OptimizerConfig{}),
                    Catch::Contains("bf16 values and bf16 gradients; want f32 gradients"));
}
