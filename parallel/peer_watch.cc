#include "parallel/peer_watch.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <exception>
#include <fstream>
#include <sstream>
#include <utility>

#include "core/status.h"

namespace mtnlg {

namespace {

std::string host_name() {
  char host[256] = {};
  if (::gethostname(host, sizeof host - 1) != 0 || host[0] == '\0') return "?";
  return host;
}

// "<host> <pid namespace>": two processes with the same one see each other's pids. The
// namespace ("pid:[4026531836]") tells apart containers that share a host name; "?" when it
// cannot be read, which matches nothing.
std::string host_and_namespace() {
  char ns[128] = {};
  const ssize_t n = ::readlink("/proc/self/ns/pid", ns, sizeof ns - 1);
  return host_name() + " " + (n > 0 ? std::string(ns, static_cast<size_t>(n)) : "?");
}

// True when `pid` no longer runs: no such process, or a zombie its parent has not reaped yet.
bool process_gone(long pid) {
  if (::kill(static_cast<pid_t>(pid), 0) != 0) return errno == ESRCH;
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(stat, line)) return false;  // between kill and the read: look again later
  // "pid (comm) S ...": the state follows the last ')' (comm may hold anything).
  const auto close = line.rfind(')');
  if (close == std::string::npos || close + 2 >= line.size()) return false;
  const char state = line[close + 2];
  return state == 'Z' || state == 'X';
}

}  // namespace

void publish_process(Store& store, int64_t rank) {
  const std::string value = host_and_namespace() + " " + std::to_string(::getpid());
  store.set(owned_key(kProcessKey, rank), std::vector<uint8_t>(value.begin(), value.end()));
}

std::string this_process() {
  return "on host " + host_name() + ", pid " + std::to_string(::getpid());
}

std::optional<std::string> RankSigns::read(Store& store) {
  if (const auto detail = store.failure_of(rank_))
    return "stopped with an error (" + *detail + "; its own output says why)";
  if (!known_) {
    if (const auto value = store.try_get(owned_key(kProcessKey, rank_))) {
      known_ = true;
      const std::string text(value->begin(), value->end());
      const std::string here = host_and_namespace();
      const auto space = text.rfind(' ');
      if (space != std::string::npos && text.compare(0, space, here) == 0 &&
          here.find('?') == std::string::npos) {
        std::istringstream(text.substr(space + 1)) >> pid_;
        local_ = pid_ > 0;
      }
    }
  }
  if (local_process_gone())
    return "is gone: its process (pid " + std::to_string(pid_) +
           " on this host) ended without saying why (a signal such as SIGKILL from the OOM "
           "killer, or a crash)";
  return std::nullopt;
}

bool RankSigns::local_process_gone() const {
  return local_ && process_gone(pid_);
}

PeerWatch::PeerWatch(Store& store, std::vector<int64_t> global_ranks, int rank_in_group,
                     std::chrono::milliseconds interval, std::chrono::milliseconds max_interval)
    : store_(&store),
      global_ranks_(std::move(global_ranks)),
      rank_(rank_in_group),
      first_interval_(interval),
      max_interval_(std::max(interval, max_interval)),
      interval_(interval) {
  MTNLG_CHECK_MSG(0 <= rank_ && static_cast<size_t>(rank_) < global_ranks_.size(),
                  "PeerWatch: rank " << rank_ << " outside a group of " << global_ranks_.size());
  signs_.reserve(global_ranks_.size());
  for (const int64_t g : global_ranks_) signs_.emplace_back(g);
}

std::string PeerWatch::name(size_t member) const {
  return "peer rank " + std::to_string(member) + " (global rank " +
         std::to_string(global_ranks_[member]) + ")";
}

void PeerWatch::restart() {
  looked_ = false;
  interval_ = first_interval_;
}

std::optional<std::string> PeerWatch::check(bool now) noexcept {
  try {
    return look(now);
  } catch (const std::exception&) {  // a store that cannot be read tells nothing
    last_look_ = Clock::now();
    return std::nullopt;
  }
}

std::optional<std::string> PeerWatch::look(bool now) {
  const auto start = Clock::now();
  if (!now && looked_ && start - last_look_ < interval_) return std::nullopt;
  if (looked_ && !now) interval_ = std::min(interval_ * 2, max_interval_);
  looked_ = true;
  ++looks_;
  const size_t n = global_ranks_.size();
  // Local pids first: they cost no store read.
  for (size_t m = 0; m < n; ++m)
    if (signs_[m].local_process_gone()) {
      last_look_ = Clock::now();
      const auto gone = signs_[m].read(*store_);  // its failure, if it said one, names it better
      return name(m) + " " + gone.value_or("is gone");
    }
  const auto budget = now ? kReadBudget * 10 : kReadBudget;
  std::optional<std::string> gone;
  for (size_t i = 0; i < n && !gone; ++i) {
    const size_t m = next_;
    next_ = (next_ + 1) % n;
    if (m == static_cast<size_t>(rank_)) continue;
    if (const auto sign = signs_[m].read(*store_)) gone = name(m) + " " + *sign;
    if (Clock::now() - start > budget) break;
  }
  last_look_ = Clock::now();
  return gone;
}

OperationRoll::OperationRoll(Store& store, std::string prefix, std::vector<int64_t> global_ranks,
                             int rank_in_group)
    : store_(&store),
      prefix_(std::move(prefix)),
      global_ranks_(std::move(global_ranks)),
      rank_(rank_in_group) {
  MTNLG_CHECK_MSG(
      0 <= rank_ && static_cast<size_t>(rank_) < global_ranks_.size(),
      "OperationRoll: rank " << rank_ << " outside a group of " << global_ranks_.size());
}

std::string OperationRoll::key(int64_t seq, int64_t global_rank) const {
  return owned_key(prefix_ + "/reached." + std::to_string(seq), global_rank);
}

void OperationRoll::reached(int64_t seq) noexcept {
  try {
    store_->set(key(seq, global_ranks_[static_cast<size_t>(rank_)]), {});
  } catch (...) {  // best effort: the timeout's message then names this rank too
  }
}

std::string OperationRoll::missing(int64_t seq, std::chrono::milliseconds budget) noexcept {
  constexpr size_t kNamed = 8;
  const auto start = std::chrono::steady_clock::now();
  std::string names;
  size_t absent = 0, unread = 0;
  for (size_t m = 0; m < global_ranks_.size(); ++m) {
    if (m == static_cast<size_t>(rank_)) continue;
    if (std::chrono::steady_clock::now() - start > budget) {
      ++unread;
      continue;
    }
    bool there = false;
    try {
      there = store_->try_get(key(seq, global_ranks_[m])).has_value();
    } catch (...) {  // unreadable: not known to be there
    }
    if (there) continue;
    if (absent++ < kNamed)
      names += (names.empty() ? "" : ", ") + std::string("peer rank ") + std::to_string(m) +
               " (global rank " + std::to_string(global_ranks_[m]) + ")";
  }
  if (absent > kNamed) names += " and " + std::to_string(absent - kNamed) + " more";
  if (unread > 0)
    names += std::string(names.empty() ? "" : "; ") + std::to_string(unread) +
             " member(s) not read in time";
  return names;
}

}  // namespace mtnlg
