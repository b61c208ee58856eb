// The whole GPT (f64 and f32) against an independent float64 PyTorch GPT-2
// (tests/reference/gpt2_torch_reference.py): loss and every gradient, through the HF import
// and export of checkpoint/hf_import.h.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <memory>

#include "checkpoint/hf_import.h"
#include "model/gpt_params.h"
#include "test_util.h"

namespace mtnlg {
namespace {

struct Case {
  int64_t layers;
  Activation act;
};

GPTConfig config_for(const Case& c) {
  GPTConfig g;
  g.num_layers = c.layers;
  g.hidden = 32;
  g.heads = 4;
  g.ffn = 128;
  g.seq = 16;
  g.max_positions = 24;
  g.vocab = 300;  // padded to 384: the padded logits columns and wte rows are exercised
  g.padded_vocab = 384;
  g.activation = c.act;
  return g;
}
constexpr int64_t kBatch = 2;

// Runs the reference script into `dir`; the test fails if it does not exit 0.
void run_reference(const GPTConfig& g, const test::TempDir& dir) {
  const std::string cmd =
      "/usr/bin/python3 " + test::source_path("tests/reference/gpt2_torch_reference.py") +
      " --layers " + std::to_string(g.num_layers) + " --hidden " + std::to_string(g.hidden) +
      " --heads " + std::to_string(g.heads) + " --seq " + std::to_string(g.seq) + " --vocab " +
      std::to_string(g.vocab) + " --max-positions " + std::to_string(g.max_positions) +
      " --batch " + std::to_string(kBatch) + " --seed 1234 --activation " +
      (g.activation == Activation::kGelu ? "gelu" : "gelu_tanh") + " --out " + dir.path().string();
  INFO(cmd);
  REQUIRE(std::system(cmd.c_str()) == 0);
}

struct Errors {
  double max_rel = 0.0;  // over tensors: max |ours - ref| / max |ref|
  std::string worst;
};

// Loads the reference weights into a `dtype` model, runs forward + backward on the reference
// tokens, checks the mean loss to `loss_tol` (relative) and every gradient to `grad_tol`
// relative to its tensor's largest reference entry.
Errors check_against_reference(const GPTConfig& g, const test::TempDir& dir, DType dtype,
                               double loss_tol, double grad_tol) {
  auto be = make_cpu_backend(1);
  GPTStage model(g, full_model(g), *be, dtype, 1);
  load_hf_gpt2(model, dir.file("weights.safetensors"));
  const SafetensorsFile tokens(dir.file("tokens.safetensors"));
  const SafetensorsFile ref(dir.file("reference.safetensors"));
  const Tensor inputs = tokens.read("inputs", DType::kI32);
  const Tensor targets = tokens.read("targets", DType::kI32);
  REQUIRE(inputs.shape() == Shape{kBatch, g.seq});

  StageActivations acts = model.make_activations(kBatch);
  const double n = static_cast<double>(kBatch * g.seq);
  const double loss = model.forward(acts, inputs, targets, 0) / n;
  model.backward(acts, Tensor(), 1.0 / n);

  const double ref_loss = ref.read("loss", DType::kF64).data_as<double>()[0];
  INFO("loss " << loss << " reference " << ref_loss);
  CHECK(std::abs(loss - ref_loss) <= loss_tol * std::abs(ref_loss));

  Errors errors;
  const auto grads = to_hf_gpt2(model, true);
  CHECK(grads.size() == ref.entries().size() - 1);  // every reference gradient is compared
  for (const HFTensor& ours : grads) {
    const Tensor want = ref.read(ours.name, DType::kF64);
    const Tensor got = [&] {
      Tensor t = Tensor::cpu(ours.tensor.shape(), DType::kF64);
      be->copy(t, ours.tensor);
      return t;
    }();
    REQUIRE(got.shape() == want.shape());
    double scale = 0.0, err = 0.0;
    for (int64_t i = 0; i < want.numel(); ++i) {
      scale = std::max(scale, std::abs(want.data_as<double>()[i]));
      err = std::max(err, std::abs(got.data_as<double>()[i] - want.data_as<double>()[i]));
    }
    REQUIRE(scale > 0.0);  // every parameter gets a gradient: no path is dead
    const double rel = err / scale;
    INFO(ours.name << ": max error " << err << " of max |grad| " << scale);
    CHECK(rel <= grad_tol);
    if (rel > errors.max_rel) errors = {rel, ours.name};
  }
  return errors;
}

// float32 tolerances. Our f32 model rounds the f64 weights (relative 6e-8 each) and runs every
// kernel in f32 (unit roundoff u = 6e-8); sums of length k carry about sqrt(k) u relative error,
// k <= 384 (a logits row) or b*s = 32 (weight gradients), so ~1e-6 relative to a tensor's
// largest gradient; measured worst is 6e-7 (a LayerNorm gain). 1e-5 leaves a decade of margin
// and is still orders of magnitude below what a wrong gradient (error ~ its size) produces.
constexpr double kF32LossTol = 1e-5;
constexpr double kF32GradTol = 1e-5;

TEST_CASE("2-layer GPT (exact gelu) matches PyTorch: f64 exactly - f32 within its precision") {
  const GPTConfig g = config_for({2, Activation::kGelu});
  test::TempDir dir;
  run_reference(g, dir);
  const Errors e64 = check_against_reference(g, dir, DType::kF64, 1e-10, 1e-9);
  WARN("f64 worst gradient " << e64.worst << " relative error " << e64.max_rel);
  const Errors e32 = check_against_reference(g, dir, DType::kF32, kF32LossTol, kF32GradTol);
  WARN("f32 worst gradient " << e32.worst << " relative error " << e32.max_rel);
}

TEST_CASE("3-layer GPT (tanh gelu) matches PyTorch: f64 exactly - f32 within its precision") {
  const GPTConfig g = config_for({3, Activation::kGeluTanh});
  test::TempDir dir;
  run_reference(g, dir);
  check_against_reference(g, dir, DType::kF64, 1e-10, 1e-9);
  check_against_reference(g, dir, DType::kF32, kF32LossTol, kF32GradTol);
}

}  // namespace
}  // namespace mtnlg
