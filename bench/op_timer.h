// OpTimer: an OpHook (core/backend.h) that adds each operation's wall time to a per-category
// total, for mtnlg-bench-train --profile.
//
// A category is "<phase>/<op>", where the phase is whatever the caller last set (forward,
// backward, optimizer, ...). GEMMs are further keyed by shape and transposes
// ("gemm NT m=1024 n=2304 k=768"), so each projection of the model shows up on its own line
// with its achieved GFLOP/s. Each operation ends with the backend's synchronize() so that a
// device backend is timed too (a no-op on CPU). Only the calls made from outside the backend are
// timed (Backend's front reports nothing nested). Attach it with Backend::set_op_hook; it does
// not own the backend. Not thread-safe (like every Backend).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <string>

#include "core/backend.h"

namespace mtnlg::bench {

struct OpTiming {
  int64_t calls = 0;
  double seconds = 0.0;
  double flops = 0.0;  // GEMMs and attention: their model FLOPs per call
};

class OpTimer final : public OpHook {
 public:
  explicit OpTimer(Backend& backend) : backend_(backend) {}

  // Names a GEMM for the report (e.g. "fc1 fwd" from its shape); empty: the shape alone.
  using GemmLabeler =
      std::function<std::string(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k)>;
  void set_gemm_labeler(GemmLabeler labeler) { labeler_ = std::move(labeler); }

  // Subsequent calls are attributed to `phase`.
  void set_phase(std::string phase) { phase_ = std::move(phase); }
  // Totals since construction or the last reset(), by category.
  const std::map<std::string, OpTiming>& timings() const { return timings_; }
  void reset() { timings_.clear(); }

  void begin(const OpCall& call) override;
  void end(const OpCall& call) noexcept override;

 private:
  using Clock = std::chrono::steady_clock;
  Backend& backend_;
  GemmLabeler labeler_;
  std::string phase_ = "other";
  std::map<std::string, OpTiming> timings_;
  Clock::time_point start_;
};

}  // namespace mtnlg::bench
