#include "model/gpt_flops.h"

namespace mtnlg {

double model_flops_per_token(int64_t layers, int64_t hidden, int64_t ffn, int64_t seq,
                             int64_t padded_vocab, bool recompute) {
  const double l = static_cast<double>(layers), h = static_cast<double>(hidden);
  const double f = static_cast<double>(ffn), s = static_cast<double>(seq);
  const double V = static_cast<double>(padded_vocab);
  const double layer_forward = 2.0 * h * (4.0 * h + 2.0 * f) + 4.0 * s * h;
  const double head_forward = 2.0 * h * V;
  return (recompute ? 4.0 : 3.0) * l * layer_forward + 3.0 * head_forward;
}

}  // namespace mtnlg
