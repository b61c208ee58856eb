// The deferred id checks' host side (core/id_checks.h), with the device's words made here the way
// check_ids_cuda's kernel makes them: each bad id lowers its check's word to pack(position, id).
#include <catch2/catch.hpp>

#include <algorithm>
#include <string>
#include <vector>

#include "core/cpu/id_checks.h"
#include "core/id_checks.h"

using namespace mtnlg;

namespace {

// The word check_ids_cuda leaves for these ids (any order of its atomicMins gives this one).
uint64_t device_word(const std::vector<int32_t>& ids, int64_t limit) {
  uint64_t word = DeferredIdChecks::kClear;
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] < 0 || ids[i] >= limit)
      word = std::min(word, DeferredIdChecks::pack(static_cast<uint32_t>(i), ids[i]));
  }
  return word;
}

std::string message_of(DeferredIdChecks& checks, const std::vector<uint64_t>& words) {
  try {
    checks.end_read(words.data());
  } catch (const Error& e) {
    CHECK(e.code() == Code::kInvalidArgument);
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("a bad id reads the same from both backends - op id position range fix") {
  const std::vector<int32_t> ids = {3, 9, 12, -1};
  std::string cpu;
  try {
    cpu::check_ids(ids.data(), 4, 10, "embedding_forward", "token id", "check model.vocab_size");
  } catch (const Error& e) {
    cpu = e.what();
  }
  CHECK(cpu ==
        "invalid argument [embedding_forward]: embedding_forward: token id 12 at position 2 is "
        "outside [0, 10); check model.vocab_size");

  DeferredIdChecks checks;
  REQUIRE(checks.add("embedding_forward", "token id", 10, "check model.vocab_size") == 0);
  REQUIRE(checks.begin_read() == 1);
  CHECK(message_of(checks, {device_word(ids, 10)}) ==
        "invalid argument [embedding_forward]: embedding_forward: token id 12 at position 2 is "
        "outside [0, 10) (found at the device's next synchronization with the host); check "
        "model.vocab_size");
}

TEST_CASE("the device word keeps the lowest bad position and its id - negative ids too") {
  CHECK(device_word({0, 1, 2}, 3) == DeferredIdChecks::kClear);
  // Position 1's id sorts after position 3's in the low half; the position decides.
  const uint64_t w = device_word({0, -1, 5, 2147483647}, 3);
  CHECK(w == DeferredIdChecks::pack(1, -1));
  DeferredIdChecks checks;
  checks.add("cross_entropy_forward", "target id", 3, "fix");
  checks.begin_read();
  CHECK_THAT(message_of(checks, {w}), Catch::Contains("target id -1 at position 1 "));
  // The largest position a check takes (check_ids refuses more ids) stays apart from kClear.
  CHECK(DeferredIdChecks::pack(0xfffffffeu, -1) != DeferredIdChecks::kClear);
}

TEST_CASE("the first bad check in the order they ran is raised and every read check forgotten") {
  DeferredIdChecks checks;
  CHECK(checks.add("embedding_forward", "token id", 10, "a") == 0);
  CHECK(checks.add("cross_entropy_forward", "target id", 10, "b") == 1);
  CHECK(checks.add("cross_entropy_backward", "target id", 10, "c") == 2);
  CHECK(checks.pending() == 3);
  REQUIRE(checks.begin_read() == 3);
  CHECK(checks.pending() == 0);
  const std::string msg = message_of(
      checks,
      {DeferredIdChecks::kClear, DeferredIdChecks::pack(4, 11), DeferredIdChecks::pack(0, 10)});
  CHECK_THAT(msg, Catch::StartsWith("invalid argument [cross_entropy_forward]:") &&
                      Catch::Contains("target id 11 at position 4"));
  // Nothing is raised twice: the next read holds no check.
  CHECK(checks.begin_read() == 0);
  CHECK(message_of(checks, {}).empty());
}

TEST_CASE("all clear raises nothing") {
  DeferredIdChecks checks;
  for (int i = 0; i < 5; ++i) checks.add("embedding_backward", "token id", 7, "fix");
  REQUIRE(checks.begin_read() == 5);
  const std::vector<uint64_t> words(5, DeferredIdChecks::kClear);
  CHECK(message_of(checks, words).empty());
}

TEST_CASE("slots run out at kSlots and are free again once a read begins") {
  DeferredIdChecks checks;
  for (int i = 0; i < DeferredIdChecks::kSlots; ++i)
    CHECK(checks.add("op", "token id", 4, "f") == i);
  CHECK(checks.full());
  CHECK(checks.add("op", "token id", 4, "f") == -1);
  REQUIRE(checks.begin_read() == DeferredIdChecks::kSlots);
  // A check queued after the read's copy takes slot 0 again (stream order keeps them apart) and
  // is not part of this read.
  CHECK(checks.add("later_op", "token id", 4, "f") == 0);
  std::vector<uint64_t> words(DeferredIdChecks::kSlots, DeferredIdChecks::kClear);
  CHECK(message_of(checks, words).empty());
  CHECK(checks.pending() == 1);
  REQUIRE(checks.begin_read() == 1);
  CHECK_THAT(message_of(checks, {DeferredIdChecks::pack(2, 9)}),
             Catch::Contains("later_op: token id 9 at position 2 is outside [0, 4)"));
}

TEST_CASE("a read whose wait threw is dropped by the next one") {
  DeferredIdChecks checks;
  checks.add("first", "token id", 4, "f");
  REQUIRE(checks.begin_read() == 1);  // its wait threw: end_read never came
  checks.add("second", "token id", 4, "f");
  REQUIRE(checks.begin_read() == 1);
  CHECK_THAT(message_of(checks, {DeferredIdChecks::pack(0, 5)}), Catch::Contains("second:"));
}

// A captured step's checks (Backend::capture on CUDA): recorded from an empty list into words
// 0..k, pending again at each replay without a read between replays (the words keep the lowest
// bad position over them), and refused while other checks hold the words.
TEST_CASE("a captured step's checks are taken and pending again at each replay") {
  DeferredIdChecks checks;
  checks.add("embedding_forward", "token id", 10, "a");
  checks.add("cross_entropy_forward_add", "target id", 10, "b");
  const std::vector<DeferredIdChecks::Check> graph = checks.take_pending();
  REQUIRE(graph.size() == 2);
  CHECK(checks.pending() == 0);
  CHECK(checks.replay_pending(graph));  // words 0 and 1 again
  CHECK(checks.pending() == 2);
  CHECK(checks.replay_pending(graph));  // a second replay before any read: the same words
  CHECK(checks.pending() == 2);
  REQUIRE(checks.begin_read() == 2);
  CHECK_THAT(message_of(checks, {DeferredIdChecks::kClear, DeferredIdChecks::pack(3, 12)}),
             Catch::Contains("cross_entropy_forward_add: target id 12 at position 3"));
  checks.add("embedding_backward", "token id", 10, "c");  // another check holds word 0
  CHECK_FALSE(checks.replay_pending(graph));
  CHECK(checks.pending() == 1);
  REQUIRE(checks.begin_read() == 1);
  CHECK(message_of(checks, {DeferredIdChecks::kClear}).empty());
  CHECK(checks.replay_pending(graph));
  // A recording without checks (a captured optimizer step) replays with others pending and
  // leaves them as they are: no read first.
  CHECK(checks.replay_pending({}));
  CHECK(checks.pending() == 2);
  CHECK(checks.replay_pending(graph));
}
