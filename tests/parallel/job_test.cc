// Job (parallel/job.h): the topology a world makes of the sizes asked for, a data size that does
// not match the world named, and four ranks connected by a group factory (Gloo over a FileStore,
// in-process threads as ranks), each group of the right size and the tensor group's node check
// run over it.
#include <catch2/catch.hpp>
#include <memory>
#include <string>

#include "core/status.h"
#include "parallel/file_store.h"
#include "parallel/job.h"
#include "parallel/transport.h"
#include "test_util.h"

using namespace mtnlg;

namespace {

Runtime runtime_of(int64_t rank, int64_t world, const std::string& store_dir, int64_t node = 0) {
  Runtime r;
  r.rank = rank;
  r.world = world;
  r.local_rank = rank;
  r.local_world = world;
  r.node = node;
  r.store = std::make_unique<FileStore>(store_dir);
  return r;
}

}  // namespace

TEST_CASE("a Job derives the topology and names a data size that does not fit the world") {
  test::TempDir dir;
  Job job(runtime_of(5, 8, dir.path().string()), 2, 2, 0);
  CHECK(job.multi_rank());
  CHECK(job.topology().sizes().data == 2);
  CHECK(job.topology().rank() == 5);
  Job fits(runtime_of(5, 8, dir.path().string()), 2, 2, 2);
  CHECK(fits.topology().sizes().data == 2);
  REQUIRE_THROWS_WITH(Job(runtime_of(5, 8, dir.path().string()), 2, 2, 3),
                      Catch::Contains("parallel.data: 3 but the job has 8 ranks = tensor 2 x "
                                      "pipeline 2 x data 2"));
  REQUIRE_THROWS_AS(Job(runtime_of(0, 8, dir.path().string()), 3, 1, 0), Error);

  // One rank: no groups, the factory is not called.
  Job one(runtime_of(0, 1, dir.path().string()), 1, 1, 0);
  bool called = false;
  one.connect([&](const Topology&, Store&) {
    called = true;
    return ProcessGroups{};
  });
  CHECK(!called);
  CHECK(!one.multi_rank());
  CHECK(one.groups().world == nullptr);
}

TEST_CASE("a Job connects its ranks through the factory's groups") {
  test::TempDir dir;
  const std::string store = dir.path().string();
  std::vector<int64_t> tensor_sizes(4), world_sizes(4);
  // Tensor groups (ranks 0-1, 2-3) span nodes 0 and 1: the node check gathers over them.
  test::run_ranks(4, [&](int rank) {
    Job job(runtime_of(rank, 4, store, rank % 2), 2, 1, 0);
    job.connect([](const Topology& t, Store& s) {
      return make_host_groups(
          t, s, TransportOptions::resolve(Transport::kGloo, std::chrono::seconds(30)));
    });
    tensor_sizes[static_cast<size_t>(rank)] = job.groups().tensor->size();
    world_sizes[static_cast<size_t>(rank)] = job.groups().world->size();
  });
  CHECK(tensor_sizes == std::vector<int64_t>{2, 2, 2, 2});
  CHECK(world_sizes == std::vector<int64_t>{4, 4, 4, 4});
}
