// What every Communicator implementation (Gloo, shared memory, TCP, NCCL) checks and says the
// same way: a group's description for errors, peer and root ranks, the size rules of
// reduce_scatter and all_gather, the host dtypes the CPU transports reduce, and the reduction
// rule of our CPU transports (reduce_in_order). Failed checks are MTNLG_CHECK
// failures (programming errors) naming the operation, the group and the sizes.
// Pure functions; thread-safe.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/dtype_dispatch.h"
#include "core/kernels/bf16_math.h"
#include "core/status.h"
#include "core/tensor.h"
#include "parallel/communicator.h"

namespace mtnlg {

// "[0, 1, 2]"
std::string ranks_str(const std::vector<int64_t>& ranks);

// "group 'tensor' (rank 1 of 2, global ranks [0, 1]<detail>)": detail adds the transport or
// device (", shared memory").
std::string group_where(const std::string& name, int rank, int size,
                        const std::vector<int64_t>& global_ranks, const std::string& detail = "");

// "peer rank 1 (global rank 5)"
std::string peer_str(int peer, const std::vector<int64_t>& global_ranks);

// The checks take the group's description as a callable (e.g. [this] { return where(); }), called
// only when a check fails: they run on every operation, where formatting the description (a few
// hundred ns of string building) would be most of a small message's latency.
template <typename Where>
void check_peer(const char* op, int peer, int rank, int size, const Where& where) {
  MTNLG_CHECK_MSG(0 <= peer && peer < size && peer != rank,
                  op << " on " << where() << ": peer " << peer << " is not another member");
}

template <typename Where>
void check_root(int root, int size, const Where& where) {
  MTNLG_CHECK_MSG(0 <= root && root < size,
                  "broadcast on " << where() << ": root " << root << " is not a member");
}

// reduce_scatter: in.numel() == size * out.numel(), one dtype.
template <typename Where>
void check_reduce_scatter_sizes(const Tensor& out, const Tensor& in, int size, const Where& where) {
  MTNLG_CHECK_MSG(in.dtype() == out.dtype() && in.numel() == size * out.numel(),
                  "reduce_scatter on " << where() << ": needs in.numel() == size * out.numel() "
                                       << "and one dtype, got in " << in.str() << ", out "
                                       << out.str() << ", size " << size);
}

// all_gather: out.numel() == size * in.numel(), one dtype.
template <typename Where>
void check_all_gather_sizes(const Tensor& out, const Tensor& in, int size, const Where& where) {
  MTNLG_CHECK_MSG(in.dtype() == out.dtype() && out.numel() == size * in.numel(),
                  "all_gather on " << where() << ": needs out.numel() == size * in.numel() "
                                   << "and one dtype, got in " << in.str() << ", out " << out.str()
                                   << ", size " << size);
}

// A CPU tensor of a dtype the CPU transports take (f32, f64, bf16, f16, i32).
template <typename Where>
void check_host_tensor(const char* op, const Tensor& t, const Where& where) {
  MTNLG_CHECK_MSG(
      t.defined() && t.device() == Device::kCPU &&
          (t.dtype() == DType::kF32 || t.dtype() == DType::kF64 || t.dtype() == DType::kI32 ||
           t.dtype() == DType::kBF16 || t.dtype() == DType::kF16),
      op << " on " << where() << ": takes CPU f32, f64, bf16, f16 or i32 tensors, got "
         << (t.defined() ? t.str() : "an undefined tensor"));
}

// Calls f(T{}) with T the element type of `dtype` (one of check_host_tensor's): the backends'
// dispatch (core/dtype_dispatch.h) with token ids too.
template <typename F>
void by_host_dtype(DType dtype, const char* op, F&& f) {
  dispatch_dtype<DTypeSet::kFloatingAndI32>(Device::kCPU, dtype, op, std::forward<F>(f));
}

// out[e] = srcs[0][e] op srcs[1][e] op ... in that order (out may be one of srcs): the same bits
// on every rank that reduces the same inputs. bf16/f16 in fp32, rounded after each step, as
// NCCL's reductions round. Block by block, one source at a time, so the compiler vectorises the
// inner loops (per element, a loop over the sources did not: 1 ns an element, most of a large
// all-reduce); each element still sees the same operations in the same order.
template <typename T>
void reduce_in_order(T* out, const std::vector<const T*>& srcs, size_t count, ReduceOp op) {
  using A = acc_t<T>;
  constexpr size_t kBlock = 512;
  T acc[kBlock];
  for (size_t b = 0; b < count; b += kBlock) {
    const size_t n = std::min(kBlock, count - b);
    std::copy(srcs[0] + b, srcs[0] + b + n, acc);
    for (size_t p = 1; p < srcs.size(); ++p) {
      const T* src = srcs[p] + b;
      if (op == ReduceOp::kSum) {
        for (size_t e = 0; e < n; ++e)
          acc[e] = static_cast<T>(static_cast<A>(acc[e]) + static_cast<A>(src[e]));
      } else {
        for (size_t e = 0; e < n; ++e)
          acc[e] = static_cast<T>(std::max(static_cast<A>(acc[e]), static_cast<A>(src[e])));
      }
    }
    std::copy(acc, acc + n, out + b);  // after every source's block is read: out may be a source
  }
}

}  // namespace mtnlg
