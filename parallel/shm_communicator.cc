#include "parallel/shm_communicator.h"

#include <fcntl.h>
#include <linux/futex.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <random>
#include <thread>
#include <utility>

#include "core/kernels/bf16_math.h"
#include "core/status.h"
#include "parallel/group_checks.h"
#include "parallel/launcher_env.h"
#include "parallel/link_communicator.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace mtnlg {

namespace {

using Clock = std::chrono::steady_clock;
using ms = std::chrono::milliseconds;

constexpr uint64_t kMagic = 0x6d746e6c67736d33ULL;   // "mtnlgsm3": no slots since 2026-11-28
constexpr size_t kMailboxBytes = size_t{128} << 10;  // per ordered pair: send/recv ring
// Bytes copied between publications of a ring index: the peer copies one piece while this side
// copies the next (a whole-ring copy then a whole-ring wait halves the bandwidth).
constexpr size_t kRingPiece = size_t{16} << 10;
constexpr size_t kLine = 64;
// From this many bytes (of one rank's part) a broadcast or all_gather copies once, straight from
// the owner's memory with process_vm_readv (Linux cross-memory attach, as Open MPI's vader),
// instead of into the segment and out again, which takes a barrier after each copy (1 MiB
// broadcast: 82 against 139 us here). 2 ranks here, us per call, the copy path against single
// copy: broadcast 8 KiB 2.0-2.3 / 1.2-1.4, 16 KiB 3.5 / 1.4, 32 KiB 6.1 / 2.3; all_gather of 8 KiB
// parts 3.0-3.7 / 1.6; at 4 KiB both about 1.2 (64 KiB was the threshold before these runs).
// (Measured against the slots the collectives used before parallel/link_communicator.h.)
// Reductions do not: see kReducePiece.
constexpr size_t kSingleCopyMin = size_t{8} << 10;
// Reductions (all_reduce, reduce_scatter) go through the rings at every size, summing 256 KiB
// a peer at a time (parallel/link_communicator.h's reduce_piece_bytes): measured against single
// copy from 256 KiB (2 ranks, 2026-11-28) the rings were 0.6-0.9x the time from 512 KiB up,
// where single copy was 1.3-1.5x the slots' algorithm this replaced (a descriptor, an
// acknowledgement and a process_vm_readv per peer and piece, against memcpy through the rings
// while the peer copies the next piece out).
constexpr size_t kReducePiece = size_t{256} << 10;
// A send/recv copies once from 1 MiB. Medians of 5 interleaved runs here (us per one-way
// transfer, single copy against the ring): 256 KiB 54/37, 512 KiB 88/72, 1 MiB 136/139, 2 MiB
// 228/315; runs varied up to 4x either way (the 2 cores are shared, and through the ring a
// message takes a hand-off between the ranks per 16 KiB piece, copied once it takes one). Never
// at or below the ring's size in any case: a send that fits returns as soon as its bytes are in
// the ring, and programs may rely on that (two ranks sending to each other before receiving),
// while a larger send already waits for the receiver to drain the ring, so waiting for it to
// read the whole message adds no way to deadlock.
constexpr size_t kSingleCopySendMin = size_t{1} << 20;
static_assert(kSingleCopySendMin > kMailboxBytes, "see kSingleCopySendMin");

struct Header {
  uint64_t magic;
  uint64_t nonce;
  uint64_t size;   // ranks
  uint64_t bytes;  // of the segment
};

struct alignas(kLine) Control {
  std::atomic<uint64_t> step;  // the last collective step this rank reached
  std::atomic<int64_t> pid;
  // Single copy: the address (in this rank's process) of the buffer its peers read in the current
  // step; at creation, of its mapping of the segment, for the probe.
  std::atomic<uint64_t> addr;
};

// Wakes a rank where it sleeps in wait_until (a futex word in the shared segment). A peer that
// publishes anything the rank may wait for (a step, a ring index, a send descriptor or its ack)
// checks `asleep` and, if set, raises `bell` and futex-wakes it. A line of its own: the peers
// poll the ranks' steps, and writes to a bell beside them would take those lines away.
struct alignas(kLine) Bell {
  std::atomic<uint32_t> bell;
  std::atomic<uint32_t> asleep;
};

// A single-copy send from i to j: the sender's buffer, published with the next sequence number;
// the receiver raises `ack` to that number once it has read it.
struct alignas(kLine) SendDescriptor {
  std::atomic<uint64_t> seq;
  std::atomic<uint64_t> addr;
  std::atomic<uint64_t> bytes;
  std::atomic<uint64_t> ack;
};

struct alignas(kLine) RingIndex {
  std::atomic<uint64_t> value;  // bytes written (head) or read (tail), ever
};

static_assert(std::atomic<uint64_t>::is_always_lock_free, "shared atomics must be lock-free");
static_assert(std::atomic<uint32_t>::is_always_lock_free &&
                  sizeof(std::atomic<uint32_t>) == sizeof(uint32_t),
              "a futex word is a plain 32-bit word");

// Futexes on words of the shared segment: not FUTEX_PRIVATE_FLAG, which only matches waiters of
// the same process (as std::atomic::wait does in libstdc++).
void futex_wait(std::atomic<uint32_t>& word, uint32_t seen, std::chrono::microseconds timeout) {
  timespec ts{};
  ts.tv_sec = static_cast<time_t>(timeout.count() / 1000000);
  ts.tv_nsec = static_cast<long>(timeout.count() % 1000000 * 1000);
  // Returns at a wake, at once if the word is no longer `seen` (EAGAIN), or at the timeout or a
  // signal: the caller checks its condition again in every case.
  ::syscall(SYS_futex, reinterpret_cast<uint32_t*>(&word), FUTEX_WAIT, seen, &ts, nullptr, 0);
}

void futex_wake(std::atomic<uint32_t>& word) {
  ::syscall(SYS_futex, reinterpret_cast<uint32_t*>(&word), FUTEX_WAKE, INT_MAX, nullptr, nullptr,
            0);
}

size_t round_up(size_t x) {
  return (x + kLine - 1) / kLine * kLine;
}

// Offsets of the parts of a segment for n ranks.
struct Layout {
  explicit Layout(size_t n) {
    control = round_up(sizeof(Header));
    bells = control + n * sizeof(Control);
    heads = bells + n * sizeof(Bell);
    tails = heads + n * n * sizeof(RingIndex);
    sends = tails + n * n * sizeof(RingIndex);
    mailboxes = round_up(sends + n * n * sizeof(SendDescriptor));
    bytes = mailboxes + n * n * kMailboxBytes;
  }
  size_t control, bells, heads, tails, sends, mailboxes, bytes;
};

void cpu_relax() {
#if defined(__x86_64__)
  _mm_pause();
#else
  std::this_thread::yield();
#endif
}

// A mapping of the segment; unmapped on destruction.
class Mapping {
 public:
  Mapping() = default;
  Mapping(void* p, size_t n) : base_(static_cast<char*>(p)), bytes_(n) {}
  ~Mapping() {
    if (base_ != nullptr) ::munmap(base_, bytes_);
  }
  Mapping(Mapping&& o) noexcept : base_(std::exchange(o.base_, nullptr)), bytes_(o.bytes_) {}
  Mapping& operator=(Mapping&& o) noexcept {
    std::swap(base_, o.base_);
    std::swap(bytes_, o.bytes_);
    return *this;
  }
  char* base() const { return base_; }

 private:
  char* base_ = nullptr;
  size_t bytes_ = 0;
};

// Creates, sizes (committing the memory: a full /dev/shm fails here, not with SIGBUS later) and
// maps a new segment; an empty mapping on any failure.
Mapping create_segment(const std::string& name, size_t bytes) {
  const int fd = ::shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
  if (fd < 0) return {};
  Mapping m;
  if (::posix_fallocate(fd, 0, static_cast<off_t>(bytes)) == 0) {
    void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p != MAP_FAILED) m = Mapping(p, bytes);
  }
  ::close(fd);
  if (m.base() == nullptr) ::shm_unlink(name.c_str());
  return m;
}

Mapping open_segment(const std::string& name, size_t bytes) {
  const int fd = ::shm_open(name.c_str(), O_RDWR, 0600);
  if (fd < 0) return {};
  Mapping m;
  struct stat st {};
  if (::fstat(fd, &st) == 0 && static_cast<size_t>(st.st_size) == bytes) {
    void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p != MAP_FAILED) m = Mapping(p, bytes);
  }
  ::close(fd);
  return m;
}

class ShmCommunicator final : public LinkCommunicator {
 public:
  ShmCommunicator(std::string name, int rank, std::vector<int64_t> global_ranks, ms timeout,
                  Mapping mapping, bool single_copy)
      : LinkCommunicator(std::move(name), rank, std::move(global_ranks),
                         single_copy ? ", shared memory, single copy" : ", shared memory"),
        timeout_(timeout),
        spin_(shm_spin(launcher_local_ranks([](const char* k) { return std::getenv(k); }),
                       static_cast<int>(global_ranks_.size()),
                       static_cast<int>(std::thread::hardware_concurrency()))),
        layout_(global_ranks_.size()),
        map_(std::move(mapping)),
        single_copy_(single_copy),
        sent_(global_ranks_.size(), 0),
        received_(global_ranks_.size(), 0) {
    for (int p = 0; p < size_; ++p) {
      const auto pid = static_cast<pid_t>(control(p).pid.load(std::memory_order_acquire));
      pid_.push_back(pid);
      // A peer whose pid this process cannot see (another pid namespace) is not checked.
      watch_pid_.push_back(pid > 0 && ::kill(pid, 0) == 0 ? pid : 0);
    }
  }
  ShmCommunicator(const ShmCommunicator&) = delete;
  ShmCommunicator& operator=(const ShmCommunicator&) = delete;

  const char* transport() const override { return "shm"; }

 private:
  // The link of parallel/link_communicator.h: begin() refuses after a failure and keeps the
  // operation for messages; exchange() drives the transfers through the pairs' rings or, single
  // copy, straight from the sender's memory; the barrier is the flags' phase().
  void begin(Op op, const Tensor* data, const char* dir, int other) override;
  void exchange(std::vector<Transfer>& xs) override;
  size_t reduce_piece_bytes() const override { return kReducePiece; }
  void do_barrier() override;

 private:
  Control& control(int r) const {
    return *reinterpret_cast<Control*>(map_.base() + layout_.control +
                                       static_cast<size_t>(r) * sizeof(Control));
  }
  Bell& bell(int r) const {
    return *reinterpret_cast<Bell*>(map_.base() + layout_.bells +
                                    static_cast<size_t>(r) * sizeof(Bell));
  }
  std::atomic<uint64_t>& head(int from, int to) const {
    return reinterpret_cast<RingIndex*>(map_.base() + layout_.heads)[from * size_ + to].value;
  }
  std::atomic<uint64_t>& tail(int from, int to) const {
    return reinterpret_cast<RingIndex*>(map_.base() + layout_.tails)[from * size_ + to].value;
  }
  char* mailbox(int from, int to) const {
    return map_.base() + layout_.mailboxes + static_cast<size_t>(from * size_ + to) * kMailboxBytes;
  }
  SendDescriptor& send_descriptor(int from, int to) const {
    return reinterpret_cast<SendDescriptor*>(map_.base() + layout_.sends)[from * size_ + to];
  }

  // Point-to-point ops in progress: advance() moves one as far as it can without waiting (true if
  // it moved), can_advance() says whether it could move now, exchange() drives them all until
  // done, each after the earlier ones on the same peer and direction.
  struct Pending {
    Transfer* op;
    size_t pos = 0;       // bytes through the ring so far
    bool posted = false;  // single copy: descriptor published (send) / sequence taken (recv)
    uint64_t seq = 0;
    bool done = false;
  };
  bool advance(Pending& x);
  bool can_advance(const Pending& x) const;

  // Single copy: copies `bytes` at `addr` in peer's process into dst; failures (the peer died,
  // the kernel refused) mark the communicator failed and throw naming the peer.
  void read_from(int peer, void* dst, uint64_t addr, size_t bytes);

  // Spins briefly, then sleeps on this rank's bell until ready(); past the timeout, or when the
  // peer blocking(peer) names has died, marks the communicator failed and throws.
  template <typename Ready, typename Blocking>
  void wait_until(Ready&& ready, Blocking&& blocking);
  // After publishing something `peer` may wait for: if it sleeps on its bell, rings it awake.
  void ring(int peer) const;
  // Raises this rank's step and waits until every rank has reached it.
  void phase();
  // The operation begin() started, for errors: built only on a failure.
  std::string current() const;
  // The bytes from which a transfer copies once: a collective's (every rank in it at once) from
  // kSingleCopyMin, a send/recv's from kSingleCopySendMin.
  size_t single_copy_from() const { return single_copy_from_; }

  ms timeout_;
  std::chrono::microseconds spin_;  // see shm_spin
  Layout layout_;
  Mapping map_;
  bool single_copy_;
  std::vector<pid_t> pid_;
  std::vector<pid_t> watch_pid_;
  uint64_t step_ = 0;
  // Single-copy sends posted to / received from each peer (sequence numbers of SendDescriptor).
  std::vector<uint64_t> sent_, received_;
  // The operation running, for errors (see run()).
  const char* op_ = "";  // op_name() of the operation begin() started
  const Tensor* data_ = nullptr;
  const char* dir_ = "";
  int other_ = -1;
  size_t single_copy_from_ = kSingleCopySendMin;  // for the operation begin() started
  std::string failure_;
};

// Why a futex and not yields or short sleeps: a waiting rank that yielded for its first 2 ms and
// then slept 50 us at a time starved every other process of its cores for seconds when the ranks
// were not pinned (two ranks under srun on 2 cores: a shell's 0.1 s loop stalled 3-9 s, Slurm's
// signal took seconds to reach the ranks); asleep in the kernel it takes no CPU until a peer
// publishes.
template <typename Ready, typename Blocking>
void ShmCommunicator::wait_until(Ready&& ready, Blocking&& blocking) {
  // Spin first (for spin_, see shm_spin): a wait inside a collective mostly ends within
  // microseconds, and a rank woken from the futex pays the scheduler's wake-up latency. Measured
  // here (2 ranks, 2 cores): after 100 us a 1-2 MiB send/recv took 1.3-1.5x as long as the old
  // loop's, after 250 us as long (4 MiB: 1.2-1.4x), after 500 us all sizes as long but a shell
  // beside two unpinned ranks stalled up to 1 s (0.25 s after 250 us; 3-9 s with the old loop).
  const auto spin_until = Clock::now() + spin_;
  for (int i = 0;; ++i) {
    if (ready()) return;
    cpu_relax();
    if (i % 64 == 63 && Clock::now() >= spin_until) break;
  }
  Bell& me = bell(rank_);
  const auto start = Clock::now();
  auto checked = start;
  for (;;) {
    // Announce the sleep, then look once more (Dekker's handshake with ring(): the fences order
    // each side's store before its load, so either this load sees the peer's publication or the
    // peer sees `asleep` and rings). The bell is read before that look: a ring after it moves the
    // word, and the futex then does not sleep.
    const uint32_t seen = me.bell.load(std::memory_order_seq_cst);
    me.asleep.store(1, std::memory_order_seq_cst);
    std::atomic_thread_fence(std::memory_order_seq_cst);
    // A bounded nap: a dead peer rings no bell, and the checks below run at least this often.
    if (!ready()) futex_wait(me.bell, seen, std::chrono::milliseconds(5));
    me.asleep.store(0, std::memory_order_relaxed);
    if (ready()) return;
    const auto now = Clock::now();
    if (now - checked < std::chrono::milliseconds(5)) continue;
    checked = now;
    const auto waited = now - start;
    const int peer = blocking();
    const bool dead =
        peer >= 0 && watch_pid_[peer] > 0 && ::kill(watch_pid_[peer], 0) != 0 && errno == ESRCH;
    if (!dead && waited < timeout_) continue;
    if (ready()) return;
    const auto ms_waited = std::chrono::duration_cast<ms>(waited).count();
    failure_ = current() + " on " + where() + " failed after " + std::to_string(ms_waited) +
               " ms (timeout " + std::to_string(timeout_.count()) + " ms): " +
               (peer < 0 ? std::string("a peer did not answer")
                         : peer_str(peer) +
                               (dead ? " died (its process is gone)" : " did not arrive in time"));
    throw io_error(failure_, "shm");
  }
}

void ShmCommunicator::ring(int peer) const {
  Bell& b = bell(peer);
  std::atomic_thread_fence(std::memory_order_seq_cst);  // the publication before the look
  if (b.asleep.load(std::memory_order_relaxed) == 0) return;
  b.bell.fetch_add(1, std::memory_order_relaxed);
  futex_wake(b.bell);
}

void ShmCommunicator::phase() {
  const uint64_t step = ++step_;
  control(rank_).step.store(step, std::memory_order_release);
  for (int p = 0; p < size_; ++p)
    if (p != rank_) ring(p);
  auto missing = [&] {
    for (int p = 0; p < size_; ++p)
      if (control(p).step.load(std::memory_order_acquire) < step) return p;
    return -1;
  };
  wait_until([&] { return missing() < 0; }, missing);
}

void ShmCommunicator::begin(Op op, const Tensor* data, const char* dir, int other) {
  if (!failure_.empty())
    throw io_error(std::string(op_name(op)) + " on " + where() +
                       ": the communicator failed earlier and cannot be used: " + failure_,
                   "shm");
  op_ = op_name(op);
  data_ = data;
  dir_ = dir;
  other_ = other;
  single_copy_from_ = point_to_point(op) ? kSingleCopySendMin
                      : reduces(op)      ? SIZE_MAX
                                         : kSingleCopyMin;
}

std::string ShmCommunicator::current() const {
  return std::string(op_) + " of " + (data_ != nullptr ? data_->str() : "no data") +
         (other_ >= 0 ? dir_ + std::to_string(other_) : "");
}

void ShmCommunicator::read_from(int peer, void* dst, uint64_t addr, size_t bytes) {
  char* out = static_cast<char*>(dst);
  for (size_t done = 0; done < bytes;) {
    iovec local{out + done, bytes - done};
    iovec remote{reinterpret_cast<void*>(addr + done), bytes - done};
    const ssize_t n = ::process_vm_readv(pid_[peer], &local, 1, &remote, 1, 0);
    if (n > 0) {
      done += static_cast<size_t>(n);
      continue;
    }
    const int err = n == 0 ? EFAULT : errno;
    if (err == EINTR) continue;
    failure_ = current() + " on " + where() + ": reading " + std::to_string(bytes) +
               " bytes from " + peer_str(peer) +
               (err == ESRCH ? " failed: it died (its process is gone)"
                             : std::string(" with process_vm_readv failed: ") + std::strerror(err) +
                                   "; the fix: MTNLG_SHM_SINGLE_COPY=0 copies through the segment");
    throw io_error(failure_, "shm");
  }
}

bool ShmCommunicator::advance(Pending& x) {
  Transfer& op = *x.op;
  const size_t bytes = op.bytes;
  const int peer = op.peer;
  if (single_copy_ && bytes >= single_copy_from()) {
    if (op.send) {
      SendDescriptor& d = send_descriptor(rank_, peer);
      bool moved = false;
      if (!x.posted) {  // posting never waits
        x.seq = ++sent_[peer];
        d.addr.store(reinterpret_cast<uint64_t>(op.data), std::memory_order_relaxed);
        d.bytes.store(bytes, std::memory_order_relaxed);
        d.seq.store(x.seq, std::memory_order_release);
        ring(peer);
        x.posted = moved = true;
      }
      x.done = d.ack.load(std::memory_order_acquire) >= x.seq;
      return moved || x.done;  // true only if something changed: else exchange() waits
    }
    SendDescriptor& d = send_descriptor(peer, rank_);
    if (!x.posted) {
      x.seq = ++received_[peer];
      x.posted = true;
    }
    if (d.seq.load(std::memory_order_acquire) < x.seq) return false;
    const uint64_t sent = d.bytes.load(std::memory_order_relaxed);
    if (sent != bytes) {
      failure_ = current() + " on " + where() + ": " + peer_str(peer) + " sent " +
                 std::to_string(sent) + " bytes, this rank expects " + std::to_string(bytes) +
                 " (the sender and receiver disagree on the shape)";
      throw io_error(failure_, "shm");
    }
    read_from(peer, op.data, d.addr.load(std::memory_order_relaxed), bytes);
    d.ack.store(x.seq, std::memory_order_release);
    ring(peer);
    x.done = true;
    return true;
  }
  // Through the pair's ring, a piece at a time, each piece published as soon as it is copied.
  const int from = op.send ? rank_ : peer, to = op.send ? peer : rank_;
  auto& h = head(from, to);
  auto& tl = tail(from, to);
  char* box = mailbox(from, to);
  char* data = op.data;
  bool moved = false;
  while (x.pos < bytes) {
    size_t n = 0;
    if (op.send) {
      const uint64_t written = h.load(std::memory_order_relaxed);
      const uint64_t room = kMailboxBytes - (written - tl.load(std::memory_order_acquire));
      const size_t at = written % kMailboxBytes;
      n = std::min({bytes - x.pos, static_cast<size_t>(room), kMailboxBytes - at, kRingPiece});
      if (n == 0) break;
      std::memcpy(box + at, data + x.pos, n);
      h.store(written + n, std::memory_order_release);
      ring(peer);
    } else {
      const uint64_t read = tl.load(std::memory_order_relaxed);
      const uint64_t ready = h.load(std::memory_order_acquire) - read;
      const size_t at = read % kMailboxBytes;
      n = std::min({bytes - x.pos, static_cast<size_t>(ready), kMailboxBytes - at, kRingPiece});
      if (n == 0) break;
      std::memcpy(data + x.pos, box + at, n);
      tl.store(read + n, std::memory_order_release);
      ring(peer);
    }
    x.pos += n;
    moved = true;
  }
  x.done = x.pos == bytes;
  return moved;
}

bool ShmCommunicator::can_advance(const Pending& x) const {
  const Transfer& op = *x.op;
  const int peer = op.peer;
  if (single_copy_ && op.bytes >= single_copy_from()) {
    if (!x.posted) return true;
    if (op.send) return send_descriptor(rank_, peer).ack.load(std::memory_order_acquire) >= x.seq;
    return send_descriptor(peer, rank_).seq.load(std::memory_order_acquire) >= x.seq;
  }
  if (op.send)
    return head(rank_, peer).load(std::memory_order_relaxed) -
               tail(rank_, peer).load(std::memory_order_acquire) <
           kMailboxBytes;
  return head(peer, rank_).load(std::memory_order_acquire) !=
         tail(peer, rank_).load(std::memory_order_relaxed);
}

void ShmCommunicator::exchange(std::vector<Transfer>& ops) {
  std::vector<Pending> xs;
  for (Transfer& op : ops) xs.push_back(Pending{&op});
  // The ops each one waits for: an earlier one on the same peer and direction (one ring, one
  // sequence of descriptors per ordered pair).
  const auto blocked = [&](size_t i) {
    for (size_t j = 0; j < i; ++j)
      if (!xs[j].done && xs[j].op->peer == xs[i].op->peer && xs[j].op->send == xs[i].op->send)
        return true;
    return false;
  };
  for (;;) {
    bool all_done = true, moved = false;
    for (size_t i = 0; i < xs.size(); ++i) {
      if (xs[i].done) continue;
      if (!blocked(i)) moved = advance(xs[i]) || moved;
      all_done = all_done && xs[i].done;
    }
    if (all_done) return;
    if (moved) continue;
    // Nothing can move: wait until one can, naming the first op's peer if none ever does.
    const auto first = [&]() -> size_t {
      for (size_t i = 0; i < xs.size(); ++i)
        if (!xs[i].done) return i;
      return 0;
    };
    wait_until(
        [&] {
          for (size_t i = 0; i < xs.size(); ++i)
            if (!xs[i].done && !blocked(i) && can_advance(xs[i])) return true;
          return false;
        },
        [&] { return xs[first()].op->peer; });
  }
}

void ShmCommunicator::do_barrier() {
  begin(Op::kBarrier, nullptr, "", -1);
  phase();
}

std::string hex64(uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof(buf), "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

}  // namespace

std::unique_ptr<Communicator> try_make_shm_communicator(Store& store, const std::string& group_name,
                                                        int rank, std::vector<int64_t> global_ranks,
                                                        const ShmOptions& options) {
  const std::chrono::milliseconds timeout = options.timeout;
  const int size = static_cast<int>(global_ranks.size());
  MTNLG_CHECK_MSG(size >= 1 && 0 <= rank && rank < size,
                  "group '" << group_name << "': rank " << rank << " outside a group of " << size);
  const std::string group =
      group_name + "." + std::to_string(global_ranks[0]) + "x" + std::to_string(size);
  const int64_t generation = store.next_use("shm/" + group + "/" + std::to_string(rank));
  const std::string prefix = "shm/" + group + "." + std::to_string(generation);
  const Layout layout(static_cast<size_t>(size));
  Mapping map;
  std::string name;
  uint64_t nonce = 0;
  if (rank == 0) {
    std::random_device rd;
    nonce = (static_cast<uint64_t>(rd()) << 32) ^ rd() ^ static_cast<uint64_t>(::getpid());
    name = "/mtnlg." + std::to_string(::getpid()) + "." + hex64(nonce);
    map = create_segment(name, layout.bytes);
    if (map.base() != nullptr) {
      auto* h = reinterpret_cast<Header*>(map.base());
      h->magic = kMagic;
      h->nonce = nonce;
      h->size = static_cast<uint64_t>(size);
      h->bytes = layout.bytes;
    } else {
      name.clear();
    }
    const std::string value = name + "\n" + hex64(nonce);
    store.set(prefix + "/" + owned_key("segment", global_ranks[0]),
              std::vector<uint8_t>(value.begin(), value.end()));
  } else {
    const std::vector<uint8_t> v =
        store.get(prefix + "/" + owned_key("segment", global_ranks[0]), timeout);
    const std::string value(v.begin(), v.end());
    const size_t nl = value.find('\n');
    name = value.substr(0, nl);
    if (nl != std::string::npos) nonce = std::strtoull(value.c_str() + nl + 1, nullptr, 16);
    if (!name.empty()) {
      map = open_segment(name, layout.bytes);
      const auto* h = reinterpret_cast<const Header*>(map.base());
      // Another node's /dev/shm, or another segment under the name: not ours.
      if (map.base() != nullptr &&
          (h->magic != kMagic || h->nonce != nonce || h->size != static_cast<uint64_t>(size)))
        map = Mapping();
    }
  }
  const bool ok = map.base() != nullptr;
  if (ok) {
    auto& c = *reinterpret_cast<Control*>(map.base() + layout.control +
                                          static_cast<size_t>(rank) * sizeof(Control));
    c.pid.store(::getpid(), std::memory_order_release);
    c.addr.store(reinterpret_cast<uint64_t>(map.base()), std::memory_order_release);
  }
  store.set(prefix + "/" + owned_key("ok", global_ranks[rank]), {static_cast<uint8_t>(ok)});
  bool all = true;
  for (int p = 0; p < size; ++p)
    all = store.get(prefix + "/" + owned_key("ok", global_ranks[p]), timeout).at(0) != 0 && all;
  // Every rank has mapped the segment (or given up): the name is no longer needed.
  if (rank == 0 && !name.empty()) ::shm_unlink(name.c_str());
  if (!all) return nullptr;
  // Single copy where every rank can read every other's memory (the kernel may refuse: Yama's
  // ptrace_scope, a container's seccomp policy): each reads its peers' headers through their own
  // mappings and compares them with its own.
  bool can_read = options.single_copy;
  for (int p = 0; can_read && p < size; ++p) {
    if (p == rank) continue;
    const auto& c = *reinterpret_cast<const Control*>(map.base() + layout.control +
                                                      static_cast<size_t>(p) * sizeof(Control));
    Header theirs{};
    iovec local{&theirs, sizeof(theirs)};
    iovec remote{reinterpret_cast<void*>(c.addr.load(std::memory_order_acquire)), sizeof(theirs)};
    const auto pid = static_cast<pid_t>(c.pid.load(std::memory_order_acquire));
    can_read =
        ::process_vm_readv(pid, &local, 1, &remote, 1, 0) == static_cast<ssize_t>(sizeof(theirs)) &&
        std::memcmp(&theirs, map.base(), sizeof(theirs)) == 0;
  }
  store.set(prefix + "/" + owned_key("single_copy", global_ranks[rank]),
            {static_cast<uint8_t>(can_read)});
  bool single_copy = true;
  for (int p = 0; p < size; ++p)
    single_copy =
        store.get(prefix + "/" + owned_key("single_copy", global_ranks[p]), timeout).at(0) != 0 &&
        single_copy;
  return std::make_unique<ShmCommunicator>(group_name, rank, std::move(global_ranks), timeout,
                                           std::move(map), single_copy);
}

std::chrono::microseconds shm_spin(int node_ranks, int group_size, int cores) {
  const int ranks = std::max(node_ranks, group_size);
  return std::chrono::microseconds(cores > 0 && ranks <= cores ? 250 : 0);
}

}  // namespace mtnlg
