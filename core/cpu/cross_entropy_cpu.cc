// Softmax cross entropy over the first `vocab` of vp columns on the CPU, rows in parallel. Each
// row's max and sum of exponentials accumulate in acc_t<T> (float for bf16 logits); per-row losses
// are kept and added in row order in double, so the returned loss is the same for any thread count.
#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

#include "core/cpu/cpu_backend.h"
#include "core/cpu/id_checks.h"
#include "core/cpu/kernels_cpu.h"
#include "core/dtype_dispatch.h"
#include "core/kernels/vocab_shard_math.h"

namespace mtnlg::cpu {
namespace {

// An element as its accumulation type. bf16 widens in the loop itself (a shift, which GCC
// vectorizes), so its rows are read in place: a widened copy of each 50,304-column row cost a
// write and a read pass more than fp32 (the cross entropy was 1.5x fp32's time on AVX2 CPUs).
inline float value_of(float v) {
  return v;
}
inline double value_of(double v) {
  return v;
}
inline float value_of(Bf16 v) {
  return bf16_to_f32(v.bits);
}

// Element types read in place; the others (fp16 without F16C in the loop) are widened first.
template <typename T>
inline constexpr bool kReadInPlace = std::is_same_v<T, acc_t<T>> || std::is_same_v<T, Bf16>;

// A row's elements j < vocab as the kernels read them: in place, or a widened copy.
template <typename T>
class RowView {
 public:
  RowView(const T* p, int64_t n) : slot_(kReadInPlace<T> ? 0 : n), p_(p) {
    if constexpr (!kReadInPlace<T>) widen(slot_.data(), p, n);
  }
  auto get() const {
    if constexpr (kReadInPlace<T>) {
      return p_;
    } else {
      return static_cast<const acc_t<T>*>(slot_.data());
    }
  }

 private:
  SlotFor<T> slot_;
  const T* p_;
};

// max_j x[j] over j < vocab.
template <typename E, typename A>
A row_max(const E* x, int64_t vocab) {
  A mx = value_of(x[0]);
#pragma omp simd reduction(max : mx)
  for (int64_t j = 0; j < vocab; ++j) {
    const A v = value_of(x[j]);
    mx = v > mx ? v : mx;
  }
  return mx;
}

// logits: [n, vp], targets: [n] in [0, vocab), vocab <= vp
template <typename T>
double cross_entropy_forward(const T* logits, const int32_t* targets, int64_t n, int64_t vp,
                             int64_t vocab) {
  std::vector<double> row_loss(static_cast<size_t>(n));
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < n; ++r) {
    using A = acc_t<T>;
    const RowView<T> xv(logits + r * vp, vocab);
    const auto* x = xv.get();
    const A mx = row_max<std::remove_cv_t<std::remove_pointer_t<decltype(x)>>, A>(x, vocab);
    A sum = 0;
#pragma omp simd reduction(+ : sum)
    for (int64_t j = 0; j < vocab; ++j) sum += std::exp(value_of(x[j]) - mx);
    row_loss[static_cast<size_t>(r)] =
        static_cast<double>(std::log(sum) + mx - value_of(x[targets[r]]));
  }
  double total = 0.0;
  for (double l : row_loss) total += l;
  return total;
}

// dlogits may alias logits
template <typename T>
void cross_entropy_backward(T* dlogits, const T* logits, const int32_t* targets, int64_t n,
                            int64_t vp, int64_t vocab, acc_t<T> grad_scale) {
  using A = acc_t<T>;
  // Row r is read completely (max, sum) before any of it is written, so dlogits may be logits.
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < n; ++r) {
    // bf16: the row read in place (all of it before dlogits, which may alias it, is written),
    // p - 1 formed in fp32 and rounded once.
    const RowView<T> xv(logits + r * vp, vocab);
    const auto* x = xv.get();
    using E = std::remove_cv_t<std::remove_pointer_t<decltype(x)>>;
    // One exp per element, not two: exp(x - max) is kept while it is summed, then scaled (in
    // fp32 and fp64 in dlogits itself, which may be x: each j is read before it is written).
    SlotFor<T> e_slot(vocab);
    A* e = nullptr;
    if constexpr (std::is_same_v<T, A>) {
      e = dlogits + r * vp;
    } else {
      e = e_slot.data();
    }
    const A mx = row_max<E, A>(x, vocab);
    A sum = 0;
#pragma omp simd reduction(+ : sum)
    for (int64_t j = 0; j < vocab; ++j) {
      const A v = std::exp(value_of(x[j]) - mx);
      e[j] = v;
      sum += v;
    }
    const A inv = grad_scale / sum;
    const int64_t t = targets[r];
    T* d = dlogits + r * vp;
    if constexpr (std::is_same_v<T, Bf16>) {
      // Scaled and rounded in one pass, not a scaling pass and a narrowing pass.
      const A target = e[t] * inv - grad_scale;
      narrow_scaled(d, e, inv, vocab);
      d[t] = Bf16(target);
    } else {
#pragma omp simd
      for (int64_t j = 0; j < vocab; ++j) e[j] *= inv;
      e[t] -= grad_scale;
      if constexpr (!std::is_same_v<T, A>) narrow(d, e, vocab);
    }
    for (int64_t j = vocab; j < vp; ++j) d[j] = T(0.0f);
  }
}

// The vocab-parallel steps keep the statistics in double: a shard's sums meet other ranks' in
// an all-reduce, and double keeps the loss independent of how the vocabulary is split.
template <typename T>
void cross_entropy_shard_max(double* row_max, const T* logits, int64_t n, int64_t cols,
                             int64_t real) {
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < n; ++r) {
    const T* x = logits + r * cols;
    double m = -std::numeric_limits<double>::infinity();
    for (int64_t j = 0; j < real; ++j) m = std::max(m, static_cast<double>(x[j]));
    row_max[r] = m;
  }
}

// stats: [2, n]
template <typename T>
void cross_entropy_shard_stats(double* stats, const T* logits, const int32_t* targets,
                               const double* row_max, int64_t n, int64_t cols, int64_t start,
                               int64_t real) {
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < n; ++r) {
    const T* x = logits + r * cols;
    double sum = 0.0;
    for (int64_t j = 0; j < real; ++j) sum += std::exp(static_cast<double>(x[j]) - row_max[r]);
    stats[r] = sum;
    const int64_t local = kernels::shard_index(targets[r], start, cols);
    stats[n + r] = local >= 0 ? static_cast<double>(x[local]) : 0.0;
  }
}

// dlogits may alias logits
template <typename T>
void cross_entropy_shard_backward(T* dlogits, const T* logits, const int32_t* targets,
                                  const double* row_max, const double* row_sum, int64_t n,
                                  int64_t cols, int64_t start, int64_t real, double grad_scale) {
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < n; ++r) {
    const T* x = logits + r * cols;
    T* d = dlogits + r * cols;
    const int64_t target = kernels::shard_index(targets[r], start, cols);
    // Each element is read before it is written, so d may be x.
    for (int64_t j = 0; j < real; ++j)
      d[j] = static_cast<T>(kernels::vocab_ce_grad(static_cast<double>(x[j]), row_max[r],
                                                   row_sum[r], j == target, grad_scale));
    for (int64_t j = real; j < cols; ++j) d[j] = static_cast<T>(0.0f);
  }
}

}  // namespace

}  // namespace mtnlg::cpu

namespace mtnlg {

// The backend's operations whose kernels are in this file (docs/backend.md, Adding an operation).
double CpuBackend::do_cross_entropy_forward(const Tensor& logits, const Tensor& targets,
                                            int64_t vocab) {
  enter();
  const int64_t vp = logits.dim(-1), n = logits.numel() / vp;  // checked by the front
  cpu::check_ids(targets.data_as<int32_t>(), n, vocab, "cross_entropy_forward", "target id",
                 "the data's vocabulary is larger than the model's (check model.vocab_size)");
  double loss = 0.0;
  dispatch_dtype(Device::kCPU, logits.dtype(), "cross_entropy_forward", [&](auto z) {
    using T = decltype(z);
    loss =
        cpu::cross_entropy_forward(logits.data_as<T>(), targets.data_as<int32_t>(), n, vp, vocab);
  });
  return loss;
}

void CpuBackend::do_cross_entropy_backward(Tensor& dlogits, const Tensor& logits,
                                           const Tensor& targets, int64_t vocab,
                                           double grad_scale) {
  enter();
  const int64_t vp = logits.dim(-1), n = logits.numel() / vp;  // checked by the front
  cpu::check_ids(targets.data_as<int32_t>(), n, vocab, "cross_entropy_backward", "target id",
                 "the data's vocabulary is larger than the model's (check model.vocab_size)");
  dispatch_dtype(Device::kCPU, logits.dtype(), "cross_entropy_backward", [&](auto z) {
    using T = decltype(z);
    cpu::cross_entropy_backward(dlogits.data_as<T>(), logits.data_as<T>(),
                                targets.data_as<int32_t>(), n, vp, vocab,
                                static_cast<acc_t<T>>(grad_scale));
  });
}

void CpuBackend::do_cross_entropy_shard_max(Tensor& row_max, const Tensor& logits,
                                            int64_t vocab_start, int64_t vocab) {
  enter();
  const char* op = "cross_entropy_shard_max";
  const auto [n, real] = cpu::shard_rows(op, logits, nullptr, vocab_start, vocab);
  dispatch_dtype(Device::kCPU, logits.dtype(), op, [&](auto z) {
    using T = decltype(z);
    cpu::cross_entropy_shard_max(row_max.data_as<double>(), logits.data_as<T>(), n, logits.dim(-1),
                                 real);
  });
}

void CpuBackend::do_cross_entropy_shard_stats(Tensor& stats, const Tensor& logits,
                                              const Tensor& targets, const Tensor& row_max,
                                              int64_t vocab_start, int64_t vocab) {
  enter();
  const char* op = "cross_entropy_shard_stats";
  const auto [n, real] = cpu::shard_rows(op, logits, &targets, vocab_start, vocab);
  dispatch_dtype(Device::kCPU, logits.dtype(), op, [&](auto z) {
    using T = decltype(z);
    cpu::cross_entropy_shard_stats(stats.data_as<double>(), logits.data_as<T>(),
                                   targets.data_as<int32_t>(), row_max.data_as<double>(), n,
                                   logits.dim(-1), vocab_start, real);
  });
}

void CpuBackend::do_cross_entropy_shard_backward(Tensor& dlogits, const Tensor& logits,
                                                 const Tensor& targets, const Tensor& row_max,
                                                 const Tensor& row_sum, int64_t vocab_start,
                                                 int64_t vocab, double grad_scale) {
  enter();
  const char* op = "cross_entropy_shard_backward";
  const auto [n, real] = cpu::shard_rows(op, logits, &targets, vocab_start, vocab);
  dispatch_dtype(Device::kCPU, logits.dtype(), op, [&](auto z) {
    using T = decltype(z);
    cpu::cross_entropy_shard_backward(dlogits.data_as<T>(), logits.data_as<T>(),
                                      targets.data_as<int32_t>(), row_max.data_as<double>(),
                                      row_sum.data_as<double>(), n, logits.dim(-1), vocab_start,
                                      real, grad_scale);
  });
}

}  // namespace mtnlg
