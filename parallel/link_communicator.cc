#include "parallel/link_communicator.h"

#include <algorithm>
#include <cstring>

#include "parallel/group_checks.h"

namespace mtnlg {

namespace {

// all_reduce: one round of whole tensors below this; reduce_scatter + all_gather above (each rank
// then sends 2 (size - 1) / size of the tensor instead of size - 1 times it).
constexpr size_t kExchangeAllBytes = size_t{64} << 10;

}  // namespace

template <typename T>
void LinkCommunicator::direct_reduce_scatter(T* out, const T* in, size_t count, ReduceOp op) {
  // Piece by piece where the link asks for it (each piece summed while it is in cache), else in
  // one exchange.
  const size_t piece = std::max<size_t>(1, std::min(count, reduce_piece_bytes() / sizeof(T)));
  const size_t bytes = piece * sizeof(T);
  scratch_.resize(bytes * static_cast<size_t>(size_));
  std::vector<Transfer> xs;
  std::vector<const T*> srcs(static_cast<size_t>(size_));
  for (size_t off = 0; off < count; off += piece) {
    const size_t n = std::min(piece, count - off);
    xs.clear();
    for (int p = 0; p < size_; ++p) {
      if (p == rank_) continue;
      xs.push_back(
          {p, true, reinterpret_cast<char*>(const_cast<T*>(in + count * p + off)), n * sizeof(T)});
      xs.push_back({p, false, scratch_.data() + bytes * static_cast<size_t>(p), n * sizeof(T)});
    }
    exchange(xs);
    for (int p = 0; p < size_; ++p)
      srcs[static_cast<size_t>(p)] = p == rank_
                                         ? in + count * rank_ + off
                                         : reinterpret_cast<const T*>(scratch_.data() + bytes * p);
    reduce_in_order(out + off, srcs, n, op);
  }
}

void LinkCommunicator::direct_all_gather(char* out, const char* in, size_t bytes) {
  // Sent from `in`, not from this rank's part of `out`, and that part copied after: a peer then
  // reads memory no core has just written (single copy over shared memory reads it from here).
  std::vector<Transfer> xs;
  for (int p = 0; p < size_; ++p) {
    if (p == rank_) continue;
    xs.push_back({p, true, const_cast<char*>(in), bytes});
    xs.push_back({p, false, out + bytes * static_cast<size_t>(p), bytes});
  }
  exchange(xs);
  if (out + bytes * static_cast<size_t>(rank_) != in)
    std::memmove(out + bytes * static_cast<size_t>(rank_), in, bytes);
}

const char* LinkCommunicator::op_name(Op op) {
  switch (op) {
    case Op::kAllReduce:
      return "all_reduce";
    case Op::kReduceScatter:
      return "reduce_scatter";
    case Op::kAllGather:
      return "all_gather";
    case Op::kBroadcast:
      return "broadcast";
    case Op::kSend:
      return "send";
    case Op::kRecv:
      return "recv";
    case Op::kBatchSendRecv:
      return "batch_send_recv";
    case Op::kBarrier:
      return "barrier";
  }
  return "?";
}

void LinkCommunicator::do_all_reduce(Tensor& t, ReduceOp op) {
  begin(Op::kAllReduce, &t, "", -1);
  by_host_dtype(t.dtype(), "all_reduce", [&](auto tag) {
    using T = decltype(tag);
    T* data = static_cast<T*>(t.data());
    const auto total = static_cast<size_t>(t.numel());
    if (t.nbytes() <= kExchangeAllBytes || total < static_cast<size_t>(size_)) {
      // One round: everyone's tensor to everyone, reduced in rank order.
      const size_t bytes = t.nbytes();
      scratch_.resize(bytes * static_cast<size_t>(size_));
      std::vector<Transfer> xs;
      for (int p = 0; p < size_; ++p) {
        if (p == rank_) continue;
        xs.push_back({p, true, reinterpret_cast<char*>(data), bytes});
        xs.push_back({p, false, scratch_.data() + bytes * static_cast<size_t>(p), bytes});
      }
      exchange(xs);
      std::memcpy(scratch_.data() + bytes * static_cast<size_t>(rank_), data, bytes);
      std::vector<const T*> srcs;
      for (int p = 0; p < size_; ++p)
        srcs.push_back(reinterpret_cast<const T*>(scratch_.data() + bytes * p));
      reduce_in_order(data, srcs, total, op);
      return;
    }
    // Chunk k reduced by rank k (reduce-scatter), then gathered: the same bits everywhere. The
    // last chunk takes the remainder; the others are equal. In place: once the reduce-scatter's
    // exchange has returned, the peers have taken this rank's chunks, so its own chunk's sum may
    // overwrite it and the gather may fill the others (no copy of the tensor, no allocation).
    const size_t chunk = total / static_cast<size_t>(size_);
    const size_t tail = total - chunk * static_cast<size_t>(size_);
    T* mine = data + chunk * static_cast<size_t>(rank_);
    direct_reduce_scatter(mine, data, chunk, op);
    direct_all_gather(reinterpret_cast<char*>(data), reinterpret_cast<const char*>(mine),
                      chunk * sizeof(T));
    if (tail > 0) {  // the few elements past size_ equal chunks: one more small round
      Tensor rest = Tensor::borrow(data + chunk * size_, {static_cast<int64_t>(tail)}, t.dtype());
      do_all_reduce(rest, op);  // not counted again: the bytes are the whole tensor's
    }
  });
}

void LinkCommunicator::do_reduce_scatter(Tensor& out, const Tensor& in, ReduceOp op) {
  begin(Op::kReduceScatter, &in, "", -1);
  by_host_dtype(in.dtype(), "reduce_scatter", [&](auto tag) {
    using T = decltype(tag);
    direct_reduce_scatter(static_cast<T*>(out.data()), static_cast<const T*>(in.data()),
                          static_cast<size_t>(out.numel()), op);
  });
}

void LinkCommunicator::do_all_gather(Tensor& out, const Tensor& in) {
  begin(Op::kAllGather, &out, "", -1);
  direct_all_gather(static_cast<char*>(out.data()), static_cast<const char*>(in.data()),
                    in.nbytes());
}

void LinkCommunicator::do_broadcast(Tensor& t, int root) {
  begin(Op::kBroadcast, &t, " from rank ", root);
  std::vector<Transfer> xs;
  if (rank_ == root) {
    for (int p = 0; p < size_; ++p)
      if (p != root) xs.push_back({p, true, static_cast<char*>(t.data()), t.nbytes()});
  } else {
    xs.push_back({root, false, static_cast<char*>(t.data()), t.nbytes()});
  }
  exchange(xs);
}

void LinkCommunicator::do_send(const Tensor& t, int peer) {
  begin(Op::kSend, &t, " to rank ", peer);
  std::vector<Transfer> xs{{peer, true, static_cast<char*>(t.data()), t.nbytes()}};
  exchange(xs);
}

void LinkCommunicator::do_recv(Tensor& t, int peer) {
  begin(Op::kRecv, &t, " from rank ", peer);
  std::vector<Transfer> xs{{peer, false, static_cast<char*>(t.data()), t.nbytes()}};
  exchange(xs);
}

void LinkCommunicator::do_batch_send_recv(std::vector<P2POp>& ops) {
  begin(Op::kBatchSendRecv, &ops.front().tensor,
        ops.front().send ? " (first) to rank " : " (first) from rank ", ops.front().peer);
  std::vector<Transfer> xs;
  for (P2POp& op : ops)
    xs.push_back({op.peer, op.send, static_cast<char*>(op.tensor.data()), op.tensor.nbytes()});
  exchange(xs);
}

void LinkCommunicator::do_barrier() {
  begin(Op::kBarrier, nullptr, "", -1);
  std::vector<char> out(static_cast<size_t>(size_), 1), in(static_cast<size_t>(size_), 0);
  std::vector<Transfer> xs;
  for (int p = 0; p < size_; ++p) {
    if (p == rank_) continue;
    xs.push_back({p, true, &out[static_cast<size_t>(p)], 1});
    xs.push_back({p, false, &in[static_cast<size_t>(p)], 1});
  }
  exchange(xs);
}

}  // namespace mtnlg
