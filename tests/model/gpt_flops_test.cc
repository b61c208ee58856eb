// model/gpt_flops.h, the one FLOP count: its closed forms (the paper's 72/96 s l h^2 (...)) and
// its reading as 6N + 12 l h s with N the GEMM weights counted from a real parameter registry.
#include "model/gpt_flops.h"

#include <catch2/catch.hpp>
#include <string_view>

#include "model/gpt_params.h"
#include "model/param_registry.h"

namespace mtnlg {
namespace {

TEST_CASE("model FLOPs: the paper's closed forms and 6N + 12 l h s") {
  GPTConfig c;
  c.num_layers = 3;
  c.hidden = 64;
  c.heads = 4;
  c.ffn = 256;  // 4h: the closed forms assume it
  c.seq = 48;
  c.max_positions = 48;
  c.vocab = 1000;
  c.padded_vocab = 1024;
  const double l = 3, h = 64, s = 48, V = 1024;
  CHECK(model_flops_per_token(c, false) ==
        Approx(72 * l * h * h * (1 + s / (6 * h) + V / (12 * l * h))).epsilon(1e-14));
  CHECK(model_flops_per_token(c, true) ==
        Approx(96 * l * h * h * (1 + s / (6 * h) + V / (16 * l * h))).epsilon(1e-14));

  // N: every GEMM weight matrix of the registry (the 2-D "layers.*" weights) plus the tied
  // head, which is the word embedding over the padded vocabulary.
  ParamRegistry registry;
  register_gpt_params(registry, c, full_model(c));
  double n = 0;
  for (const Param& p : registry.params()) {
    const std::string_view name(p.spec.name);
    if (name.starts_with("layers.") && p.spec.global_shape.size() == 2)
      n += static_cast<double>(shape_numel(p.spec.global_shape));
    if (name == "embedding.word_embeddings.weight")
      n += static_cast<double>(shape_numel(p.spec.global_shape));
  }
  CHECK(n == 12 * l * h * h + V * h);
  CHECK(model_flops_per_token(c, false) == Approx(6 * n + 12 * l * h * s).epsilon(1e-14));

  // ffn != 4h: each GEMM counted at its size.
  c.ffn = 100;
  CHECK(model_flops_per_token(c, false) ==
        Approx(3 * l * (2 * h * (4 * h + 2 * 100) + 4 * s * h) + 6 * h * V).epsilon(1e-14));
}

}  // namespace
}  // namespace mtnlg
