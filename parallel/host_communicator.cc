#include "parallel/host_communicator.h"

#include <cstring>

#include "core/status.h"
#include "parallel/group_checks.h"

namespace mtnlg {

HostCommunicator::HostCommunicator(std::string name, int rank, std::vector<int64_t> global_ranks,
                                   std::string detail)
    : name_(std::move(name)),
      rank_(rank),
      size_(static_cast<int>(global_ranks.size())),
      global_ranks_(std::move(global_ranks)),
      detail_(std::move(detail)) {
  MTNLG_CHECK_MSG(size_ >= 1 && 0 <= rank_ && rank_ < size_,
                  "group '" << name_ << "': rank " << rank_ << " outside a group of " << size_);
}

std::string HostCommunicator::where() const {
  return group_where(name_, rank_, size_, global_ranks_, detail_);
}

std::string HostCommunicator::peer_str(int peer) const {
  return mtnlg::peer_str(peer, global_ranks_);
}

void HostCommunicator::all_reduce(Tensor& t, ReduceOp op) {
  check_host_tensor("all_reduce", t, describer());
  if (size_ == 1 || t.numel() == 0) return;
  do_all_reduce(t, op);
  bytes_sent_ += 2 * (size_ - 1) * static_cast<int64_t>(t.nbytes()) / size_;
}

void HostCommunicator::reduce_scatter(Tensor& out, const Tensor& in, ReduceOp op) {
  check_host_tensor("reduce_scatter", out, describer());
  check_host_tensor("reduce_scatter", in, describer());
  check_reduce_scatter_sizes(out, in, size_, describer());
  if (size_ == 1) {
    std::memmove(out.data(), in.data(), in.nbytes());
    return;
  }
  if (out.numel() == 0) return;
  do_reduce_scatter(out, in, op);
  bytes_sent_ += (size_ - 1) * static_cast<int64_t>(in.nbytes()) / size_;
}

void HostCommunicator::all_gather(Tensor& out, const Tensor& in) {
  check_host_tensor("all_gather", out, describer());
  check_host_tensor("all_gather", in, describer());
  check_all_gather_sizes(out, in, size_, describer());
  if (size_ == 1) {
    std::memmove(out.data(), in.data(), in.nbytes());
    return;
  }
  if (in.numel() == 0) return;
  do_all_gather(out, in);
  bytes_sent_ += (size_ - 1) * static_cast<int64_t>(out.nbytes()) / size_;
}

void HostCommunicator::broadcast(Tensor& t, int root) {
  check_host_tensor("broadcast", t, describer());
  check_root(root, size_, describer());
  if (size_ == 1 || t.numel() == 0) return;
  do_broadcast(t, root);
  bytes_sent_ += static_cast<int64_t>(t.nbytes());
}

void HostCommunicator::send(const Tensor& t, int peer) {
  check_host_tensor("send", t, describer());
  check_peer("send", peer, rank_, size_, describer());
  if (t.numel() == 0) return;
  do_send(t, peer);
  bytes_sent_ += static_cast<int64_t>(t.nbytes());
}

void HostCommunicator::recv(Tensor& t, int peer) {
  check_host_tensor("recv", t, describer());
  check_peer("recv", peer, rank_, size_, describer());
  if (t.numel() == 0) return;
  do_recv(t, peer);
}

void HostCommunicator::batch_send_recv(std::vector<P2POp>& ops) {
  std::vector<P2POp> todo;
  int64_t sent = 0;
  for (P2POp& op : ops) {
    const char* what = op.send ? "batch_send_recv (send)" : "batch_send_recv (recv)";
    check_host_tensor(what, op.tensor, describer());
    check_peer(what, op.peer, rank_, size_, describer());
    if (op.tensor.numel() == 0) continue;
    if (op.send) sent += static_cast<int64_t>(op.tensor.nbytes());
    todo.push_back(op);
  }
  if (todo.empty()) return;
  do_batch_send_recv(todo);
  bytes_sent_ += sent;
}

void HostCommunicator::barrier() {
  if (size_ == 1) return;
  do_barrier();
}

}  // namespace mtnlg
