// CpuBackend: memory, copies, the GEMMs and attention, whose kernels are in several files; every
// other operation is defined beside its kernels (core/cpu/<family>_cpu.cc, docs/backend.md).
#include "core/cpu/cpu_backend.h"

#include <cblas.h>
#include <omp.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <sstream>
#include <utility>

#include "core/backend_checks.h"
#include "core/cpu/attention_bf16.h"
#include "core/cpu/kernels_cpu.h"
#include "core/dtype_dispatch.h"

namespace mtnlg {
namespace {

void check_tensor(const Tensor& t, const char* op, const char* what) {
  MTNLG_CHECK_MSG(t.defined(), op << ": " << what << " is undefined");
  MTNLG_CHECK_MSG(t.device() == Device::kCPU, op << ": " << what << " is " << t.str());
}

}  // namespace

CpuBackend::CpuBackend(int threads)
    : threads_(threads > 0 ? threads : omp_get_num_procs()),
      matmul_bf16_(std::make_unique<cpu::MatmulBf16>(
          [this](int64_t bytes) { return alloc({(bytes + 1) / 2}, DType::kBF16); })) {
  // OpenBLAS only ever runs single-threaded inside our OpenMP regions (gemm_cpu.cc says why).
  // The setting is process-wide and the same for every CpuBackend, so concurrent instances agree.
  openblas_set_num_threads(1);
  enter();
}

void CpuBackend::enter() const {
  omp_set_num_threads(threads_);
}

std::string CpuBackend::name() const {
  return "cpu(" + std::to_string(threads_) + " threads)";
}

Tensor CpuBackend::do_alloc(const Shape& shape, DType dtype) {
  // Tensor::cpu's layout (64-byte aligned, zero-filled), with a deleter that also uncounts.
  const size_t bytes = static_cast<size_t>(shape_numel(shape)) * dtype_size(dtype);
  const size_t rounded = (bytes + 63) / 64 * 64;
  std::unique_ptr<void, decltype(&std::free)> p(rounded ? std::aligned_alloc(64, rounded) : nullptr,
                                                &std::free);
  if (rounded && !p) throw std::bad_alloc();
  if (p) std::memset(p.get(), 0, rounded);
  auto storage = std::make_shared<Storage>(
      p.get(), bytes, Device::kCPU, [counter = counter_, n = static_cast<int64_t>(bytes)](void* q) {
        std::free(q);
        counter->freed(n);
      });
  p.release();
  counter_->allocated(static_cast<int64_t>(bytes));
  return Tensor(std::move(storage), 0, shape, dtype);
}

int64_t CpuBackend::live_bytes() const {
  return counter_->live();
}
int64_t CpuBackend::peak_bytes() const {
  return counter_->peak();
}
void CpuBackend::reset_peak() {
  counter_->reset_peak();
}

void CpuBackend::do_copy(Tensor& dst, const Tensor& src) {
  enter();
  guard_write(dst, "copy");
  check_tensor(dst, "copy", "dst");
  check_tensor(src, "copy", "src");
  MTNLG_CHECK_MSG(dst.numel() == src.numel(), "copy: dst " << dst.str() << ", src " << src.str());
  if (dst.dtype() == src.dtype()) {
    if (dst.data() != src.data()) std::memmove(dst.data(), src.data(), src.nbytes());
  } else if (dst.dtype() == DType::kF32 && src.dtype() == DType::kF64) {
    cpu::convert(dst.data_as<float>(), src.data_as<double>(), src.numel());
  } else if (dst.dtype() == DType::kF64 && src.dtype() == DType::kF32) {
    cpu::convert(dst.data_as<double>(), src.data_as<float>(), src.numel());
  } else if (dst.dtype() == DType::kBF16 && src.dtype() == DType::kF32) {
    // fp32 master weights re-rounded to the bf16 model weights after each step.
    cpu::narrow_all(dst.data_as<Bf16>(), src.data_as<float>(), src.numel());
  } else if (dst.dtype() == DType::kF32 && src.dtype() == DType::kBF16) {
    cpu::widen_all(dst.data_as<float>(), src.data_as<Bf16>(), src.numel());
  } else if (dst.dtype() == DType::kBF16 && src.dtype() == DType::kF64) {
    // Host-drawn initial weights: through fp32, so a bf16 model starts from the fp32 model's
    // weights rounded.
    cpu::convert(dst.data_as<Bf16>(), src.data_as<double>(), src.numel());
  } else if (dst.dtype() == DType::kF64 && src.dtype() == DType::kBF16) {
    cpu::convert(dst.data_as<double>(), src.data_as<Bf16>(), src.numel());
  } else if (dst.dtype() == DType::kF16 && src.dtype() == DType::kF32) {
    cpu::narrow_all(dst.data_as<F16>(), src.data_as<float>(), src.numel());
  } else if (dst.dtype() == DType::kF32 && src.dtype() == DType::kF16) {
    cpu::widen_all(dst.data_as<float>(), src.data_as<F16>(), src.numel());
  } else if (dst.dtype() == DType::kF16 && src.dtype() == DType::kF64) {
    cpu::convert(dst.data_as<F16>(), src.data_as<double>(), src.numel());
  } else if (dst.dtype() == DType::kF64 && src.dtype() == DType::kF16) {
    cpu::convert(dst.data_as<double>(), src.data_as<F16>(), src.numel());
  } else {
    throw unsupported(std::string("CPU backend: copy from ") + dtype_name(src.dtype()) + " to " +
                          dtype_name(dst.dtype()) +
                          " is not supported (same dtype, or between f32, f64 and bf16 or f16)",
                      "copy");
  }
}

void CpuBackend::do_end_frozen_weights() {
  held_.clear();
  matmul_bf16_->end_weights_window();
}

void CpuBackend::do_hold_weight(const Tensor& w) {
  const auto* begin = static_cast<const char*>(w.data());
  held_.emplace_back(begin, begin + w.nbytes());
}

void CpuBackend::guard_write(const Tensor& t, const char* op) const {
  if (frozen_window() == 0 || !t.defined()) return;
  const auto* begin = static_cast<const char*>(t.data());
  const char* end = begin + t.nbytes();
  const bool held = std::any_of(held_.begin(), held_.end(),
                                [&](const auto& r) { return begin < r.second && r.first < end; });
  MTNLG_CHECK_MSG(!held && !matmul_bf16_->holds_weight(begin, end),
                  op << " writes " << t.str()
                     << ", a weight held reordered inside a frozen-weights window: weights may "
                        "change only after the window (FrozenWeights) closes");
}

void CpuBackend::do_gemm(Tensor& c, const Tensor& a, bool trans_a, const Tensor& b, bool trans_b,
                         double alpha, double beta) {
  gemm_impl(c, a, trans_a, b, trans_b, alpha, beta, false);
}

void CpuBackend::do_gemm_weight(Tensor& c, const Tensor& a, const Tensor& w, bool trans_w,
                                double alpha, double beta) {
  gemm_impl(c, a, false, w, trans_w, alpha, beta, frozen_window() != 0);
}

void CpuBackend::gemm_impl(Tensor& c, const Tensor& a, bool trans_a, const Tensor& b, bool trans_b,
                           double alpha, double beta, bool b_weight) {
  enter();
  guard_write(c, "gemm");
  // Shapes, devices and the dtype pairing: checked by Backend's front (check_gemm).
  const Tensor a2 = a.as_2d(), b2 = b.as_2d();
  const int64_t m = trans_a ? a2.dim(1) : a2.dim(0), k = trans_a ? a2.dim(0) : a2.dim(1);
  const int64_t n = trans_b ? b2.dim(0) : b2.dim(1);
  if (a.dtype() == DType::kBF16) {
    // bf16 operands, fp32 sums, an fp32 or bf16 result (oneDNN; AMX on this CPU).
    matmul_bf16_->run(c.data(), c.dtype() == DType::kBF16, static_cast<const uint16_t*>(a.data()),
                      trans_a, static_cast<const uint16_t*>(b.data()), trans_b, m, n, k,
                      static_cast<float>(alpha), static_cast<float>(beta), b_weight);
    return;
  }
  if (a.dtype() == DType::kF16) {
    // fp16 operands, fp32 products and sums: widened and run through the fp32 GEMM (oneDNN's
    // fp16 matmul needs AVX512-FP16, which this CPU family lacks). fp16 is the GPU's format;
    // on the CPU it is here for correctness and tests, bf16 is the fast path.
    Tensor a32 = Tensor::cpu(a.shape(), DType::kF32), b32 = Tensor::cpu(b.shape(), DType::kF32);
    copy(a32, a);
    copy(b32, b);
    Tensor c32 = c;
    if (c.dtype() == DType::kF16) {
      c32 = Tensor::cpu(c.shape(), DType::kF32);
      if (beta != 0.0) copy(c32, c);
    }
    cpu::gemm(c32.data_as<float>(), a32.data_as<float>(), trans_a, b32.data_as<float>(), trans_b, m,
              n, k, static_cast<float>(alpha), static_cast<float>(beta));
    if (c.dtype() == DType::kF16) copy(c, c32);
    return;
  }
  dispatch_dtype<DTypeSet::kWide>(Device::kCPU, c.dtype(), "gemm", [&](auto z) {
    using T = decltype(z);
    cpu::gemm(c.data_as<T>(), a.data_as<T>(), trans_a, b.data_as<T>(), trans_b, m, n, k,
              static_cast<T>(alpha), static_cast<T>(beta));
  });
}

void CpuBackend::do_attention_forward(Tensor& out, Tensor& stats, const Tensor& qkv, int64_t heads,
                                      double dropout_p, RngStream rng) {
  enter();
  const int64_t b = qkv.dim(0), s = qkv.dim(1), hd = qkv.dim(2) / (3 * heads);  // checked
  if (qkv.dtype() == DType::kBF16) {
    cpu::attention_forward_bf16(*matmul_bf16_, out.data_as<Bf16>(), stats.data_as<float>(),
                                qkv.data_as<Bf16>(), b, s, heads, hd, static_cast<float>(dropout_p),
                                rng);
    return;
  }
  dispatch_dtype(Device::kCPU, qkv.dtype(), "attention_forward", [&](auto z) {
    using T = decltype(z);
    cpu::attention_forward(out.data_as<T>(), stats.data_as<acc_t<T>>(), qkv.data_as<T>(), b, s,
                           heads, hd, static_cast<float>(dropout_p), rng);
  });
}

void CpuBackend::do_attention_backward(Tensor& dqkv, const Tensor& dout, const Tensor& qkv,
                                       const Tensor& out, const Tensor& stats, int64_t heads,
                                       double dropout_p, RngStream rng) {
  enter();
  const int64_t b = qkv.dim(0), s = qkv.dim(1), hd = qkv.dim(2) / (3 * heads);  // checked
  (void)out;  // not read here (whole rows are recomputed)
  if (qkv.dtype() == DType::kBF16) {
    cpu::attention_backward_bf16(*matmul_bf16_, dqkv.data_as<Bf16>(), dout.data_as<Bf16>(),
                                 qkv.data_as<Bf16>(), stats.data_as<float>(), b, s, heads, hd,
                                 static_cast<float>(dropout_p), rng);
    return;
  }
  dispatch_dtype(Device::kCPU, qkv.dtype(), "attention_backward", [&](auto z) {
    using T = decltype(z);
    cpu::attention_backward(dqkv.data_as<T>(), dout.data_as<T>(), qkv.data_as<T>(),
                            stats.data_as<acc_t<T>>(), b, s, heads, hd,
                            static_cast<float>(dropout_p), rng);
  });
}

std::unique_ptr<Backend> make_cpu_backend(int threads) {
  return std::make_unique<CpuBackend>(threads);
}

}  // namespace mtnlg
