#include "parallel/cuda/nccl_communicator.h"

#include <cuda_runtime.h>
#include <nccl.h>

#include <algorithm>
#include <cstring>
#include <exception>
#include <optional>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include "core/cuda/cuda_check.h"
#include "core/status.h"
#include "parallel/group_checks.h"
#include "parallel/peer_watch.h"

namespace mtnlg {

namespace {

using Clock = std::chrono::steady_clock;
using ms = std::chrono::milliseconds;

// A wait this long looks for a member that is gone (PeerWatch); shorter ones are just work.
constexpr auto kWatchAfter = std::chrono::seconds(2);

// The one place an ncclResult_t becomes an Error. ncclInProgress is not a failure: our
// communicators are non-blocking (so that creation and every call can be bounded by the
// timeout), and a call that returns it has been accepted; the caller then waits for the
// communicator's state (NcclCommunicator::wait).
void check_nccl(ncclResult_t result, const char* expr, const char* file, int line) {
  if (result == ncclSuccess || result == ncclInProgress) return;
  const std::string what =
      std::string("NCCL error '") + ncclGetErrorString(result) + "' in " + expr;
  const std::string where = std::string(file) + ":" + std::to_string(line);
  // System and remote errors are the network or a peer; the rest are misuse or NCCL's own bugs.
  if (result == ncclSystemError || result == ncclRemoteError)
    throw io_error(what + " (set NCCL_DEBUG=WARN for NCCL's reason)", where);
  throw Error(Code::kInternal, what, where);
}

#define NCCL_CHECK(expr) ::mtnlg::check_nccl((expr), #expr, __FILE__, __LINE__)

ncclDataType_t nccl_dtype(DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return ncclFloat32;
    case DType::kF64:
      return ncclFloat64;
    case DType::kI32:
      return ncclInt32;
    case DType::kBF16:
      return ncclBfloat16;
    case DType::kF16:
      return ncclFloat16;
  }
  MTNLG_CHECK_MSG(false, "NCCL communicator: unsupported dtype " << dtype_name(dtype));
  return ncclFloat32;  // unreachable
}

ncclRedOp_t nccl_op(ReduceOp op) {
  return op == ReduceOp::kSum ? ncclSum : ncclMax;
}

struct StreamDeleter {
  void operator()(cudaStream_t s) const { (void)cudaStreamDestroy(s); }
};
using StreamPtr = std::unique_ptr<std::remove_pointer_t<cudaStream_t>, StreamDeleter>;

struct EventDeleter {
  void operator()(cudaEvent_t e) const { (void)cudaEventDestroy(e); }
};
using EventPtr = std::unique_ptr<std::remove_pointer_t<cudaEvent_t>, EventDeleter>;

struct DeviceFree {
  void operator()(void* p) const { (void)cudaFree(p); }
};

// Aborting is the safe way to drop a communicator in any state (half-created, failed, or with
// work in flight); the normal path finalizes and destroys instead, then releases the pointer.
struct CommAborter {
  void operator()(ncclComm_t comm) const { (void)ncclCommAbort(comm); }
};
using CommPtr = std::unique_ptr<std::remove_pointer_t<ncclComm_t>, CommAborter>;

class NcclCommunicator final : public Communicator {
 public:
  NcclCommunicator(Store& store, std::string name, int rank, std::vector<int64_t> global_ranks,
                   int device, ms timeout);
  ~NcclCommunicator() override;
  NcclCommunicator(const NcclCommunicator&) = delete;
  NcclCommunicator& operator=(const NcclCommunicator&) = delete;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  const std::string& name() const override { return name_; }
  const char* transport() const override { return "nccl"; }
  int64_t bytes_sent() const override { return bytes_sent_; }

  void all_reduce(Tensor& t, ReduceOp op) override;
  void reduce_scatter(Tensor& out, const Tensor& in, ReduceOp op) override;
  void all_gather(Tensor& out, const Tensor& in) override;
  void broadcast(Tensor& t, int root) override;
  void send(const Tensor& t, int peer) override;
  void recv(Tensor& t, int peer) override;
  void batch_send_recv(std::vector<P2POp>& ops) override;
  void barrier() override;
  void set_compute_stream(void* stream) override { compute_ = static_cast<cudaStream_t>(stream); }

 private:
  std::string where() const {
    return "NCCL " +
           group_where(name_, rank_, size_, global_ranks_, ", device " + std::to_string(device_));
  }
  void check_tensor(const char* op, const Tensor& t) const {
    MTNLG_CHECK_MSG(t.defined() && t.device() == Device::kCUDA,
                    op << " on " << where() << ": NCCL takes CUDA tensors, got "
                       << (t.defined() ? t.str() : "an undefined tensor"));
  }
  void check_peer(const char* op, int peer) const {
    mtnlg::check_peer(op, peer, rank_, size_, [this] { return where(); });
  }
  // Makes the device current and orders our stream after the inputs' producer: after the
  // compute stream's work so far (an event, GPU side) when set_compute_stream named it, else
  // after everything on the device.
  void prepare() const {
    CUDA_CHECK(cudaSetDevice(device_));
    if (compute_ == nullptr) {
      CUDA_CHECK(cudaDeviceSynchronize());
      return;
    }
    CUDA_CHECK(cudaEventRecord(ready_.get(), compute_));
    CUDA_CHECK(cudaStreamWaitEvent(stream_.get(), ready_.get(), 0));
  }
  // One-rank reduce_scatter / all_gather: out = in.
  void copy_local(Tensor& out, const Tensor& in);
  // Host tensors (the trainer's scalars and flags: loss sums, norms, stop votes, checks) ride
  // through a device staging buffer: a collective given CPU tensors copies them up into it, runs
  // on the device copies, and copies the results back. in and out must then both be on the host.
  // Returns true when it handled the call (fn gets the device views).
  template <typename F>
  bool on_host(Tensor& out, const Tensor& in, F&& fn);
  // Enqueues one operation (enqueue issues NCCL calls through NCCL_CHECK) and waits for it.
  // what() describes the data for errors; called only on a failure (see group_checks.h).
  template <typename What, typename F>
  void run(const char* op, const What& what, F&& enqueue);
  // Waits until NCCL has accepted the calls and the stream has run them, within the timeout.
  // `seq`: the collective's number in this group (OperationRoll), -1 for point-to-point ops.
  template <typename What>
  void wait(const char* op, const What& what, Clock::time_point start, int64_t seq);
  // "; <a member that is gone>" (PeerWatch), or empty. `now`: look whatever the interval.
  std::string gone_peer(bool now) {
    const auto gone = watch_.check(now);
    return gone ? "; " + *gone + ": this rank stops too" : std::string();
  }
  // Records the failure, aborts the NCCL communicator and throws.
  [[noreturn]] void fail(Code code, const char* op, const std::string& what,
                         Clock::time_point start, const std::string& why);
  // NCCL's own explanation of the last error on this communicator, if any.
  std::string last_error() const {
    const char* msg = comm_ ? ncclGetLastError(comm_.get()) : nullptr;
    return msg && *msg ? std::string(" [NCCL: ") + msg + "]" : std::string();
  }

  std::string name_;
  int rank_;
  int size_;
  std::vector<int64_t> global_ranks_;
  int device_;
  ms timeout_;
  PeerWatch watch_;                    // names a member that died or failed while we wait for it
  std::optional<OperationRoll> roll_;  // who reached a stalled collective (groups of 2 or more)
  int64_t collectives_ = 0;            // this group's collectives so far: the roll's numbers
  // Declared before comm_, so destroyed after it.
  StreamPtr stream_;
  EventPtr ready_;                  // recorded on compute_ by prepare()
  cudaStream_t compute_ = nullptr;  // the backend's stream (not ours); null: the whole device
  std::unique_ptr<void, DeviceFree> scratch_;  // one float for barrier()
  static constexpr size_t kInitialStaging = size_t{1} << 16;
  std::unique_ptr<void, DeviceFree> staging_;               // host tensors' device copies (grows)
  std::vector<std::unique_ptr<void, DeviceFree>> retired_;  // outgrown staging, kept till the end
  size_t staging_bytes_ = 0;
  CommPtr comm_;  // null for a one-rank group and after a failure
  int64_t bytes_sent_ = 0;
  std::string failure_;  // first failure; non-empty: every later op throws at once
};

NcclCommunicator::NcclCommunicator(Store& store, std::string name, int rank,
                                   std::vector<int64_t> global_ranks, int device, ms timeout)
    : name_(std::move(name)),
      rank_(rank),
      size_(static_cast<int>(global_ranks.size())),
      global_ranks_(std::move(global_ranks)),
      device_(device),
      timeout_(timeout),
      watch_(store, global_ranks_, rank_) {
  MTNLG_CHECK_MSG(size_ >= 1 && 0 <= rank_ && rank_ < size_,
                  "group '" << name_ << "': rank " << rank_ << " outside a group of " << size_);
  MTNLG_CHECK_MSG(timeout_.count() > 0, "group '" << name_ << "': timeout must be positive");
  MTNLG_CHECK_MSG(device_ >= 0, "group '" << name_ << "': bad CUDA device " << device_);
  const auto start = Clock::now();
  ncclUniqueId id{};
  try {
    CUDA_CHECK(cudaSetDevice(device_));
    cudaStream_t stream = nullptr;
    CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    stream_.reset(stream);
    cudaEvent_t event = nullptr;
    CUDA_CHECK(cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
    ready_.reset(event);
    // The host tensors' staging buffer, sized now for the trainer's scalars and flags (a larger
    // host tensor grows it; see on_host).
    void* staging = nullptr;
    CUDA_CHECK(cudaMalloc(&staging, kInitialStaging));
    staging_.reset(staging);
    staging_bytes_ = kInitialStaging;
    if (size_ == 1) return;
    void* scratch = nullptr;
    CUDA_CHECK(cudaMalloc(&scratch, sizeof(float)));
    scratch_.reset(scratch);
    CUDA_CHECK(cudaMemset(scratch, 0, sizeof(float)));

    // Members create groups in the same order, so they agree on the generation.
    const std::string group =
        name_ + "." + std::to_string(global_ranks_[0]) + "x" + std::to_string(size_);
    const int64_t generation = store.next_use("nccl/" + group + "/" + std::to_string(rank_));
    const std::string prefix = "nccl/" + group + "." + std::to_string(generation);
    const std::string key = owned_key(prefix + "/unique_id", global_ranks_[0]);
    roll_.emplace(store, prefix, global_ranks_, rank_);
    if (rank_ == 0) {
      NCCL_CHECK(ncclGetUniqueId(&id));
      const auto* bytes = reinterpret_cast<const uint8_t*>(&id);
      store.set(key, std::vector<uint8_t>(bytes, bytes + sizeof(id)));
    } else {
      const std::vector<uint8_t> value = store.get(key, timeout_);
      if (value.size() != sizeof(id))
        throw corruption("store key '" + key + "' holds " + std::to_string(value.size()) +
                             " bytes, not an ncclUniqueId (" + std::to_string(sizeof(id)) +
                             "): another program or version wrote it; use a fresh store",
                         key);
      std::memcpy(&id, value.data(), sizeof(id));
    }

    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;  // so that joining, like every operation, is bounded by the timeout
    config.commName = name_.c_str();
    ncclComm_t comm = nullptr;
    const ncclResult_t result = ncclCommInitRankConfig(&comm, size_, id, rank_, &config);
    if (comm) comm_.reset(comm);
    NCCL_CHECK(result);
  } catch (const Error& e) {
    throw Error(e.code(), "creating " + where() + ": " + e.message() + last_error(), e.context());
  }
  // Joining completes once every member has joined (NCCL's bootstrap connects them all).
  watch_.restart();
  for (;;) {
    ncclResult_t state = ncclSuccess;
    if (const ncclResult_t got = ncclCommGetAsyncError(comm_.get(), &state); got != ncclSuccess)
      state = got;
    if (state == ncclSuccess) return;
    const auto waited = std::chrono::duration_cast<ms>(Clock::now() - start).count();
    if (state != ncclInProgress) {
      const std::string msg = "creating " + where() + " failed after " + std::to_string(waited) +
                              " ms: " + ncclGetErrorString(state) + last_error() +
                              " (set NCCL_DEBUG=WARN for NCCL's reason)" + gone_peer(true);
      comm_.reset();
      throw io_error(msg, "nccl");
    }
    std::string gone = waited > ms(kWatchAfter).count() ? gone_peer(false) : "";
    if (gone.empty() && waited > timeout_.count()) {
      gone = gone_peer(true);
      if (gone.empty())
        gone =
            ": check that every member started, uses its own GPU and can reach this host "
            "(NCCL_SOCKET_IFNAME chooses the interface)";
    }
    if (!gone.empty()) {
      comm_.reset();
      throw io_error("creating " + where() + " did not complete within " + std::to_string(waited) +
                         " ms" + gone,
                     "nccl");
    }
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
}

NcclCommunicator::~NcclCommunicator() {
  if (!comm_) return;
  // After a failure or while unwinding, leave at once (abort, the CommPtr's deleter).
  if (!failure_.empty() || std::uncaught_exceptions() > 0) return;
  // Every operation has completed (they are blocking), so finalizing only tears down; bound it
  // anyway so that a peer that vanished cannot hang our exit.
  if (cudaSetDevice(device_) != cudaSuccess) return;
  const ncclResult_t r = ncclCommFinalize(comm_.get());
  if (r != ncclSuccess && r != ncclInProgress) return;
  const auto start = Clock::now();
  ncclResult_t state = ncclInProgress;
  while (state == ncclInProgress && Clock::now() - start < timeout_) {
    if (ncclCommGetAsyncError(comm_.get(), &state) != ncclSuccess) return;
    if (state == ncclInProgress) std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  if (state != ncclSuccess) return;
  (void)ncclCommDestroy(comm_.release());
}

void NcclCommunicator::fail(Code code, const char* op, const std::string& what,
                            Clock::time_point start, const std::string& why) {
  const auto waited = std::chrono::duration_cast<ms>(Clock::now() - start).count();
  failure_ = std::string(op) + " of " + what + " on " + where() + " failed after " +
             std::to_string(waited) + " ms (timeout " + std::to_string(timeout_.count()) +
             " ms): " + why + last_error();
  comm_.reset();  // ncclCommAbort: stops our kernels so the stream drains
  throw Error(code, failure_, "nccl");
}

template <typename What, typename F>
void NcclCommunicator::run(const char* op, const What& what, F&& enqueue) {
  if (!failure_.empty())
    throw io_error(std::string(op) + " on " + where() +
                       ": the communicator failed earlier and cannot be used: " + failure_,
                   "nccl");
  prepare();
  // Point-to-point operations involve some members only, so only collectives are numbered.
  const bool p2p =
      !std::strcmp(op, "send") || !std::strcmp(op, "recv") || !std::strcmp(op, "batch_send_recv");
  const int64_t seq = p2p ? -1 : collectives_++;
  const auto start = Clock::now();
  try {
    enqueue();
  } catch (const Error& e) {
    fail(e.code(), op, what(), start, e.message() + " at " + e.context());
  }
  wait(op, what, start, seq);
}

template <typename What>
void NcclCommunicator::wait(const char* op, const What& what, Clock::time_point start,
                            int64_t seq) {
  watch_.restart();
  const bool rolled = seq >= 0 && roll_.has_value();
  bool said = false;  // this rank told the roll it waits in `seq`
  // Said at half the timeout: a wait that long is rare (each one leaves a key in the store for
  // good), and a member that started within that of this one has said it by our timeout.
  const Clock::duration say_after = std::max<Clock::duration>(kWatchAfter, timeout_ / 2);
  for (int polls = 0;; ++polls) {
    // Host side first: a non-blocking call may still be handing work to the stream.
    ncclResult_t state = ncclSuccess;
    if (const ncclResult_t got = ncclCommGetAsyncError(comm_.get(), &state); got != ncclSuccess)
      state = got;
    if (state != ncclSuccess && state != ncclInProgress)
      fail(Code::kIOError, op, what(), start,
           std::string("NCCL reported '") + ncclGetErrorString(state) +
               "' (a peer failed or the network broke; set NCCL_DEBUG=WARN on every rank)" +
               gone_peer(true));
    if (state == ncclSuccess) {
      const cudaError_t q = cudaStreamQuery(stream_.get());
      if (q == cudaSuccess) return;
      if (q != cudaErrorNotReady) {
        (void)cudaGetLastError();
        fail(Code::kInternal, op, what(), start,
             std::string("CUDA error ") + cudaGetErrorName(q) + " (" + cudaGetErrorString(q) +
                 ") while running it");
      }
    }
    const auto waited = Clock::now() - start;
    if (rolled && !said && (waited > say_after || waited > timeout_)) {
      roll_->reached(seq);
      said = true;
    }
    // NCCL never learns that a peer on this node died: its kernels wait for it. Name it.
    if (waited > kWatchAfter)
      if (const std::string gone = gone_peer(false); !gone.empty())
        fail(Code::kIOError, op, what(), start, "it cannot complete" + gone);
    if (waited > timeout_) {
      const std::string gone = gone_peer(true);
      if (!gone.empty())
        fail(Code::kIOError, op, what(), start, "it did not complete in time" + gone);
      // NCCL does not say who is missing; the members that did not say they wait here are.
      std::string who =
          "no member is known to be gone (a peer on another host that was killed "
          "leaves no sign): a member died, hung, or did not call the same "
          "operation with matching sizes";
      if (rolled) {
        const std::string behind = roll_->missing(seq, std::chrono::seconds(5));
        who = behind.empty()
                  ? "every member said it waits in this operation too (collective " +
                        std::to_string(seq) +
                        " of the group): the transport stalled, or a member called it with "
                        "other sizes"
                  : "these members did not say they reached this operation (collective " +
                        std::to_string(seq) + " of the group): " + behind +
                        " (hung, in another operation, or slower than the timeout)";
      }
      fail(Code::kIOError, op, what(), start,
           "it did not complete in time; " + who +
               ". Check those ranks' logs (NCCL_DEBUG=WARN), or raise parallel.timeout_s if the "
               "work is just slow");
    }
    // Spin briefly for small, fast collectives, then back off to spare the CPU.
    if (polls < 1000)
      std::this_thread::yield();
    else
      std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

void NcclCommunicator::copy_local(Tensor& out, const Tensor& in) {
  if (in.nbytes() == 0) return;
  prepare();
  CUDA_CHECK(
      cudaMemcpyAsync(out.data(), in.data(), in.nbytes(), cudaMemcpyDeviceToDevice, stream_.get()));
  CUDA_CHECK(cudaStreamSynchronize(stream_.get()));
}

template <typename F>
bool NcclCommunicator::on_host(Tensor& out, const Tensor& in, F&& fn) {
  if (!in.defined() || !out.defined() || in.device() != Device::kCPU ||
      out.device() != Device::kCPU)
    return false;
  constexpr size_t kAlign = 256;
  const size_t in_at = 0, out_at = (in.nbytes() + kAlign - 1) / kAlign * kAlign;
  const size_t need = out_at + out.nbytes();
  CUDA_CHECK(cudaSetDevice(device_));
  if (need > staging_bytes_) {
    // The old buffer is retired, not freed: cudaFree would wait for the whole device, the other
    // groups' collectives in flight included (which may be waiting for peers that wait for us).
    // Doubling keeps the retired buffers to a few, freed with the communicator.
    const size_t bytes = std::max(need, 2 * staging_bytes_);
    void* p = nullptr;
    CUDA_CHECK(cudaMalloc(&p, bytes));
    retired_.push_back(std::move(staging_));
    staging_.reset(p);
    staging_bytes_ = bytes;
  }
  char* base = static_cast<char*>(staging_.get());
  Tensor din = Tensor::borrow(base + in_at, in.shape(), in.dtype(), Device::kCUDA);
  Tensor dout = Tensor::borrow(base + out_at, out.shape(), out.dtype(), Device::kCUDA);
  CUDA_CHECK(
      cudaMemcpyAsync(din.data(), in.data(), in.nbytes(), cudaMemcpyHostToDevice, stream_.get()));
  CUDA_CHECK(cudaStreamSynchronize(stream_.get()));
  // An in-place call (all_reduce, broadcast) works on one device copy.
  if (out.data() == in.data()) dout = din;
  fn(dout, din);
  CUDA_CHECK(cudaMemcpyAsync(out.data(), dout.data(), out.nbytes(), cudaMemcpyDeviceToHost,
                             stream_.get()));
  CUDA_CHECK(cudaStreamSynchronize(stream_.get()));
  return true;
}

void NcclCommunicator::all_reduce(Tensor& t, ReduceOp op) {
  if (on_host(t, t, [&](Tensor& d, const Tensor&) { all_reduce(d, op); })) return;
  check_tensor("all_reduce", t);
  if (size_ == 1 || t.numel() == 0) return;
  run(
      "all_reduce", [&] { return t.str() + " (" + reduce_op_name(op) + ")"; },
      [&] {
        NCCL_CHECK(ncclAllReduce(t.data(), t.data(), static_cast<size_t>(t.numel()),
                                 nccl_dtype(t.dtype()), nccl_op(op), comm_.get(), stream_.get()));
      });
  bytes_sent_ += 2 * (size_ - 1) * static_cast<int64_t>(t.nbytes()) / size_;
}

void NcclCommunicator::reduce_scatter(Tensor& out, const Tensor& in, ReduceOp op) {
  if (on_host(out, in, [&](Tensor& o, const Tensor& i) { reduce_scatter(o, i, op); })) return;
  check_tensor("reduce_scatter", out);
  check_tensor("reduce_scatter", in);
  check_reduce_scatter_sizes(out, in, size_, [this] { return where(); });
  if (size_ == 1) return copy_local(out, in);
  if (out.numel() == 0) return;
  run(
      "reduce_scatter", [&] { return in.str() + " (" + reduce_op_name(op) + ")"; },
      [&] {
        NCCL_CHECK(ncclReduceScatter(in.data(), out.data(), static_cast<size_t>(out.numel()),
                                     nccl_dtype(in.dtype()), nccl_op(op), comm_.get(),
                                     stream_.get()));
      });
  bytes_sent_ += (size_ - 1) * static_cast<int64_t>(in.nbytes()) / size_;
}

void NcclCommunicator::all_gather(Tensor& out, const Tensor& in) {
  if (on_host(out, in, [&](Tensor& o, const Tensor& i) { all_gather(o, i); })) return;
  check_tensor("all_gather", out);
  check_tensor("all_gather", in);
  check_all_gather_sizes(out, in, size_, [this] { return where(); });
  if (size_ == 1) return copy_local(out, in);
  if (in.numel() == 0) return;
  run(
      "all_gather", [&] { return out.str(); },
      [&] {
        NCCL_CHECK(ncclAllGather(in.data(), out.data(), static_cast<size_t>(in.numel()),
                                 nccl_dtype(in.dtype()), comm_.get(), stream_.get()));
      });
  bytes_sent_ += (size_ - 1) * static_cast<int64_t>(out.nbytes()) / size_;
}

void NcclCommunicator::broadcast(Tensor& t, int root) {
  if (on_host(t, t, [&](Tensor& d, const Tensor&) { broadcast(d, root); })) return;
  check_tensor("broadcast", t);
  check_root(root, size_, [this] { return where(); });
  if (size_ == 1 || t.numel() == 0) return;
  run(
      "broadcast", [&] { return t.str() + " from rank " + std::to_string(root); },
      [&] {
        NCCL_CHECK(ncclBroadcast(t.data(), t.data(), static_cast<size_t>(t.numel()),
                                 nccl_dtype(t.dtype()), root, comm_.get(), stream_.get()));
      });
  bytes_sent_ += static_cast<int64_t>(t.nbytes());
}

void NcclCommunicator::send(const Tensor& t, int peer) {
  check_tensor("send", t);
  check_peer("send", peer);
  if (t.numel() == 0) return;
  run(
      "send",
      [&] {
        return t.str() + " to rank " + std::to_string(peer) + " (global rank " +
               std::to_string(global_ranks_[peer]) + ")";
      },
      [&] {
        // ncclGroupEnd always runs: NCCL's group state is per thread and would otherwise leak
        // into the next call on any communicator.
        NCCL_CHECK(ncclGroupStart());
        const ncclResult_t sent = ncclSend(t.data(), static_cast<size_t>(t.numel()),
                                           nccl_dtype(t.dtype()), peer, comm_.get(), stream_.get());
        const ncclResult_t ended = ncclGroupEnd();
        NCCL_CHECK(sent);
        NCCL_CHECK(ended);
      });
  bytes_sent_ += static_cast<int64_t>(t.nbytes());
}

void NcclCommunicator::recv(Tensor& t, int peer) {
  check_tensor("recv", t);
  check_peer("recv", peer);
  if (t.numel() == 0) return;
  run(
      "recv",
      [&] {
        return t.str() + " from rank " + std::to_string(peer) + " (global rank " +
               std::to_string(global_ranks_[peer]) + ")";
      },
      [&] {
        NCCL_CHECK(ncclGroupStart());
        const ncclResult_t received =
            ncclRecv(t.data(), static_cast<size_t>(t.numel()), nccl_dtype(t.dtype()), peer,
                     comm_.get(), stream_.get());
        const ncclResult_t ended = ncclGroupEnd();
        NCCL_CHECK(received);
        NCCL_CHECK(ended);
      });
}

void NcclCommunicator::batch_send_recv(std::vector<P2POp>& ops) {
  std::vector<P2POp*> todo;
  for (P2POp& op : ops) {
    check_tensor(op.send ? "batch_send_recv (send)" : "batch_send_recv (recv)", op.tensor);
    check_peer(op.send ? "batch_send_recv (send)" : "batch_send_recv (recv)", op.peer);
    if (op.tensor.numel() > 0) todo.push_back(&op);
  }
  if (todo.empty()) return;
  run(
      "batch_send_recv",
      [&] {
        return std::to_string(todo.size()) + " transfers, the first " + todo.front()->tensor.str() +
               (todo.front()->send ? " to rank " : " from rank ") +
               std::to_string(todo.front()->peer);
      },
      [&] {
        // One NCCL group: its sends and receives progress together (ncclGroupEnd always runs,
        // as in send()).
        NCCL_CHECK(ncclGroupStart());
        ncclResult_t first = ncclSuccess;
        for (P2POp* op : todo) {
          const ncclResult_t r =
              op->send
                  ? ncclSend(op->tensor.data(), static_cast<size_t>(op->tensor.numel()),
                             nccl_dtype(op->tensor.dtype()), op->peer, comm_.get(), stream_.get())
                  : ncclRecv(op->tensor.data(), static_cast<size_t>(op->tensor.numel()),
                             nccl_dtype(op->tensor.dtype()), op->peer, comm_.get(), stream_.get());
          if (first == ncclSuccess) first = r;
        }
        const ncclResult_t ended = ncclGroupEnd();
        NCCL_CHECK(first);
        NCCL_CHECK(ended);
      });
  for (P2POp* op : todo)
    if (op->send) bytes_sent_ += static_cast<int64_t>(op->tensor.nbytes());
}

void NcclCommunicator::barrier() {
  if (size_ == 1) return;
  run(
      "barrier", [] { return std::string("no data"); },
      [&] {
        NCCL_CHECK(ncclAllReduce(scratch_.get(), scratch_.get(), 1, ncclFloat32, ncclSum,
                                 comm_.get(), stream_.get()));
      });
}

}  // namespace

std::unique_ptr<Communicator> make_nccl_communicator(Store& store, const std::string& group_name,
                                                     int rank_in_group,
                                                     std::vector<int64_t> global_ranks, int device,
                                                     std::chrono::milliseconds timeout) {
  return std::make_unique<NcclCommunicator>(store, group_name, rank_in_group,
                                            std::move(global_ranks), device, timeout);
}

ProcessGroups make_nccl_groups(const Topology& topology, Store& store, int device,
                               const TransportOptions& options) {
  return make_process_groups(
      topology, [&](const std::string& name, int rank, std::vector<int64_t> ranks) {
        // The checkpoint group carries host tensors (file names, sizes, checksums of a save's
        // commit) from a background thread: a CPU group, whatever the device.
        if (name == "checkpoint")
          return make_host_communicator(store, name, rank, std::move(ranks), options);
        return make_nccl_communicator(store, name, rank, std::move(ranks), device, options.timeout);
      });
}

}  // namespace mtnlg
