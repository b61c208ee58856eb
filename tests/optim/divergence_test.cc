// The divergence check (optim/divergence.h): which steps stop a run, and the key each message
// names.
#include "optim/divergence.h"

#include <catch2/catch.hpp>

#include <cmath>
#include <limits>

#include "core/status.h"

namespace mtnlg {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// The error a step raises: its context (the key) and message; "" when it passes.
std::pair<std::string, std::string> verdict(const StepHealth& s, WeightsSource w) {
  try {
    check_step_finite(s, w, 0.5);
  } catch (const Error& e) {
    CHECK(e.code() == Code::kDiverged);
    return {e.context(), e.message()};
  }
  return {"", ""};
}

TEST_CASE("finite steps and fp16 overflows go on - a non-finite loss or norm stops the run") {
  CHECK(verdict({2.5, 1.0, false, 7}, WeightsSource::kInit).first.empty());
  // An overflow's norm is not finite; the loss scaler skips the update, the run goes on.
  CHECK(verdict({2.5, kInf, true, 7}, WeightsSource::kInit).first.empty());
  CHECK(verdict({kNaN, 1.0, false, 7}, WeightsSource::kInit).first == "optimizer.lr");
  CHECK(verdict({kNaN, kInf, true, 7}, WeightsSource::kInit).first == "optimizer.lr");
  const auto later = verdict({2.5, kNaN, false, 7}, WeightsSource::kInit);
  CHECK(later.first == "optimizer.lr");
  CHECK(later.second.find("training diverged at iteration 7 (loss 2.5, grad norm null)") !=
        std::string::npos);
}

TEST_CASE("before any update the starting weights are blamed - named by where they came from") {
  const auto init = verdict({kInf, 1.0, false, 1}, WeightsSource::kInit);
  CHECK(init.first == "model.init_method_std");
  CHECK(init.second.find("the first iteration's loss is null and grad norm 1") !=
        std::string::npos);
  CHECK(init.second.find("lower model.init_method_std (0.5; 0.02 is usual)") != std::string::npos);
  CHECK(verdict({kInf, 1.0, false, 1}, WeightsSource::kInitFrom).first == "model.init_from");
  const auto ckpt = verdict({2.0, kNaN, false, 1}, WeightsSource::kCheckpoint);
  CHECK(ckpt.first == "checkpoint.load");
  CHECK(ckpt.second.find("check the weights in checkpoint.load") != std::string::npos);
}

}  // namespace
}  // namespace mtnlg
