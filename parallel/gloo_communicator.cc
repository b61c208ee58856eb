#include "parallel/gloo_communicator.h"

#include <gloo/allgather.h>
#include <gloo/allreduce.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/common/error.h>
#include <gloo/math.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/store.h>
#include <gloo/transport/tcp/address.h>
#include <gloo/transport/tcp/device.h>
#include <gloo/types.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <map>

#include "core/status.h"
#include "parallel/group_checks.h"
#include "parallel/host_communicator.h"

namespace mtnlg {

namespace {

using Clock = std::chrono::steady_clock;
using ms = std::chrono::milliseconds;

// Slot prefix of our send/recv; Gloo's own algorithms use 0x01..0x08 (gloo/types.h).
constexpr uint8_t kP2PSlotPrefix = 0x40;
constexpr uint8_t kProbeSlotPrefix = 0x41;
constexpr uint8_t kReduceScatterSlotPrefix = 0x42;

// The group rank a Gloo rendezvous key belongs to: its trailing number ("rank_3" in this
// snapshot, "3" in others), or -1.
int key_rank(const std::string& key, size_t size) {
  size_t begin = key.size();
  while (begin > 0 && std::isdigit(static_cast<unsigned char>(key[begin - 1]))) --begin;
  if (begin == key.size() || key.size() - begin > 9) return -1;
  const size_t r = std::stoul(key.substr(begin));
  return r < size ? static_cast<int>(r) : -1;
}

// Gloo's rendezvous::Store over ours. Gloo's full-mesh rendezvous keys end in the group rank of
// the setter ("rank_3"); we store them as "<prefix>/rank_3@<global rank of 3>" so PmixStore can
// find them,
// and keep each peer's address blob to name peers in errors.
class StoreAdapter final : public gloo::rendezvous::Store {
 public:
  StoreAdapter(mtnlg::Store& base, std::string prefix, const std::vector<int64_t>& ranks,
               ms timeout)
      : base_(base), prefix_(std::move(prefix)), ranks_(ranks), timeout_(timeout) {}

  void set(const std::string& key, const std::vector<char>& data) override {
    base_.set(map(key), std::vector<uint8_t>(data.begin(), data.end()));
  }
  std::vector<char> get(const std::string& key) override {
    auto v = base_.get(map(key), timeout_);
    std::vector<char> out(v.begin(), v.end());
    if (const int r = key_rank(key, ranks_.size()); r >= 0) blobs_[r] = out;
    return out;
  }
  void wait(const std::vector<std::string>& keys) override { wait(keys, timeout_); }
  void wait(const std::vector<std::string>& keys, const ms& timeout) override {
    std::vector<std::string> mapped;
    for (const auto& k : keys) mapped.push_back(map(k));
    base_.wait(mapped, timeout);
  }

  const std::map<int, std::vector<char>>& blobs() const { return blobs_; }

 private:
  std::string map(const std::string& key) const {
    const int r = key_rank(key, ranks_.size());
    return prefix_ + "/" + owned_key(key, ranks_[r >= 0 ? r : 0]);
  }

  mtnlg::Store& base_;
  std::string prefix_;
  const std::vector<int64_t>& ranks_;
  ms timeout_;
  std::map<int, std::vector<char>> blobs_;
};

using ReduceFn = void (*)(void*, const void*, const void*, size_t);

// Reductions of bf16/f16 widen each pair to fp32 and round the sum (gloo::sum<Bf16> through
// Bf16's conversions), once per ring hop, as NCCL's bf16 reductions do.
template <typename T>
ReduceFn reduce_fn(ReduceOp op) {
  return op == ReduceOp::kSum ? static_cast<ReduceFn>(&gloo::sum<T>)
                              : static_cast<ReduceFn>(&gloo::max<T>);
}

class GlooCommunicator final : public HostCommunicator {
 public:
  GlooCommunicator(Store& store, std::string name, int rank, std::vector<int64_t> global_ranks,
                   const GlooOptions& options);
  // Closing is collective: a barrier first, so that a rank that finished its last operation
  // cannot close connections a peer's pending send still uses (Gloo then fails that send with
  // "connection closed by peer"). Skipped after a failure and while unwinding, so that a failing
  // rank leaves at once.
  ~GlooCommunicator() override {
    if (!context_ || !failure_.empty() || std::uncaught_exceptions() > 0) return;
    try {
      barrier();
    } catch (const std::exception&) {
      // Leaving anyway; peers that still need us report their own error.
    }
  }
  GlooCommunicator(const GlooCommunicator&) = delete;
  GlooCommunicator& operator=(const GlooCommunicator&) = delete;

  const char* transport() const override { return "gloo"; }

 private:
  void do_all_reduce(Tensor& t, ReduceOp op) override;
  void do_reduce_scatter(Tensor& out, const Tensor& in, ReduceOp op) override;
  void do_all_gather(Tensor& out, const Tensor& in) override;
  void do_broadcast(Tensor& t, int root) override;
  void do_send(const Tensor& t, int peer) override;
  void do_recv(Tensor& t, int peer) override;
  void do_batch_send_recv(std::vector<P2POp>& ops) override;
  void do_barrier() override;

 private:
  uint32_t next_tag() { return tag_++; }
  // reduce_scatter's ring on unbound buffers; fn reduces count elements of the dtype.
  void ring_reduce_scatter(Tensor& out, const Tensor& in, ReduceFn fn);
  // Runs one Gloo call; translates its exceptions (once, here) and marks the communicator failed.
  // what() describes the data for errors; called only on a failure (see group_checks.h).
  template <typename What, typename F>
  void run(const char* op, const What& what, int peer, F&& f);
  std::string blame(const char* op, const std::string& gloo_msg, int peer, int root) const;
  std::string dead_peers() const;

  ms timeout_;
  std::shared_ptr<gloo::transport::Device> device_;
  std::shared_ptr<gloo::rendezvous::Context> context_;  // null for a one-rank group
  std::vector<std::string> peer_address_;               // as Gloo prints it in errors
  std::vector<uint32_t> send_seq_, recv_seq_;           // per peer: matches k-th send to k-th recv
  uint32_t tag_ = 0;
  std::string failure_;  // first failure; non-empty: every later op throws at once
  int broadcast_root_ = -1;
};

GlooCommunicator::GlooCommunicator(Store& store, std::string name, int rank,
                                   std::vector<int64_t> global_ranks, const GlooOptions& options)
    : HostCommunicator(std::move(name), rank, std::move(global_ranks), ""),
      timeout_(options.timeout),
      send_seq_(size_, 0),
      recv_seq_(size_, 0) {
  MTNLG_CHECK_MSG(timeout_.count() > 0, "group '" << name_ << "': timeout must be positive");
  if (size_ == 1) return;
  // Members create groups in the same order, so they agree on the generation.
  const std::string group =
      name_ + "." + std::to_string(global_ranks_[0]) + "x" + std::to_string(size_);
  const int64_t generation = store.next_use("gloo/" + group + "/" + std::to_string(rank_));
  const std::string prefix = "gloo/" + group + "." + std::to_string(generation);
  StoreAdapter adapter(store, prefix, global_ranks_, timeout_);
  const auto start = Clock::now();
  try {
    gloo::transport::tcp::attr attr;
    if (!options.iface.empty()) {
      attr.iface = options.iface;
    } else if (!options.hostname.empty()) {
      attr.hostname = options.hostname;
    } else {
      char host[256] = {};
      ::gethostname(host, sizeof(host) - 1);
      attr.hostname = host;
    }
    device_ = gloo::transport::tcp::CreateDevice(attr);
    context_ = std::make_shared<gloo::rendezvous::Context>(rank_, size_);
    context_->setTimeout(timeout_);
    context_->connectFullMesh(adapter, device_);
  } catch (const Error& e) {
    throw Error(e.code(), "creating " + where() + ": " + e.message(), e.context());
  } catch (const std::exception& e) {
    const auto waited = std::chrono::duration_cast<ms>(Clock::now() - start).count();
    throw io_error("creating " + where() + " failed after " + std::to_string(waited) +
                       " ms: " + e.what() +
                       " (check that every member started and can reach this host; "
                       "MTNLG_GLOO_IFACE / MTNLG_GLOO_HOSTNAME choose the interface)",
                   "gloo");
  }
  // Gloo names a failed pair by the address the peer published for it: keep them to name ranks.
  peer_address_.resize(size_);
  for (const auto& [peer, blob] : adapter.blobs()) {
    if (peer == rank_ || peer >= size_) continue;
    const size_t bytes = blob.size() / (size_ - 1);
    const size_t index = rank_ < peer ? rank_ : rank_ - 1;  // peer's pairs skip itself
    if (bytes == 0 || (index + 1) * bytes > blob.size()) continue;
    std::vector<char> one(blob.begin() + index * bytes, blob.begin() + (index + 1) * bytes);
    peer_address_[peer] = gloo::transport::tcp::Address(one).str();
  }
}

template <typename What, typename F>
void GlooCommunicator::run(const char* op, const What& what, int peer, F&& f) {
  if (!failure_.empty())
    throw io_error(std::string(op) + " on " + where() +
                       ": the communicator failed earlier and cannot be used: " + failure_,
                   "gloo");
  const auto start = Clock::now();
  try {
    f();
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    const auto waited = std::chrono::duration_cast<ms>(Clock::now() - start).count();
    failure_ = std::string(op) + " of " + what() + " on " + where() + " failed after " +
               std::to_string(waited) + " ms (timeout " + std::to_string(timeout_.count()) +
               " ms): " + blame(op, e.what(), peer, broadcast_root_) + " [Gloo: " + e.what() + "]";
    throw io_error(failure_, "gloo");
  }
}

// Peers whose connection the kernel closed or reset: a dead process, the root cause even when
// this rank's operation failed on another connection (a neighbour that gave up first). Gloo keeps
// a failed connection's error and throws it from any new send on it, so a zero-byte send asks
// each connection. Only called once the communicator has failed; connections closed by our own
// timeout ("Application timeout") do not count.
std::string GlooCommunicator::dead_peers() const {
  std::string out;
  char none = 0;
  for (int p = 0; p < size_; ++p) {
    if (p == rank_) continue;
    try {
      auto probe = context_->createUnboundBuffer(&none, 0);
      probe->send(p, gloo::Slot::build(kProbeSlotPrefix, 0));
    } catch (const std::exception& e) {
      const std::string msg = e.what();
      if (msg.find("closed by peer") == std::string::npos &&
          msg.find("reset by peer") == std::string::npos &&
          msg.find("Socket closed") == std::string::npos &&
          msg.find("Broken pipe") == std::string::npos)
        continue;
      out += (out.empty() ? "" : "; ") + peer_str(p) +
             " closed its connection (the process died or failed)";
    }
  }
  return out;
}

// Which peer to name. Gloo says which connection failed when one closes or times out on a pair
// (its message carries the peer's address); a timed-out unbound-buffer receive does not, so we
// name the peers this rank's part of the algorithm receives from.
std::string GlooCommunicator::blame(const char* op, const std::string& msg, int peer,
                                    int root) const {
  if (peer >= 0) return peer_str(peer) + " did not complete the transfer";
  if (const std::string gone = dead_peers(); !gone.empty()) return gone;
  for (int p = 0; p < size_; ++p) {
    if (p == rank_ || peer_address_[p].empty()) continue;
    if (msg.find(peer_address_[p]) != std::string::npos) {
      const bool timed_out = msg.find("timeout") != std::string::npos;
      return peer_str(p) + (timed_out ? " did not answer in time"
                                      : " closed the connection (the process died or failed)");
    }
  }
  const int left = (rank_ + size_ - 1) % size_, right = (rank_ + 1) % size_;
  const std::string op_name = op;
  if (op_name == "broadcast" && root >= 0 && root != rank_)
    return "no data from the broadcast tree towards root " + peer_str(root);
  if (op_name == "barrier") return peer_str(left) + " or an earlier peer did not arrive";
  if (left == right) return peer_str(left) + " did not answer";
  return "ring neighbour " + peer_str(left) + " or " + peer_str(right) + " did not answer";
}

void GlooCommunicator::do_all_reduce(Tensor& t, ReduceOp op) {
  run(
      "all_reduce", [&] { return t.str(); }, -1,
      [&] {
        by_host_dtype(t.dtype(), "all_reduce", [&](auto tag) {
          using T = decltype(tag);
          gloo::AllreduceOptions opts(context_);
          opts.setOutput(static_cast<T*>(t.data()), static_cast<size_t>(t.numel()));
          opts.setReduceFunction(reduce_fn<T>(op));
          opts.setAlgorithm(gloo::AllreduceOptions::Algorithm::RING);
          opts.setTag(next_tag());
          opts.setTimeout(timeout_);
          gloo::allreduce(opts);
        });
      });
}

void GlooCommunicator::do_reduce_scatter(Tensor& out, const Tensor& in, ReduceOp op) {
  run(
      "reduce_scatter", [&] { return in.str(); }, -1,
      [&] {
        by_host_dtype(in.dtype(), "reduce_scatter", [&](auto tag) {
          using T = decltype(tag);
          ring_reduce_scatter(out, in, reduce_fn<T>(op));
        });
      });
}

// Ring reduce-scatter (n - 1 steps). At step s rank r sends chunk (r - s - 1) mod n to its right
// neighbour (its own input at step 0, after that the partial sum it made the step before) and
// receives chunk (r - s - 2) mod n from its left neighbour, which it reduces with its own input;
// the last step's chunk is r, reduced straight into out. Each rank sends (n - 1)/n of the input,
// half of what the all-reduce-and-slice it replaces moved. Unbound-buffer sends are
// asynchronous, so every rank posts its receive and its send and then waits: no ordering is
// needed to avoid deadlock. One slot per call (a fresh tag): the steps reuse it, which is safe
// because each step waits for its send and receive before the next starts.
void GlooCommunicator::ring_reduce_scatter(Tensor& out, const Tensor& in, ReduceFn fn) {
  const size_t chunk = out.nbytes(), count = static_cast<size_t>(out.numel());
  const int right = (rank_ + 1) % size_, left = (rank_ + size_ - 1) % size_;
  auto at = [&](int c) { return static_cast<char*>(in.data()) + static_cast<size_t>(c) * chunk; };
  // Received chunk, and two partial sums (one is being sent while the next is made).
  std::vector<char> scratch(chunk * (size_ > 3 ? 3 : size_ - 1));
  char* const received = scratch.data();
  const auto slot = gloo::Slot::build(kReduceScatterSlotPrefix, next_tag());
  auto recv_buf = context_->createUnboundBuffer(received, chunk);
  char* send_from = at((rank_ + size_ - 1) % size_);
  for (int step = 0; step < size_ - 1; ++step) {
    const int c = ((rank_ - step - 2) % size_ + size_) % size_;
    char* const into =
        step == size_ - 2 ? static_cast<char*>(out.data()) : received + chunk * (1 + step % 2);
    auto send_buf = context_->createUnboundBuffer(send_from, chunk);
    recv_buf->recv(left, slot);
    send_buf->send(right, slot);
    if (!recv_buf->waitRecv(timeout_)) throw gloo::IoException("reduce_scatter recv aborted");
    fn(into, at(c), received, count);
    if (!send_buf->waitSend(timeout_)) throw gloo::IoException("reduce_scatter send aborted");
    send_from = into;
  }
}

void GlooCommunicator::do_all_gather(Tensor& out, const Tensor& in) {
  run(
      "all_gather", [&] { return out.str(); }, -1,
      [&] {
        by_host_dtype(in.dtype(), "all_gather", [&](auto tag) {
          using T = decltype(tag);
          gloo::AllgatherOptions opts(context_);
          opts.setInput(static_cast<T*>(in.data()), static_cast<size_t>(in.numel()));
          opts.setOutput(static_cast<T*>(out.data()), static_cast<size_t>(out.numel()));
          opts.setTag(next_tag());
          opts.setTimeout(timeout_);
          gloo::allgather(opts);
        });
      });
}

void GlooCommunicator::do_broadcast(Tensor& t, int root) {
  broadcast_root_ = root;
  run(
      "broadcast", [&] { return t.str() + " from rank " + std::to_string(root); }, -1,
      [&] {
        by_host_dtype(t.dtype(), "broadcast", [&](auto tag) {
          using T = decltype(tag);
          gloo::BroadcastOptions opts(context_);
          opts.setOutput(static_cast<T*>(t.data()), static_cast<size_t>(t.numel()));
          opts.setRoot(root);
          opts.setTag(next_tag());
          opts.setTimeout(timeout_);
          gloo::broadcast(opts);
        });
      });
}

void GlooCommunicator::do_send(const Tensor& t, int peer) {
  run(
      "send", [&] { return t.str() + " to rank " + std::to_string(peer); }, peer,
      [&] {
        auto buf = context_->createUnboundBuffer(t.data(), t.nbytes());
        buf->send(peer, gloo::Slot::build(kP2PSlotPrefix, send_seq_[peer]++));
        if (!buf->waitSend(timeout_)) throw gloo::IoException("send aborted");
      });
}

void GlooCommunicator::do_recv(Tensor& t, int peer) {
  run(
      "recv", [&] { return t.str() + " from rank " + std::to_string(peer); }, peer,
      [&] {
        auto buf = context_->createUnboundBuffer(t.data(), t.nbytes());
        buf->recv(peer, gloo::Slot::build(kP2PSlotPrefix, recv_seq_[peer]++));
        if (!buf->waitRecv(timeout_)) throw gloo::IoException("recv aborted");
      });
}

void GlooCommunicator::do_batch_send_recv(std::vector<P2POp>& ops) {
  // Gloo's unbound buffers are asynchronous: post every op, then wait for each.
  run(
      "batch_send_recv",
      [&] {
        return std::to_string(ops.size()) + " transfers, the first " + ops.front().tensor.str() +
               (ops.front().send ? " to rank " : " from rank ") + std::to_string(ops.front().peer);
      },
      ops.front().peer,
      [&] {
        std::vector<std::unique_ptr<gloo::transport::UnboundBuffer>> bufs;
        for (P2POp& op : ops) {
          auto buf = context_->createUnboundBuffer(op.tensor.data(), op.tensor.nbytes());
          if (op.send) {
            buf->send(op.peer, gloo::Slot::build(kP2PSlotPrefix, send_seq_[op.peer]++));
          } else {
            buf->recv(op.peer, gloo::Slot::build(kP2PSlotPrefix, recv_seq_[op.peer]++));
          }
          bufs.push_back(std::move(buf));
        }
        for (size_t i = 0; i < ops.size(); ++i) {
          const bool done = ops[i].send ? bufs[i]->waitSend(timeout_) : bufs[i]->waitRecv(timeout_);
          if (!done) throw gloo::IoException(ops[i].send ? "send aborted" : "recv aborted");
        }
      });
}

void GlooCommunicator::do_barrier() {
  run(
      "barrier", [] { return std::string("no data"); }, -1,
      [&] {
        gloo::BarrierOptions opts(context_);
        opts.setTag(next_tag());
        opts.setTimeout(timeout_);
        gloo::barrier(opts);
      });
}

}  // namespace

GlooOptions GlooOptions::from_env(std::chrono::milliseconds timeout) {
  GlooOptions o;
  o.timeout = timeout;
  if (const char* v = std::getenv("MTNLG_GLOO_IFACE"))
    o.iface = v;
  else if (const char* w = std::getenv("GLOO_SOCKET_IFNAME"))
    o.iface = w;
  if (const char* v = std::getenv("MTNLG_GLOO_HOSTNAME")) o.hostname = v;
  return o;
}

std::unique_ptr<Communicator> make_gloo_communicator(Store& store, const std::string& group_name,
                                                     int rank_in_group,
                                                     std::vector<int64_t> global_ranks,
                                                     const GlooOptions& options) {
  // Gloo's TCP pairs write with plain writev: a write to a peer that just died or timed out
  // raises SIGPIPE, which would kill the whole process silently (exit 141) instead of letting
  // the communicator report the dead peer. Ignored here, where every Gloo group is made, the
  // write fails with EPIPE, an error we name.
  std::signal(SIGPIPE, SIG_IGN);
  return std::make_unique<GlooCommunicator>(store, group_name, rank_in_group,
                                            std::move(global_ranks), options);
}

std::unique_ptr<Communicator> make_gloo_communicator(Store& store, const std::string& group_name,
                                                     int rank_in_group,
                                                     std::vector<int64_t> global_ranks,
                                                     std::chrono::milliseconds timeout) {
  return make_gloo_communicator(store, group_name, rank_in_group, std::move(global_ranks),
                                GlooOptions::from_env(timeout));
}

}  // namespace mtnlg
