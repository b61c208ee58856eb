#include "parallel/group_checks.h"

namespace mtnlg {

std::string ranks_str(const std::vector<int64_t>& ranks) {
  std::string s = "[";
  for (size_t i = 0; i < ranks.size(); ++i) {
    if (i > 0) s += ", ";
    s += std::to_string(ranks[i]);
  }
  return s + "]";
}

std::string group_where(const std::string& name, int rank, int size,
                        const std::vector<int64_t>& global_ranks, const std::string& detail) {
  return "group '" + name + "' (rank " + std::to_string(rank) + " of " + std::to_string(size) +
         ", global ranks " + ranks_str(global_ranks) + detail + ")";
}

std::string peer_str(int peer, const std::vector<int64_t>& global_ranks) {
  return "peer rank " + std::to_string(peer) + " (global rank " +
         std::to_string(global_ranks[static_cast<size_t>(peer)]) + ")";
}

void check_peer(const char* op, int peer, int rank, int size, const std::string& where) {
  MTNLG_CHECK_MSG(0 <= peer && peer < size && peer != rank,
                  op << " on " << where << ": peer " << peer << " is not another member");
}

void check_root(int root, int size, const std::string& where) {
  MTNLG_CHECK_MSG(0 <= root && root < size,
                  "broadcast on " << where << ": root " << root << " is not a member");
}

void check_reduce_scatter_sizes(const Tensor& out, const Tensor& in, int size,
                                const std::string& where) {
  MTNLG_CHECK_MSG(in.dtype() == out.dtype() && in.numel() == size * out.numel(),
                  "reduce_scatter on " << where << ": needs in.numel() == size * out.numel() "
                                       << "and one dtype, got in " << in.str() << ", out "
                                       << out.str() << ", size " << size);
}

void check_all_gather_sizes(const Tensor& out, const Tensor& in, int size,
                            const std::string& where) {
  MTNLG_CHECK_MSG(in.dtype() == out.dtype() && out.numel() == size * in.numel(),
                  "all_gather on " << where << ": needs out.numel() == size * in.numel() "
                                   << "and one dtype, got in " << in.str() << ", out " << out.str()
                                   << ", size " << size);
}

void check_host_tensor(const char* op, const Tensor& t, const std::string& where) {
  MTNLG_CHECK_MSG(
      t.defined() && t.device() == Device::kCPU &&
          (t.dtype() == DType::kF32 || t.dtype() == DType::kF64 || t.dtype() == DType::kI32 ||
           t.dtype() == DType::kBF16 || t.dtype() == DType::kF16),
      op << " on " << where << ": takes CPU f32, f64, bf16, f16 or i32 tensors, got "
         << (t.defined() ? t.str() : "an undefined tensor"));
}

}  // namespace mtnlg
