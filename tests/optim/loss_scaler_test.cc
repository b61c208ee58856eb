#include <catch2/catch.hpp>

#include "optim/loss_scaler.h"

using namespace mtnlg;

namespace {
OptimizerConfig dynamic_config(double initial = 65536.0, int64_t window = 4, int64_t hysteresis = 2,
                               double min_scale = 1.0) {
  OptimizerConfig o;
  o.loss_scale = 0.0;
  o.initial_loss_scale = initial;
  o.loss_scale_window = window;
  o.hysteresis = hysteresis;
  o.min_loss_scale = min_scale;
  return o;
}
}  // namespace

TEST_CASE("Megatron's defaults: dynamic from 2^32, window 1000, hysteresis 2, minimum 1") {
  const OptimizerConfig o;
  const LossScaler s(o);
  CHECK(s.dynamic());
  CHECK(s.scale() == 4294967296.0);
  CHECK(s.state().hysteresis_tracker == 2);
  CHECK(o.loss_scale_window == 1000);
  CHECK(o.min_loss_scale == 1.0);
}

TEST_CASE("overflows halve the scale only after hysteresis of them - then at each one") {
  LossScaler s(dynamic_config());
  s.update(true);  // 1 of 2: the scale stays
  CHECK(s.scale() == 65536.0);
  s.update(false);  // a clean iteration does not restore the hysteresis count
  s.update(true);   // 2 of 2: halve
  CHECK(s.scale() == 32768.0);
  s.update(true);  // still exhausted: halve again
  CHECK(s.scale() == 16384.0);
  CHECK(s.state().growth_tracker == 0);
}

TEST_CASE("a window of clean iterations doubles the scale and restores the hysteresis count") {
  LossScaler s(dynamic_config(1024.0, 3, 2));
  s.update(true);
  CHECK(s.state().hysteresis_tracker == 1);
  s.update(false);
  s.update(false);
  CHECK(s.scale() == 1024.0);
  s.update(false);  // the third clean one in a row
  CHECK(s.scale() == 2048.0);
  CHECK(s.state() == LossScaler::State{2048.0, 0, 2});
  // An overflow resets the clean count: two more clean ones are not a window.
  s.update(false);
  s.update(true);
  s.update(false);
  s.update(false);
  CHECK(s.scale() == 2048.0);
}

TEST_CASE("the scale never falls below min_loss_scale") {
  LossScaler s(dynamic_config(8.0, 1000, 1, 2.0));
  for (int i = 0; i < 10; ++i) s.update(true);
  CHECK(s.scale() == 2.0);
}

TEST_CASE("a static scale never changes") {
  OptimizerConfig o;
  o.loss_scale = 128.0;
  LossScaler s(o);
  CHECK_FALSE(s.dynamic());
  for (int i = 0; i < 5; ++i) s.update(i % 2 == 0);
  for (int i = 0; i < 2000; ++i) s.update(false);
  CHECK(s.scale() == 128.0);
}

TEST_CASE("state round-trips - a restored scaler goes on as the original") {
  LossScaler a(dynamic_config(512.0, 3, 2));
  a.update(true);
  a.update(false);
  LossScaler b(dynamic_config(512.0, 3, 2));
  b.load(a.state());
  for (bool inf : {false, false, true, true, false, false, false}) {
    a.update(inf);
    b.update(inf);
    CHECK(a.state() == b.state());
  }
  CHECK_THROWS(b.load(LossScaler::State{0.0, 0, 2}));
}
