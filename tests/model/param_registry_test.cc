#include <omp.h>
#include <catch2/catch.hpp>

#include <string>

#include "core/cpu/cpu_backend.h"
#include "core/rng.h"
#include "model/param_registry.h"

using namespace mtnlg;

namespace {

// A column shard (tp rank 1 of 2), a row shard (rank 1 of 2) and a replicated constant.
ParamRegistry registry(Backend& be) {
  ParamRegistry reg;
  reg.add({.name = "cols",
           .global_shape = {37, 50},
           .local_shape = {37, 25},
           .partition_dim = 1,
           .init_std = 0.5,
           .shard_index = 1});
  reg.add({.name = "rows",
           .global_shape = {40, 9},
           .local_shape = {20, 9},
           .partition_dim = 0,
           .init_std = 0.02,
           .shard_index = 1});
  reg.add({.name = "ones", .global_shape = {13}, .local_shape = {13}, .init_value = 1.0});
  reg.allocate(be, DType::kF64);
  return reg;
}

// Element `local` of the shard's global flat index, written out independently of global_index.
uint64_t global_of(const std::string& name, int64_t local) {
  if (name == "cols") return static_cast<uint64_t>((local / 25) * 50 + 25 + local % 25);
  if (name == "rows") return static_cast<uint64_t>(20 * 9 + local);
  return static_cast<uint64_t>(local);
}

}  // namespace

TEST_CASE("init_values draws each element at its global index for any chunk and thread count") {
  auto be = make_cpu_backend(2);
  const int threads_before = omp_get_max_threads();
  for (const int threads : {1, 2}) {
    for (const int64_t chunk : {int64_t{1}, int64_t{7}, int64_t{1000}, ParamRegistry::kInitChunk}) {
      INFO("threads " << threads << ", chunk " << chunk);
      omp_set_num_threads(threads);
      ParamRegistry reg = registry(*be);
      reg.init_values(*be, 5, chunk);
      for (const Param& p : reg.params()) {
        INFO(p.spec.name);
        const double* v = p.value.data_as<double>();
        const RngStream s{5, name_hash(p.spec.name), 0};
        int64_t wrong = 0;
        for (int64_t i = 0; i < p.value.numel(); ++i) {
          const double want = p.spec.init_std > 0
                                  ? p.spec.init_std * rng_normal(s, global_of(p.spec.name, i))
                                  : p.spec.init_value;
          wrong += v[i] != want;
        }
        CHECK(wrong == 0);
      }
    }
  }
  omp_set_num_threads(threads_before);
}

TEST_CASE("init_values rejects a chunk that is not positive") {
  auto be = make_cpu_backend(1);
  ParamRegistry reg = registry(*be);
  CHECK_THROWS_WITH(reg.init_values(*be, 5, 0), Catch::Contains("chunk 0"));
}

TEST_CASE(
    "init_values rejects a shard it cannot index with an error, not from inside the threads") {
  auto be = make_cpu_backend(2);
  ParamRegistry reg;
  reg.add({.name = "cube",
           .global_shape = {2, 4, 6},
           .local_shape = {2, 4, 3},
           .partition_dim = 2,
           .init_std = 0.02,
           .shard_index = 1});
  reg.allocate(*be, DType::kF64);
  CHECK_THROWS_WITH(reg.init_values(*be, 5), Catch::Contains("sharded init of cube"));
}
