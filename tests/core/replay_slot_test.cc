// ReplaySlot (core/replay_slot.h): the one life every recorded piece of work goes through: plain
// first, then recorded once and replayed, recorded again when its key changes, and dropped when
// stale (then plain again before recording anew).
#include <catch2/catch.hpp>

#include <vector>

#include "core/backend.h"
#include "core/replay_slot.h"

using namespace mtnlg;

TEST_CASE("a replay slot runs plainly then records once and replays - again after a new key") {
  auto be = make_cpu_backend(1);
  ReplaySlot slot(*be);
  std::vector<int> ran;  // which recording's calls ran
  CHECK(slot.plain_next());
  CHECK_THROWS_WITH(slot.record_if(false, [] {}), Catch::Contains("before a plain run"));
  CHECK_THROWS_WITH(slot.replay(), Catch::Contains("before record_if"));
  slot.ran_plainly();
  CHECK_FALSE(slot.plain_next());
  CHECK(slot.recordings() == 0);
  CHECK(slot.launches() == -1);

  CHECK(slot.record_if(false, [&] { ran.push_back(1); }));  // nothing recorded yet
  CHECK(ran.empty());                                       // recorded, not run
  slot.replay();
  CHECK_FALSE(slot.record_if(false, [&] { ran.push_back(9); }));  // the same key: kept
  slot.replay();
  CHECK(slot.record_if(true, [&] { ran.push_back(2); }));  // a new key: recorded again
  slot.replay();
  CHECK(ran == std::vector<int>{1, 1, 2});
  CHECK(slot.recordings() == 2);
  CHECK(slot.launches() == -1);  // the CPU launches nothing
}

TEST_CASE("a replay slot drops a stale recording - plain again before it records anew") {
  auto be = make_cpu_backend(1);
  ReplaySlot slot(*be);
  int runs = 0;
  REQUIRE(slot.plain_next());
  slot.ran_plainly();
  REQUIRE(slot.record_if(false, [&] { ++runs; }));
  slot.replay();
  be->invalidate_recordings();
  CHECK(slot.plain_next());  // stale: dropped
  CHECK_THROWS_WITH(slot.replay(), Catch::Contains("before record_if"));
  CHECK(slot.plain_next());  // still plain until the owner says it ran
  slot.ran_plainly();
  CHECK(slot.record_if(false, [&] { runs += 10; }));  // nothing held: records whatever the key
  slot.replay();
  CHECK(runs == 11);
  CHECK(slot.recordings() == 2);
}
