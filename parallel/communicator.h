// Communicator: one process group and the collectives over it, the interface every backend fills
// (Gloo on CPU now, NCCL on CUDA later). ProcessGroups: the groups of one rank's Topology.
//
// Operations are collective over the group's members: every member calls the same operations in
// the same order with matching sizes (send/recv: only the two ranks involved, in matching order).
// A one-rank group returns at once (reduce_scatter and all_gather copy in to out). Ranks and peers
// are ranks within the group. Tensors are CPU f32, f64, bf16, f16 or i32 for the Gloo backend
// (bf16/f16 sums are formed in fp32 and rounded at each step, as NCCL's are); wrong sizes or
// dtypes fail an MTNLG_CHECK naming the operation, the group and the sizes.
//
// Failure: no operation hangs silently. A dead or hung peer makes the operation throw io_error
// naming the group, the operation, the peer and the time waited, within the communicator's
// timeout; after one failure the communicator is unusable (later operations throw at once).
//
// Ownership: a Communicator owns its connections; it borrows tensors only for the call.
// Thread safety: not thread-safe; one thread drives a communicator at a time.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace mtnlg {

enum class ReduceOp { kSum, kMax };
const char* reduce_op_name(ReduceOp op);

// One transfer of Communicator::batch_send_recv (Megatron-LM's P2POp for batch_isend_irecv).
struct P2POp {
  bool send = false;  // true: send `tensor` to `peer`; false: receive into it
  Tensor tensor;
  int peer = -1;
};

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;  // rank within the group
  virtual int size() const = 0;
  virtual const std::string& name()
      const = 0;  // "tensor", "pipeline", "data", "embedding", "world"
  // What carries the bytes, for logs and benchmarks: "shm", "tcp", "nccl" ("" if unsaid).
  virtual const char* transport() const { return ""; }
  // The group as errors name it: "group 'tensor' (rank 1 of 2, global ranks [0, 1], shared
  // memory, single copy)"; the default names just the group and rank.
  virtual std::string description() const {
    return "group '" + name() + "' (rank " + std::to_string(rank()) + " of " +
           std::to_string(size()) + ")";
  }

  // In place: t = op over the group of t.
  virtual void all_reduce(Tensor& t, ReduceOp op) = 0;
  // in.numel() == size() * out.numel(); rank r gets chunk r of the reduction.
  virtual void reduce_scatter(Tensor& out, const Tensor& in, ReduceOp op) = 0;
  // out.numel() == size() * in.numel(); chunk r of out comes from rank r.
  virtual void all_gather(Tensor& out, const Tensor& in) = 0;
  virtual void broadcast(Tensor& t, int root) = 0;
  // Blocking and paired: send returns once the peer has posted the matching recv (the k-th send
  // to a peer matches its k-th recv from us), so order exchanges so that they pair up (in a ring,
  // rank 0 sends first and every other rank receives first).
  virtual void send(const Tensor& t, int peer) = 0;
  virtual void recv(Tensor& t, int peer) = 0;
  // Every op of `ops` at once; returns when all have completed. Sends and receives progress
  // together, so ranks that exchange in both directions in one batch never deadlock, whatever
  // the sizes and the ring (where send() then recv() on every rank may). Ops with the same peer
  // and direction complete in their order in `ops` and pair with the peer's in that order (and
  // with its plain send()/recv()). bytes_sent counts the sends as send() does.
  virtual void batch_send_recv(std::vector<P2POp>& ops) = 0;
  virtual void barrier() = 0;
  // Device communicators: order every later operation after the work queued so far on `stream`
  // (the backend's compute stream, Backend::native_stream) at the time of the call, GPU side,
  // instead of waiting for the whole device. Waiting for the device would also wait for other
  // groups' collectives in flight (GradSync's thread drives data_grads), which wait for peers
  // that may be waiting for us. Host communicators ignore it.
  virtual void set_compute_stream(void* stream) { (void)stream; }
  // Bytes moved, counted by the nccl-tests "bus bandwidth" convention so that every backend
  // counts alike and bytes/time is the bus bandwidth. S: bytes of the larger buffer, n: size():
  // all_reduce 2(n-1)/n S; reduce_scatter, all_gather (n-1)/n S; broadcast S; send S;
  // recv, barrier and any one-rank group 0.
  virtual int64_t bytes_sent() const = 0;
};

// The groups of one rank (see parallel/topology.h); null where this rank is not a member
// (embedding: only the first and last pipeline stages). data_grads spans the same ranks as data
// but has its own connections: GradSync's communication thread drives it while the main thread
// keeps using the others (a Communicator is driven by one thread at a time). checkpoint spans the
// world with its own connections for the same reason: an asynchronous checkpoint save commits on
// a background thread (checkpoint/saver.h).
struct ProcessGroups {
  std::unique_ptr<Communicator> world, tensor, data, pipeline, embedding, data_grads, checkpoint;
};

class Topology;

// Creates one group: (name, this rank's rank in it, its global ranks in group order).
using CommunicatorFactory =
    std::function<std::unique_ptr<Communicator>(const std::string&, int, std::vector<int64_t>)>;

// This rank's groups of `topology`, each made by `make`, in the same order on every rank (world,
// tensor, data, data-grads, pipeline, embedding, checkpoint) so that collective rendezvous pair up;
// the embedding group only on the first and last stages. The transport factory wraps this
// (parallel/transport.h: make_host_groups; make_nccl_groups).
ProcessGroups make_process_groups(const Topology& topology, const CommunicatorFactory& make);

// set_compute_stream(stream) on every group of `groups`.
void set_compute_stream(ProcessGroups& groups, void* stream);

}  // namespace mtnlg
