#include <catch2/catch.hpp>

#include <set>

#include "core/status.h"
#include "parallel/topology.h"

using namespace mtnlg;
using V = std::vector<int64_t>;

TEST_CASE("Megatron order on 8 ranks: tp fastest - then dp - then pp") {
  const ParallelSizes s{2, 2, 2};
  const Topology t5(s, 5);
  CHECK(t5.tensor_rank() == 1);
  CHECK(t5.data_rank() == 0);
  CHECK(t5.pipeline_rank() == 1);
  CHECK(t5.tensor_group() == V{4, 5});
  CHECK(t5.data_group() == V{5, 7});
  CHECK(t5.pipeline_group() == V{1, 5});
  CHECK(t5.embedding_group() == V{1, 5});
  CHECK(t5.is_last_stage());
  CHECK_FALSE(t5.is_first_stage());
  CHECK(t5.describe() == "rank 5: tp 1/2, dp 0/2, pp 1/2");
}

TEST_CASE("every rank has a unique coordinate and groups partition the world") {
  const ParallelSizes s{4, 3, 2};
  std::set<V> tensor_groups, data_groups;
  std::set<V> coords;
  for (int64_t r = 0; r < s.world(); ++r) {
    const Topology t(s, r);
    CHECK(t.rank_of(t.tensor_rank(), t.data_rank(), t.pipeline_rank()) == r);
    coords.insert({t.tensor_rank(), t.data_rank(), t.pipeline_rank()});
    tensor_groups.insert(t.tensor_group());
    data_groups.insert(t.data_group());
  }
  CHECK(coords.size() == 24);
  CHECK(tensor_groups.size() == 6);  // world / tp
  CHECK(data_groups.size() == 12);   // world / dp
}

TEST_CASE("the paper's layout: 2240 ranks = 8 x 35 x 8") {
  const ParallelSizes s = Topology::derive(2240, 8, 35);
  CHECK(s.data == 8);
  const Topology last(s, 2239);
  CHECK(last.pipeline_rank() == 34);
  CHECK(last.tensor_group().front() == 2232);
}

TEST_CASE("a world that does not divide names the numbers") {
  try {
    Topology::derive(10, 4, 1);
    FAIL("expected an error");
  } catch (const Error& e) {
    CHECK(e.context() == "parallel");
    CHECK(std::string(e.what()).find("world size 10") != std::string::npos);
  }
  CHECK_THROWS_AS(Topology(ParallelSizes{0, 1, 1}, 0), Error);
}

TEST_CASE("one rank: every group is itself") {
  const Topology t(ParallelSizes{}, 0);
  CHECK(t.tensor_group() == V{0});
  CHECK(t.embedding_group() == V{0});
  CHECK(t.is_first_stage());
  CHECK(t.is_last_stage());
}

TEST_CASE("a tensor group across nodes is named in a warning") {
  // tp 4 x dp 2: rank 5's tensor group is {4, 5, 6, 7}.
  const Topology t(ParallelSizes{4, 1, 2}, 5);
  CHECK(t.tensor_group_node_warning({1, 1, 1, 1}).empty());
  const std::string w = t.tensor_group_node_warning({0, 0, 1, 1});
  INFO(w);
  CHECK(w.find("rank 4 on node 0") != std::string::npos);
  CHECK(w.find("rank 7 on node 1") != std::string::npos);
  CHECK(w.find("parallel.tensor = 4") != std::string::npos);
}
