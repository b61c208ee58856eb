// The life of one piece of device work recorded once and replayed (Backend::capture), shared by
// its owners (model/captured_micro_batch.h, optim/captured_adamw_step.h): the first run is plain,
// so that the buffers, plans and workspaces a recording may not allocate exist by then; the next
// records and replays; later ones replay. A recording whose key changed (something its calls took
// from the host, which the owner compares) records again. A stale one (CapturedWork::stale: the
// backend moved memory it holds by address, or Backend::invalidate_recordings) is dropped, and
// the next run is plain again before recording anew.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <utility>

#include "core/backend.h"

namespace mtnlg {

class ReplaySlot {
 public:
  explicit ReplaySlot(Backend& backend) : backend_(backend) {}

  // Whether the owner must run its calls plainly now (then call ran_plainly()): nothing has run
  // yet, or the recording went stale (dropped here).
  bool plain_next();
  void ran_plainly() { warmed_ = true; }

  // Records `calls` (not run) when nothing is recorded or `key_changed`; true when it recorded.
  // The previous recording is released first (a CUDA graph's memory goes before the next is
  // made). Only after a plain run. `calls` is copied only when it is recorded.
  template <typename F>
  bool record_if(bool key_changed, F&& calls) {
    if (!must_record(key_changed)) return false;
    record(std::function<void()>(std::forward<F>(calls)));
    return true;
  }
  // Runs the recording (CapturedWork::replay).
  void replay();

  // Recordings made so far, and the launches the current one replays as one (CapturedWork::
  // launches: a CUDA graph's nodes; -1 on the CPU or before the first).
  int64_t recordings() const { return recordings_; }
  int64_t launches() const { return work_ ? work_->launches() : -1; }

 private:
  bool must_record(bool key_changed) const;
  void record(std::function<void()> calls);

  Backend& backend_;
  std::unique_ptr<CapturedWork> work_;
  bool warmed_ = false;
  int64_t recordings_ = 0;
};

}  // namespace mtnlg
