// Runtime: who this process is in the job (rank, world, local rank, node) and the rendezvous
// Store its communicators meet through.
//
// Runtime::init() asks the launcher's PMIx server (PMIx_Init) when the process was started by
// one (PMIX_NAMESPACE and PMIX_RANK in the environment: Open MPI's mpirun, Slurm's
// srun --mpi=pmix). Without PMIx, a launcher may say it through the environment instead (as
// torchrun does): MTNLG_WORLD_SIZE and MTNLG_RANK (required together), MTNLG_LOCAL_RANK and
// MTNLG_LOCAL_WORLD_SIZE (default: the rank and the world, as on one node), MTNLG_NODE (default
// 0), and MTNLG_STORE_DIR, an empty directory per job that every rank reaches, where the ranks
// meet (parallel/file_store.h). Otherwise the process is rank 0 of a world of 1 with a
// MemoryStore. A bad value is invalid_argument naming the variable. Our code never calls MPI:
// mpirun is only a launcher here.
//
// Ownership: the Runtime owns the PMIx session (PMIx_Finalize in the destructor, after the store
// is gone) and the Store; it is move-only and should live for the whole run, longer than every
// communicator built from it. Destroyed by an exception leaving its scope (a rank failing, even
// before its groups are connected), it first tells the other ranks through the store
// (Store::publish_failure): those waiting for this rank's keys stop at once, naming it. With
// several ranks, init() also writes this process's host and pid to the store (publish_process,
// parallel/peer_watch.h), by which a rank on the same host sees this one gone if it is killed.
// Thread safety: the fields are immutable after init; the store is thread-safe.
#pragma once

#include <cstdint>
#include <exception>
#include <memory>
#include <string>

#include "parallel/store.h"

namespace mtnlg {

struct Runtime {
  int64_t rank = 0;         // global rank
  int64_t world = 1;        // number of ranks in the job
  int64_t local_rank = 0;   // rank among this job's processes on this node
  int64_t local_world = 1;  // this job's processes on this node
  int64_t node = 0;         // node index
  std::unique_ptr<Store> store;

  // Throws io_error naming the PMIx call and its status string when PMIx fails.
  static Runtime init();

  Runtime() = default;
  ~Runtime();
  Runtime(Runtime&& other) noexcept;
  Runtime& operator=(Runtime&& other) noexcept;
  Runtime(const Runtime&) = delete;
  Runtime& operator=(const Runtime&) = delete;

  bool under_pmix() const { return pmix_initialized_; }
  std::string describe() const;  // "rank 3 of 8 (local 1 of 4, node 0), PMIx"

 private:
  void finalize() noexcept;
  bool pmix_initialized_ = false;
  bool env_launch_ = false;
  // Exceptions in flight when this object began: more at its end means one is leaving its scope.
  int uncaught_at_start_ = std::uncaught_exceptions();
};

}  // namespace mtnlg
