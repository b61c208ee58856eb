#include <catch2/catch.hpp>

#include "cmd/memory_check.h"
#include "core/status.h"

using namespace mtnlg;

namespace {
constexpr int64_t kGiB = int64_t{1} << 30;

RankMemory rank(int64_t r, int64_t node, int64_t need, int64_t available, int64_t term = 3,
                int64_t term_bytes = 0) {
  return RankMemory{r, node, need, available, term, term_bytes};
}

std::string error_of(const std::vector<RankMemory>& ranks) {
  try {
    check_node_memory(ranks, "test");
  } catch (const Error& e) {
    CHECK(e.code() == Code::kInvalidArgument);
    return std::string(e.context()) + " | " + e.what();
  }
  return "";
}
}  // namespace

TEST_CASE("ranks that fit their nodes pass - exactly full included") {
  CHECK(error_of({rank(0, 0, 10 * kGiB, 10 * kGiB)}).empty());
  // Two nodes of 16 GiB, two ranks of 8 GiB on each.
  CHECK(error_of({rank(0, 0, 8 * kGiB, 16 * kGiB), rank(1, 0, 8 * kGiB, 16 * kGiB),
                  rank(2, 1, 8 * kGiB, 16 * kGiB), rank(3, 1, 8 * kGiB, 16 * kGiB)})
            .empty());
  // Unknown availability is not a failure.
  CHECK(error_of({rank(0, 0, 1000 * kGiB, -1)}).empty());
}

TEST_CASE("one process that needs more than its node has fails naming the term's key") {
  const std::string e = error_of({rank(0, 0, 30 * kGiB, 20 * kGiB, 4, 25 * kGiB)});
  CHECK_THAT(e, Catch::StartsWith("parallel.micro_batch_size | "));
  CHECK_THAT(e, Catch::Contains("this process needs 30.00 GiB by the plan (32212254720 bytes, "
                                "most of it activations 25.00 GiB) but the node has 20.00 GiB"));
  CHECK_THAT(e, Catch::Contains("parallel.activation_checkpointing: true"));
}

TEST_CASE("the ranks of one node are summed - each fitting alone is not enough") {
  // Node 1's two ranks need 2 x 12 GiB of its 20; node 0 is fine. Availability is the smallest
  // figure the node's ranks measured.
  const std::string e =
      error_of({rank(0, 0, 12 * kGiB, 40 * kGiB), rank(1, 1, 12 * kGiB, 21 * kGiB, 1, 6 * kGiB),
                rank(2, 1, 11 * kGiB, 20 * kGiB, 3, 7 * kGiB)});
  CHECK_THAT(e, Catch::StartsWith("model.hidden_size | "));
  CHECK_THAT(e, Catch::Contains("the 2 ranks on node 1 need 23.00 GiB"));
  CHECK_THAT(e, Catch::Contains("the largest, rank 1, 12.00 GiB, most of it gradients 6.00 GiB"));
  CHECK_THAT(e, Catch::Contains("the node has 20.00 GiB available (test)"));
}

TEST_CASE("each term names the keys that shrink it") {
  const std::vector<std::pair<int64_t, std::string>> expect = {
      {0, "model.hidden_size"},         {1, "model.hidden_size"},
      {2, "parallel.zero_stage"},       {3, "parallel.zero_stage"},
      {4, "parallel.micro_batch_size"}, {5, "parallel.micro_batch_size"}};
  REQUIRE(memory_term_names().size() == expect.size());
  for (const auto& [term, key] : expect) {
    INFO(memory_term_names()[static_cast<size_t>(term)]);
    const std::string e = error_of({rank(0, 0, 2 * kGiB, kGiB, term, kGiB)});
    CHECK_THAT(e, Catch::StartsWith(key + " | "));
    CHECK_THAT(e, Catch::Contains(std::string("most of it ") +
                                  memory_term_names()[static_cast<size_t>(term)]));
  }
}

TEST_CASE("the gathered check on one process uses the plan and this machine's memory") {
  MemoryTerms small;
  small.weights = 1024;
  CHECK_NOTHROW(check_host_memory(small, 0, nullptr));
  MemoryTerms huge;
  huge.adam_moments = int64_t{1} << 52;  // 4 PiB
  CHECK_THROWS_WITH(check_host_memory(huge, 0, nullptr),
                    Catch::Contains("most of it adam_moments 4194304.00 GiB"));
}
