// MemoryCounter: live and peak bytes of the tensors a Backend allocated, for the measured side
// of `mtnlg-train --dry-run`'s memory plan (Backend::live_bytes / peak_bytes).
//
// A backend holds it by shared_ptr and each Storage deleter it creates holds a copy, so a tensor
// that outlives its backend still decrements a live counter. Thread-safe: tensors may be freed
// on any thread (lock-free atomics; the peak is raised with a compare-exchange loop).
#pragma once

#include <atomic>
#include <cstdint>

namespace mtnlg {

class MemoryCounter {
 public:
  void allocated(int64_t bytes) {
    const int64_t now = live_.fetch_add(bytes, std::memory_order_relaxed) + bytes;
    int64_t peak = peak_.load(std::memory_order_relaxed);
    while (now > peak && !peak_.compare_exchange_weak(peak, now, std::memory_order_relaxed)) {
    }
  }
  void freed(int64_t bytes) { live_.fetch_sub(bytes, std::memory_order_relaxed); }

  int64_t live() const { return live_.load(std::memory_order_relaxed); }
  int64_t peak() const { return peak_.load(std::memory_order_relaxed); }
  // The peak restarts from what is alive now.
  void reset_peak() { peak_.store(live(), std::memory_order_relaxed); }

 private:
  std::atomic<int64_t> live_{0};
  std::atomic<int64_t> peak_{0};
};

}  // namespace mtnlg
