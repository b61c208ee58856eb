// PeerWatch: names the member of a group that is gone, for a wait its transport cannot end by
// itself. NCCL's kernels wait forever for a peer on this node that died (its shared-memory and
// NVLink transports see nothing), and its network transports say at best "remote error",
// without a rank. While a collective is stalled, its communicator asks check(), which looks for
// two signs:
//   - the peer said it failed (Store::failure_of; Runtime says it when an exception ends a
//     rank): "peer rank 1 (global rank 3) stopped with an error (on host h, pid p; its own output
//     says why)";
//   - the peer ran on this host (its process key, which publish_process wrote at start-up, names
//     this host and pid namespace) and its process is gone or a zombie: "peer rank 1 (global rank
//     3) is gone: its process (pid p on this host) ended without saying why (a signal such as
//     SIGKILL from the OOM killer, or a crash)".
// A peer killed on another host leaves no sign here: the transport's timeout ends that wait.
// The same signs (RankSigns) end a rendezvous wait for a key whose setter is gone (FileStore
// and PmixStore get()).
//
// Cost: nothing until the first look. A look reads each member's failure key and its process
// key (until it is there), and asks the kernel about the local members' pids. Store reads stop
// after kReadBudget per look and the next look goes on with the next member, so that a wait loop
// stays responsive on a store whose reads are slow (a PMIx read of an absent key may take a
// second). The time between looks doubles from `interval` up to `max_interval` (restart() starts
// over for the next wait): a long wait that is only slow (a peer writing a checkpoint) costs the
// store a few reads a minute per rank, not a world's worth a second.
//
// Thread safety: one thread per watch (its communicator's); the store is thread-safe.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "parallel/store.h"

namespace mtnlg {

// Writes this process's key (owned_key(kProcessKey, rank): "<host> <pid namespace> <pid>"), for
// the watches of the other ranks; Runtime does it at start-up when the world has several ranks.
void publish_process(Store& store, int64_t rank);
inline constexpr const char* kProcessKey = "process";

// "on host H, pid P": where this process runs, for error messages and Store::publish_failure.
std::string this_process();

// The signs that one rank has stopped: its failure (Store::failure_of) or, when it ran on this
// host, its process gone. PeerWatch reads them for a group's members; the stores' get() for the
// rank that sets the key it waits for.
class RankSigns {
 public:
  explicit RankSigns(int64_t global_rank) : rank_(global_rank) {}
  // "stopped with an error (on host H, pid P; its own output says why)" or "is gone: its process
  // (pid P on this host) ended without saying why (...)", or nullopt. Reads the failure key, and
  // the process key until it is there.
  std::optional<std::string> read(Store& store);
  // Its process, read before, is on this host and gone: costs no store read.
  bool local_process_gone() const;

 private:
  int64_t rank_;
  bool known_ = false;  // its process key was read
  bool local_ = false;  // on this host and in this pid namespace
  long pid_ = 0;
};

class PeerWatch {
 public:
  using Clock = std::chrono::steady_clock;
  static constexpr std::chrono::milliseconds kReadBudget{200};

  // `global_ranks`: the group's members in group-rank order; `rank_in_group`: this rank, never
  // looked at. `interval`: the least time between the first two looks of check(), doubling up
  // to `max_interval`.
  PeerWatch(Store& store, std::vector<int64_t> global_ranks, int rank_in_group,
            std::chrono::milliseconds interval = std::chrono::seconds(1),
            std::chrono::milliseconds max_interval = std::chrono::seconds(30));

  // A description of a member that is gone, or nullopt. Looks at once after construction or
  // restart(), then only when the current interval has passed since the previous look, or when
  // `now` is set (a transport's own error, to name the peer; a larger read budget). Never
  // throws: a store read that fails counts as no sign.
  std::optional<std::string> check(bool now = false) noexcept;
  // A new wait: the next check() looks at once, and the interval starts over.
  void restart();

  int64_t looks() const { return looks_; }  // how many times check() looked (for tests)

 private:
  std::optional<std::string> look(bool now);
  std::string name(size_t member) const;

  Store* store_;
  std::vector<int64_t> global_ranks_;
  int rank_;
  std::chrono::milliseconds first_interval_;
  std::chrono::milliseconds max_interval_;
  std::chrono::milliseconds interval_;  // the current one
  std::vector<RankSigns> signs_;        // per member
  size_t next_ = 0;                     // the member the next look starts at
  bool looked_ = false;
  Clock::time_point last_look_{};
  int64_t looks_ = 0;
};

// OperationRoll: which members of a group have not reached an operation that stalls, for a
// transport that cannot tell (NCCL says only that an operation did not complete). Each member
// whose wait in operation `seq` (the group's count of its operations, the same on every member)
// grows long says so through the store; at the timeout, the members that did not say it are
// named: hung, in another operation (their program took another path), or slower than the
// timeout. PyTorch's NCCL "desync debug" reports the same. Costs one store write per rank per
// stalled operation, and at a timeout the reads, within a budget.
class OperationRoll {
 public:
  // `prefix`: the group's keys ("nccl/<group>.<generation>"); `global_ranks` in group-rank order.
  OperationRoll(Store& store, std::string prefix, std::vector<int64_t> global_ranks,
                int rank_in_group);

  // Says that this rank waits in operation `seq`. Best effort; never throws.
  void reached(int64_t seq) noexcept;
  // The members that have not said they reached `seq`, as "peer rank 1 (global rank 5), ..." (the
  // first 8, then how many more), or empty when every other member did. Reads for at most
  // `budget`; members left unread are counted apart. Never throws.
  std::string missing(int64_t seq, std::chrono::milliseconds budget) noexcept;

 private:
  std::string key(int64_t seq, int64_t global_rank) const;

  Store* store_;
  std::string prefix_;
  std::vector<int64_t> global_ranks_;
  int rank_;
};

}  // namespace mtnlg
