#include "core/replay_slot.h"

#include <utility>

#include "core/status.h"

namespace mtnlg {

bool ReplaySlot::plain_next() {
  if (work_ && work_->stale()) {
    work_.reset();
    warmed_ = false;
  }
  return !warmed_;
}

bool ReplaySlot::must_record(bool key_changed) const {
  MTNLG_CHECK_MSG(warmed_, "ReplaySlot: a recording before a plain run (plain_next)");
  return !work_ || key_changed;
}

void ReplaySlot::record(std::function<void()> calls) {
  work_.reset();
  work_ = backend_.capture(std::move(calls));
  ++recordings_;
}

void ReplaySlot::replay() {
  MTNLG_CHECK_MSG(work_ != nullptr, "ReplaySlot: replay() before record_if()");
  work_->replay();
}

}  // namespace mtnlg
