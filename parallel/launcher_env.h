// What the launcher's environment says about this node, read before (or without) PMIx: the
// OpenMP wait policy (cmd/openmp_policy.h) and the shared-memory transport's waits
// (parallel/shm_communicator.h) both ask how many ranks share the node's cores.
#pragma once

#include <functional>

namespace mtnlg {

using EnvLookup = std::function<const char*(const char*)>;

// Ranks of this launch on this node: OMPI_COMM_WORLD_LOCAL_SIZE (Open MPI's mpirun), else for a
// launch through MTNLG_RANK (scripts/launch.sh, also inside a Slurm allocation)
// MTNLG_LOCAL_WORLD_SIZE or MTNLG_WORLD_SIZE, else SLURM_STEP_TASKS_PER_NODE at index
// SLURM_NODEID (srun: "2(x3),1" means 2 tasks on each of 3 nodes, then 1), else 1.
int launcher_local_ranks(const EnvLookup& env);

}  // namespace mtnlg
