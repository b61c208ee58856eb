// LinkCommunicator: the collective algorithms of our own CPU transports, written once over a
// small point-to-point link (Gloo's split of algorithm and transport). A transport provides
// exchange(): a batch of sends and receives run to completion; the algorithms here build every
// collective from it, so shared memory and TCP (and any transport after them) get the same
// algorithms, the same bits and the same messages.
//
// The algorithms are direct (every rank talks to every other in one round), which on one node or
// a small group beats a ring's size - 1 dependent steps:
//   all_reduce     below kExchangeAllBytes: every rank's tensor to every rank, reduced in rank
//                  order; above: chunk k reduced by rank k (reduce_scatter), then gathered
//   reduce_scatter chunk k of every rank to rank k, reduced there in rank order
//   all_gather     this rank's part to every rank
//   broadcast      the root's tensor to every rank
//   barrier        a byte to and from every rank
// Every reduction sums in rank order (reduce_in_order, parallel/group_checks.h), so every rank
// gets the same bits whatever the transport.
//
// Ownership and threads: as Communicator. The scratch buffer grows to the largest collective's
// need (size x its bytes) and is kept.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "parallel/host_communicator.h"

namespace mtnlg {

class LinkCommunicator : public HostCommunicator {
 protected:
  using HostCommunicator::HostCommunicator;

  // The operation begin() starts: transports choose by its kind (shared memory copies a point-
  // to-point transfer once from a lower size than a collective's, and never a reduction's
  // pieces), and name it in their messages.
  enum class Op {
    kAllReduce,
    kReduceScatter,
    kAllGather,
    kBroadcast,
    kSend,
    kRecv,
    kBatchSendRecv,
    kBarrier
  };
  static const char* op_name(Op op);
  static bool point_to_point(Op op) {
    return op == Op::kSend || op == Op::kRecv || op == Op::kBatchSendRecv;
  }
  static bool reduces(Op op) { return op == Op::kAllReduce || op == Op::kReduceScatter; }

  // One transfer of an exchange: `bytes` at `data` to send to, or receive from, `peer`.
  struct Transfer {
    int peer;
    bool send;
    char* data;
    size_t bytes;
  };

  // The link. begin() starts an operation (throws if the communicator failed earlier; keeps the
  // operation, its data and a peer, "to rank 3", for the transport's messages). exchange() runs
  // every transfer to completion, those on one peer and direction in their order (it may advance
  // each transfer's data and bytes as they move), and throws io_error naming the group, the
  // operation and the peer on a timeout or a dead peer.
  virtual void begin(Op op, const Tensor* data, const char* dir, int other) = 0;
  virtual void exchange(std::vector<Transfer>& xs) = 0;
  // The most bytes a reduction takes from each peer before it sums them: a link whose transfers
  // cost little each (shared memory) sums pieces that are still in cache.
  virtual size_t reduce_piece_bytes() const { return SIZE_MAX; }

  // The collectives and point-to-point operations over the link (final: a transport provides a
  // link, not algorithms). Transports may override barrier (a shared segment's flags are
  // cheaper than bytes).
  void do_all_reduce(Tensor& t, ReduceOp op) final;
  void do_reduce_scatter(Tensor& out, const Tensor& in, ReduceOp op) final;
  void do_all_gather(Tensor& out, const Tensor& in) final;
  void do_broadcast(Tensor& t, int root) final;
  void do_send(const Tensor& t, int peer) final;
  void do_recv(Tensor& t, int peer) final;
  void do_batch_send_recv(std::vector<P2POp>& ops) final;
  void do_barrier() override;

 private:
  template <typename T>
  void direct_reduce_scatter(T* out, const T* in, size_t count, ReduceOp op);
  void direct_all_gather(char* out, const char* in, size_t bytes);

  std::vector<char> scratch_;
};

}  // namespace mtnlg
