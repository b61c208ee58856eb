#include <catch2/catch.hpp>

#include <cmath>
#include <numbers>

#include "optim/lr_schedule.h"

using namespace mtnlg;

namespace {

LrSchedule make(DecayStyle style, double lr = 1.0, double min_lr = 0.1) {
  OptimizerConfig opt;
  opt.lr = lr;
  opt.min_lr = min_lr;
  ScheduleConfig s;
  s.warmup_tokens = 100;
  s.decay_tokens = 1100;
  s.decay_style = style;
  return LrSchedule(opt, s);
}

}  // namespace

TEST_CASE("warmup is linear from 0 to lr over warmup_tokens") {
  const auto s = make(DecayStyle::kCosine);
  CHECK(s.lr_at(0) == 0.0);
  CHECK(s.lr_at(25) == Approx(0.25));
  CHECK(s.lr_at(100) == Approx(1.0));
}

TEST_CASE("cosine decay reaches min_lr at decay_tokens and stays there") {
  const auto s = make(DecayStyle::kCosine);
  CHECK(s.lr_at(600) == Approx(0.1 + 0.9 * 0.5));  // halfway: cos(pi/2) = 0
  CHECK(s.lr_at(350) == Approx(0.1 + 0.9 * 0.5 * (std::cos(std::numbers::pi * 0.25) + 1)));
  CHECK(s.lr_at(1100) == Approx(0.1));
  CHECK(s.lr_at(5000) == Approx(0.1));
}

TEST_CASE("linear decay") {
  const auto s = make(DecayStyle::kLinear);
  CHECK(s.lr_at(600) == Approx(0.55));
  CHECK(s.lr_at(850) == Approx(0.1 + 0.9 * 0.25));
  CHECK(s.lr_at(2000) == Approx(0.1));
}

TEST_CASE("constant keeps the peak after warmup") {
  const auto s = make(DecayStyle::kConstant);
  CHECK(s.lr_at(50) == Approx(0.5));
  CHECK(s.lr_at(600) == 1.0);
  CHECK(s.lr_at(100000) == 1.0);
}

TEST_CASE("no warmup starts at the peak") {
  OptimizerConfig opt;
  opt.lr = 2.0;
  opt.min_lr = 0.0;
  ScheduleConfig sc;
  sc.warmup_tokens = 0;
  sc.decay_tokens = 10;
  const LrSchedule s(opt, sc);
  CHECK(s.lr_at(0) == 2.0);
  CHECK(s.lr_at(10) == 0.0);
}
