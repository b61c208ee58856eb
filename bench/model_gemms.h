// The GEMMs one GPT training step issues through Backend::gemm, by name and shape, as
// model/linear.cc and model/gpt_stage.cc call them (weights are [out, in], y = x W^T + b):
//
//   forward      y[n, out]  = x[n, in] @ W[out, in]^T        NT  m=n    n=out k=in
//   input grad   dx[n, in]  = dy[n, out] @ W[out, in]        NN  m=n    n=in  k=out
//   weight grad  dW[out, in] += dy[n, out]^T @ x[n, in]      TN  m=out  n=in  k=n   (beta 1)
//
// for qkv (h -> 3h), dense (h -> h), fc1 (h -> f), fc2 (f -> h) per layer and the tied LM head
// (h -> V_pad), with n = b * s tokens. Attention's own batched products run inside
// attention_forward/backward and are not listed. Pure functions; thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace mtnlg::bench {

struct GemmShape {
  std::string label;  // e.g. "fc1 fwd", "head dW"
  bool trans_a = false;
  bool trans_b = false;
  int64_t m = 0, n = 0, k = 0;
  double beta = 0.0;

  double flops() const { return 2.0 * static_cast<double>(m) * static_cast<double>(n) * k; }
};

// tokens = b * s of one micro-batch; ffn = f; vocab = the padded vocabulary.
std::vector<GemmShape> model_gemms(int64_t tokens, int64_t hidden, int64_t ffn, int64_t vocab);

// The label of the first entry of `shapes` with these transposes and sizes, or "".
std::string gemm_label(const std::vector<GemmShape>& shapes, bool trans_a, bool trans_b, int64_t m,
                       int64_t n, int64_t k);

}  // namespace mtnlg::bench
