// cmd/openmp_policy.h: the launcher's local rank count and when a node is oversubscribed.
#include "cmd/openmp_policy.h"

#include <catch2/catch.hpp>
#include <map>
#include <string>

namespace mtnlg {
namespace {

EnvLookup env_of(const std::map<std::string, std::string>& vars) {
  return [vars](const char* k) -> const char* {
    const auto it = vars.find(k);
    return it == vars.end() ? nullptr : it->second.c_str();
  };
}

TEST_CASE("local ranks from Open MPI's and Slurm's environment") {
  CHECK(launcher_local_ranks(env_of({})) == 1);
  CHECK(launcher_local_ranks(env_of({{"OMPI_COMM_WORLD_LOCAL_SIZE", "4"}})) == 4);
  CHECK(launcher_local_ranks(env_of({{"OMPI_COMM_WORLD_LOCAL_SIZE", "x"}})) == 1);
  // srun: tasks per node, compressed; this node's entry by SLURM_NODEID.
  CHECK(launcher_local_ranks(
            env_of({{"SLURM_STEP_TASKS_PER_NODE", "2(x3),1"}, {"SLURM_NODEID", "0"}})) == 2);
  CHECK(launcher_local_ranks(
            env_of({{"SLURM_STEP_TASKS_PER_NODE", "2(x3),1"}, {"SLURM_NODEID", "2"}})) == 2);
  CHECK(launcher_local_ranks(
            env_of({{"SLURM_STEP_TASKS_PER_NODE", "2(x3),1"}, {"SLURM_NODEID", "3"}})) == 1);
  CHECK(launcher_local_ranks(env_of({{"SLURM_STEP_TASKS_PER_NODE", "8"}})) == 8);
  CHECK(launcher_local_ranks(
            env_of({{"SLURM_STEP_TASKS_PER_NODE", "3,5"}, {"SLURM_NODEID", "1"}})) == 5);
  CHECK(launcher_local_ranks(env_of({{"SLURM_STEP_TASKS_PER_NODE", "2(x"}})) == 1);
  // scripts/launch.sh (MTNLG_RANK): the runtime's local world, else the whole world.
  CHECK(launcher_local_ranks(env_of({{"MTNLG_RANK", "1"}, {"MTNLG_WORLD_SIZE", "4"}})) == 4);
  CHECK(launcher_local_ranks(env_of({{"MTNLG_RANK", "1"},
                                     {"MTNLG_WORLD_SIZE", "4"},
                                     {"MTNLG_LOCAL_WORLD_SIZE", "2"},
                                     {"SLURM_STEP_TASKS_PER_NODE", "8"}})) == 2);
  CHECK(launcher_local_ranks(env_of({{"MTNLG_WORLD_SIZE", "4"}})) == 1);  // no rank: not launched
  // Open MPI's count wins when both are there (mpirun inside an allocation).
  CHECK(launcher_local_ranks(env_of(
            {{"OMPI_COMM_WORLD_LOCAL_SIZE", "3"}, {"SLURM_STEP_TASKS_PER_NODE", "8"}})) == 3);
}

TEST_CASE("oversubscribed: more threads on the node than cores") {
  CHECK_FALSE(oversubscribed(1, 64, 2));  // one rank: its threads are its own business
  CHECK_FALSE(oversubscribed(2, 0, 2));   // the default splits the cores
  CHECK_FALSE(oversubscribed(2, 1, 2));
  CHECK_FALSE(oversubscribed(4, 1, 2));  // one thread each: no OpenMP workers to spin
  CHECK(oversubscribed(2, 2, 2));
  CHECK(oversubscribed(8, 16, 112));
  CHECK_FALSE(oversubscribed(8, 14, 112));
}

}  // namespace
}  // namespace mtnlg
