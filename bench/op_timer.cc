#include "bench/op_timer.h"

#include <sstream>

namespace mtnlg::bench {

void OpTimer::begin(const OpCall&) {
  start_ = Clock::now();
}

void OpTimer::end(const OpCall& call) noexcept {
  try {
    backend_.synchronize();
    const double seconds = std::chrono::duration<double>(Clock::now() - start_).count();
    std::string key = call.category;
    double flops = 0.0;
    if (call.a != nullptr && call.b != nullptr && call.c == nullptr) {
      // A GEMM (or a linear layer's, timed as its GEMM): keyed by shape and transposes.
      const Tensor a2 = call.a->as_2d(), b2 = call.b->as_2d();
      const int64_t m = call.trans_a ? a2.dim(1) : a2.dim(0);
      const int64_t k = call.trans_a ? a2.dim(0) : a2.dim(1);
      const int64_t n = call.trans_b ? b2.dim(0) : b2.dim(1);
      std::ostringstream os;
      os << call.category << ' ' << (call.trans_a ? 'T' : 'N') << (call.trans_b ? 'T' : 'N')
         << " m=" << m << " n=" << n << " k=" << k;
      if (labeler_) {
        const std::string label = labeler_(call.trans_a, call.trans_b, m, n, k);
        if (!label.empty()) os << " (" << label << ")";
      }
      key = os.str();
      flops = 2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k);
    } else if (call.a != nullptr && call.b != nullptr && call.c != nullptr) {
      // Attention: model FLOPs of its [s, s] products over the full square, as the model count
      // has them (QK^T and PV: 2 * 2 * b * heads * s * s * hd forward, twice that backward;
      // backward's recomputed scores are not model FLOPs). a = qkv, b = out or dout, c = stats.
      const bool backward = std::string(call.name) == "attention_backward";
      const int64_t heads = call.c->dim(1);
      flops = (backward ? 8.0 : 4.0) * static_cast<double>(call.c->numel()) *
              static_cast<double>(call.a->dim(1)) * static_cast<double>(call.b->dim(-1) / heads);
    }
    OpTiming& t = timings_[phase_ + "/" + key];
    ++t.calls;
    t.seconds += seconds;
    t.flops += flops;
  } catch (...) {  // a report must not turn a failing operation into std::terminate
  }
}

}  // namespace mtnlg::bench
