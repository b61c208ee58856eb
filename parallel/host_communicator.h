// HostCommunicator: the part of the Communicator contract every CPU transport (Gloo, shared
// memory, TCP) shares, written once: the group's identity and its description for errors, the
// argument checks (host dtypes, sizes, peers, roots), a one-rank group's shortcuts
// (reduce_scatter and all_gather copy in to out, the rest return at once), empty tensors, and
// bytes_sent by the bus-bandwidth convention of communicator.h. A transport implements the do_*
// steps, which are called only for a group of two or more ranks, with checked arguments and data
// to move; failures, timeouts and blame stay the transport's.
//
// Ownership and threads: as Communicator (one thread drives a communicator at a time).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "parallel/communicator.h"

namespace mtnlg {

class HostCommunicator : public Communicator {
 public:
  int rank() const final { return rank_; }
  int size() const final { return size_; }
  const std::string& name() const final { return name_; }
  int64_t bytes_sent() const final { return bytes_sent_; }
  std::string description() const final { return where(); }

  void all_reduce(Tensor& t, ReduceOp op) final;
  void reduce_scatter(Tensor& out, const Tensor& in, ReduceOp op) final;
  void all_gather(Tensor& out, const Tensor& in) final;
  void broadcast(Tensor& t, int root) final;
  void send(const Tensor& t, int peer) final;
  void recv(Tensor& t, int peer) final;
  void batch_send_recv(std::vector<P2POp>& ops) final;
  void barrier() final;

 protected:
  // Checks 0 <= rank < size (an MTNLG_CHECK naming the group). detail ends the description,
  // e.g. ", shared memory".
  HostCommunicator(std::string name, int rank, std::vector<int64_t> global_ranks,
                   std::string detail);

  virtual void do_all_reduce(Tensor& t, ReduceOp op) = 0;
  virtual void do_reduce_scatter(Tensor& out, const Tensor& in, ReduceOp op) = 0;
  virtual void do_all_gather(Tensor& out, const Tensor& in) = 0;
  virtual void do_broadcast(Tensor& t, int root) = 0;
  virtual void do_send(const Tensor& t, int peer) = 0;
  virtual void do_recv(Tensor& t, int peer) = 0;
  // ops: checked, none empty, at least one.
  virtual void do_batch_send_recv(std::vector<P2POp>& ops) = 0;
  virtual void do_barrier() = 0;

  // "group 'tensor' (rank 1 of 2, global ranks [0, 1]<detail>)" and "peer rank 1 (global rank 5)".
  std::string where() const;
  std::string peer_str(int peer) const;
  // where() for the checks of parallel/group_checks.h, formatted only if one fails.
  auto describer() const {
    return [this] { return where(); };
  }

  const std::string name_;
  const int rank_;
  const int size_;
  const std::vector<int64_t> global_ranks_;

 private:
  const std::string detail_;
  int64_t bytes_sent_ = 0;
};

}  // namespace mtnlg
