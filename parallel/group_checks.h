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
#include <vector>

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

void check_peer(const char* op, int peer, int rank, int size, const std::string& where);
void check_root(int root, int size, const std::string& where);
// reduce_scatter: in.numel() == size * out.numel(), one dtype; all_gather: the converse.
void check_reduce_scatter_sizes(const Tensor& out, const Tensor& in, int size,
                                const std::string& where);
void check_all_gather_sizes(const Tensor& out, const Tensor& in, int size,
                            const std::string& where);
// A CPU tensor of a dtype the CPU transports take (f32, f64, bf16, f16, i32).
void check_host_tensor(const char* op, const Tensor& t, const std::string& where);

// Calls f(T{}) with T the element type of `dtype` (one of check_host_tensor's).
template <typename F>
void by_host_dtype(DType dtype, F&& f) {
  switch (dtype) {
    case DType::kF32:
      f(float{});
      return;
    case DType::kF64:
      f(double{});
      return;
    case DType::kI32:
      f(int32_t{});
      return;
    case DType::kBF16:
      f(Bf16{});
      return;
    case DType::kF16:
      f(F16{});
      return;
    default:
      MTNLG_CHECK_MSG(false, "CPU communicator: unsupported dtype " << dtype_name(dtype));
  }
}

// out[e] = srcs[0][e] op srcs[1][e] op ... in that order (out may be one of srcs): the same bits
// on every rank that reduces the same inputs. bf16/f16 in fp32, rounded after each step, as
// NCCL's reductions round.
template <typename T>
void reduce_in_order(T* out, const std::vector<const T*>& srcs, size_t count, ReduceOp op) {
  using A = acc_t<T>;
  for (size_t e = 0; e < count; ++e) {
    T acc = srcs[0][e];
    for (size_t p = 1; p < srcs.size(); ++p) {
      const A x = static_cast<A>(acc), y = static_cast<A>(srcs[p][e]);
      acc = static_cast<T>(op == ReduceOp::kSum ? x + y : std::max(x, y));
    }
    out[e] = acc;
  }
}

}  // namespace mtnlg
