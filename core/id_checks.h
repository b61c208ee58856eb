// Ids that come from data (token and target ids) index a table's rows: one outside [0, limit) is
// the data's fault, not the program's, so it is an invalid_argument naming the operation, the id,
// its position and the fix. Both backends raise this one error: the CPU's at the operation
// (core/cpu/id_checks.h), the CUDA backend's at its next synchronization with the host
// (DeferredIdChecks), so that checking costs the GPU no wait.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/hostdevice.h"
#include "core/status.h"

namespace mtnlg {

Error bad_id_error(const char* op, const char* what, int64_t id, int64_t position, int64_t limit,
                   const char* fix, const char* when = "");

// The host's half of a device's deferred id checks. Each check gets a slot: a 64-bit word on the
// device, set to kClear before the check runs, which the check's kernel lowers with atomicMin to
// pack(position, id) for every bad id (the lowest position wins). The device reads the words back
// in the same wait as a value it reads anyway (a loss, a norm, a copy to the host, a
// synchronize): begin_read() says how many words that copy holds and frees their slots (the copy
// and the words' reset are queued in stream order before any later check's kernel), end_read()
// takes the words once the wait is over and raises the first bad id in the order the checks ran.
class DeferredIdChecks {
 public:
  static constexpr int kSlots = 64;
  static constexpr uint64_t kClear = ~uint64_t{0};
  static constexpr MTNLG_HD uint64_t pack(uint32_t position, int32_t id) {
    return (uint64_t{position} << 32) | static_cast<uint32_t>(id);
  }

  // The slot of a new check of ids against [0, limit); the strings must outlive the check
  // (literals). -1 when every slot is pending: read them first.
  int add(const char* op, const char* what, int64_t limit, const char* fix);
  int pending() const { return static_cast<int>(pending_.size()); }
  bool full() const { return pending() == kSlots; }

  // How many words (slots 0..n) the read about to be queued copies back; they are free again
  // for new checks from here. A read begun and never ended (its wait threw) is dropped.
  int begin_read();
  // The words the read copied back, once its wait is over: forgets those checks, then throws the
  // first bad id among them (invalid_argument).
  void end_read(const uint64_t* words);

  // A captured step (Backend::capture): its checks' kernels were recorded, not run, from an
  // empty list, so they write slots 0..k; take_pending() hands those checks to the capture and
  // leaves the list empty. Each replay then calls replay_pending(checks): true when the list
  // holds exactly them again (added now, or still pending from an earlier replay whose words
  // were not read yet: the words keep the lowest bad position over the replays); false when
  // other checks are pending, which must be read first (the device waits), then call it again.
  // A recording without checks replays whatever is pending (it writes no word).
  struct Check {
    const char* op;
    const char* what;
    int64_t limit;
    const char* fix;
    bool operator==(const Check&) const = default;
  };
  std::vector<Check> take_pending();
  bool replay_pending(const std::vector<Check>& checks);

 private:
  std::vector<Check> pending_;
  std::vector<Check> reading_;
};

}  // namespace mtnlg
