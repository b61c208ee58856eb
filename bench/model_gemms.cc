#include "bench/model_gemms.h"

namespace mtnlg::bench {

std::vector<GemmShape> model_gemms(int64_t tokens, int64_t hidden, int64_t ffn, int64_t vocab) {
  struct Linear {
    const char* name;
    int64_t in, out;
  };
  const Linear linears[] = {{"qkv", hidden, 3 * hidden},
                            {"dense", hidden, hidden},
                            {"fc1", hidden, ffn},
                            {"fc2", ffn, hidden},
                            {"head", hidden, vocab}};
  std::vector<GemmShape> shapes;
  for (const Linear& l : linears) {
    const std::string name = l.name;
    shapes.push_back({name + " fwd", false, true, tokens, l.out, l.in, 0.0});
    shapes.push_back({name + " dx", false, false, tokens, l.in, l.out, 0.0});
    shapes.push_back({name + " dW", true, false, l.out, l.in, tokens, 1.0});
  }
  return shapes;
}

std::string gemm_label(const std::vector<GemmShape>& shapes, bool trans_a, bool trans_b, int64_t m,
                       int64_t n, int64_t k) {
  for (const GemmShape& s : shapes) {
    if (s.trans_a == trans_a && s.trans_b == trans_b && s.m == m && s.n == n && s.k == k) {
      return s.label;
    }
  }
  return "";
}

}  // namespace mtnlg::bench
