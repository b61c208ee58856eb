#include "core/id_checks.h"

#include <sstream>

namespace mtnlg {

Error bad_id_error(const char* op, const char* what, int64_t id, int64_t position, int64_t limit,
                   const char* fix, const char* when) {
  std::ostringstream os;
  os << op << ": " << what << " " << id << " at position " << position << " is outside [0, "
     << limit << ")" << when << "; " << fix;
  return invalid_argument(os.str(), op);
}

int DeferredIdChecks::add(const char* op, const char* what, int64_t limit, const char* fix) {
  if (full()) return -1;
  pending_.push_back({op, what, limit, fix});
  return pending() - 1;
}

int DeferredIdChecks::begin_read() {
  reading_ = std::move(pending_);
  pending_.clear();
  return static_cast<int>(reading_.size());
}

void DeferredIdChecks::end_read(const uint64_t* words) {
  const std::vector<Check> checks = std::move(reading_);
  reading_.clear();
  for (size_t i = 0; i < checks.size(); ++i) {
    if (words[i] == kClear) continue;
    const auto position = static_cast<int64_t>(words[i] >> 32);
    const auto id = static_cast<int32_t>(static_cast<uint32_t>(words[i]));
    throw bad_id_error(checks[i].op, checks[i].what, id, position, checks[i].limit, checks[i].fix,
                       " (found at the device's next synchronization with the host)");
  }
}

std::vector<DeferredIdChecks::Check> DeferredIdChecks::take_pending() {
  std::vector<Check> checks = std::move(pending_);
  pending_.clear();
  return checks;
}

bool DeferredIdChecks::replay_pending(const std::vector<Check>& checks) {
  // A recording without checks writes no word: whatever is pending stays as it is (a captured
  // optimizer step after the micro-batches' replays reads their words, waiting for nothing).
  if (checks.empty() || pending_ == checks) return true;
  if (!pending_.empty()) return false;
  pending_ = checks;
  return true;
}

}  // namespace mtnlg
