#include "model/vocab_parallel.h"

#include <cmath>
#include <limits>

#include "parallel/mappings.h"

namespace mtnlg {

namespace {

void check_host(const Tensor& t, const char* what) {
  MTNLG_CHECK_MSG(t.device() == Device::kCPU,
                  what << ": vocab-parallel ops run on host tensors (CPU backend) for now");
}

// Calls fn(T{}) with T the floating dtype of t.
template <typename Fn>
void dispatch_float(const Tensor& t, const char* what, Fn&& fn) {
  if (t.dtype() == DType::kF32) {
    fn(float{});
  } else if (t.dtype() == DType::kBF16) {
    fn(Bf16{});
  } else if (t.dtype() == DType::kF16) {
    fn(F16{});
  } else {
    MTNLG_CHECK_MSG(t.dtype() == DType::kF64, what << ": dtype " << dtype_name(t.dtype()));
    fn(double{});
  }
}

// Real (non-padding) local columns: [0, real_cols(shard)).
int64_t real_cols(const VocabShard& s) {
  return std::max<int64_t>(0, std::min(s.size, s.vocab - s.start));
}

}  // namespace

void vocab_parallel_embedding_forward(Tensor& out, const Tensor& tokens, const Tensor& wte_local,
                                      const Tensor& wpe, const VocabShard& shard,
                                      bool add_positions, Communicator* tensor) {
  check_host(out, "vocab_parallel_embedding_forward");
  const int64_t b = tokens.dim(0), s = tokens.dim(1), h = out.dim(-1);
  MTNLG_CHECK_EQ(wte_local.dim(0), shard.size);
  const int32_t* tok = tokens.data_as<int32_t>();
  dispatch_float(out, "vocab_parallel_embedding_forward", [&](auto z) {
    using T = decltype(z);
    const T* wte = wte_local.data_as<T>();
    const T* pos = wpe.data_as<T>();
    T* o = out.data_as<T>();
    for (int64_t i = 0; i < b * s; ++i) {
      const int64_t local = tok[i] - shard.start, t = i % s;
      const bool held = 0 <= local && local < shard.size;
      for (int64_t c = 0; c < h; ++c) {
        acc_t<T> v = held ? acc_t<T>(wte[local * h + c]) : acc_t<T>(0);
        if (add_positions) v = held ? v + pos[t * h + c] : acc_t<T>(pos[t * h + c]);
        o[i * h + c] = v;
      }
    }
  });
  // Each element is one rank's value plus zeros, or wte + wpe: the sum is exact.
  Tensor flat = out;
  all_reduce_sum(flat, tensor);
}

void vocab_parallel_embedding_backward(Tensor& dwte_local, Tensor& dwpe, const Tensor& dout,
                                       const Tensor& tokens, const VocabShard& shard) {
  check_host(dout, "vocab_parallel_embedding_backward");
  const int64_t b = tokens.dim(0), s = tokens.dim(1), h = dout.dim(-1);
  const int32_t* tok = tokens.data_as<int32_t>();
  dispatch_float(dout, "vocab_parallel_embedding_backward", [&](auto z) {
    using T = decltype(z);
    const T* d = dout.data_as<T>();
    // Parameter gradients are acc_t<T>: fp32 main gradients for a bf16 model.
    acc_t<T>* dw = dwte_local.data_as<acc_t<T>>();
    acc_t<T>* dp = dwpe.data_as<acc_t<T>>();
    for (int64_t i = 0; i < b * s; ++i) {
      const int64_t local = tok[i] - shard.start, t = i % s;
      if (0 <= local && local < shard.size)
        for (int64_t c = 0; c < h; ++c) dw[local * h + c] += d[i * h + c];
      for (int64_t c = 0; c < h; ++c) dp[t * h + c] += d[i * h + c];
    }
  });
}

void vocab_parallel_ce_local_max(Tensor& row_max, const Tensor& logits, const VocabShard& shard) {
  check_host(logits, "vocab_parallel_cross_entropy");
  const int64_t vl = logits.dim(-1), n = logits.numel() / vl, real = real_cols(shard);
  MTNLG_CHECK_EQ(vl, shard.size);
  double* mx = row_max.data_as<double>();
  dispatch_float(logits, "vocab_parallel_cross_entropy", [&](auto z) {
    using T = decltype(z);
    const T* x = logits.data_as<T>();
    for (int64_t r = 0; r < n; ++r) {
      double m = -std::numeric_limits<double>::infinity();
      for (int64_t j = 0; j < real; ++j) m = std::max(m, static_cast<double>(x[r * vl + j]));
      mx[r] = m;
    }
  });
}

void vocab_parallel_ce_local_stats(Tensor& stats, const Tensor& logits, const Tensor& targets,
                                   const Tensor& row_max, const VocabShard& shard) {
  const int64_t vl = logits.dim(-1), n = logits.numel() / vl, real = real_cols(shard);
  const double* mx = row_max.data_as<double>();
  const int32_t* tgt = targets.data_as<int32_t>();
  double* st = stats.data_as<double>();
  dispatch_float(logits, "vocab_parallel_cross_entropy", [&](auto z) {
    using T = decltype(z);
    const T* x = logits.data_as<T>();
    for (int64_t r = 0; r < n; ++r) {
      MTNLG_CHECK_MSG(0 <= tgt[r] && tgt[r] < shard.vocab,
                      "target id " << tgt[r] << " outside the vocabulary " << shard.vocab
                                   << " (check model.vocab_size)");
      double sum = 0.0;
      for (int64_t j = 0; j < real; ++j)
        sum += std::exp(static_cast<double>(x[r * vl + j]) - mx[r]);
      st[r] = sum;
      const int64_t local = tgt[r] - shard.start;
      st[n + r] = 0 <= local && local < shard.size ? static_cast<double>(x[r * vl + local]) : 0.0;
    }
  });
}

double vocab_parallel_cross_entropy_forward(VocabParallelCEContext& ctx, const Tensor& logits,
                                            const Tensor& targets, const VocabShard& shard,
                                            Communicator* tensor) {
  const int64_t n = logits.numel() / logits.dim(-1);
  if (!ctx.row_max.defined() || ctx.row_max.numel() != n) {
    ctx.row_max = Tensor::cpu({n}, DType::kF64);
    ctx.row_sum = Tensor::cpu({n}, DType::kF64);
  }
  vocab_parallel_ce_local_max(ctx.row_max, logits, shard);
  all_reduce_max(ctx.row_max, tensor);
  Tensor stats = Tensor::cpu({2 * n}, DType::kF64);
  vocab_parallel_ce_local_stats(stats, logits, targets, ctx.row_max, shard);
  all_reduce_sum(stats, tensor);
  const double* st = stats.data_as<double>();
  const double* mx = ctx.row_max.data_as<double>();
  double* sum = ctx.row_sum.data_as<double>();
  double loss = 0.0;
  for (int64_t r = 0; r < n; ++r) {
    sum[r] = st[r];
    loss += std::log(st[r]) + mx[r] - st[n + r];
  }
  return loss;
}

void vocab_parallel_cross_entropy_backward(Tensor& dlogits, const VocabParallelCEContext& ctx,
                                           const Tensor& logits, const Tensor& targets,
                                           const VocabShard& shard, double grad_scale) {
  check_host(logits, "vocab_parallel_cross_entropy_backward");
  const int64_t vl = logits.dim(-1), n = logits.numel() / vl, real = real_cols(shard);
  const double* mx = ctx.row_max.data_as<double>();
  const double* sum = ctx.row_sum.data_as<double>();
  const int32_t* tgt = targets.data_as<int32_t>();
  dispatch_float(logits, "vocab_parallel_cross_entropy_backward", [&](auto z) {
    using T = decltype(z);
    const T* x = logits.data_as<T>();
    T* d = dlogits.data_as<T>();
    for (int64_t r = 0; r < n; ++r) {
      const int64_t local = tgt[r] - shard.start;
      for (int64_t j = 0; j < vl; ++j) {
        double g = 0.0;
        if (j < real) {
          g = std::exp(static_cast<double>(x[r * vl + j]) - mx[r]) / sum[r];
          if (j == local) g -= 1.0;
        }
        d[r * vl + j] = static_cast<T>(grad_scale * g);  // x read before d written (may alias)
      }
    }
  });
}

}  // namespace mtnlg
