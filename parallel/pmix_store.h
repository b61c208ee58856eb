// PmixStore: the rendezvous Store over the launcher's PMIx server (Open MPI's mpirun, Slurm's
// srun --mpi=pmix), so that no extra rendezvous service (TCP store, file system) is needed.
//
// set() is PMIx_Put(PMIX_GLOBAL) + PMIx_Commit: the value becomes part of this process's PMIx
// data. get() must name the process whose data holds the key, which the key convention of
// parallel/store.h gives (a final "@<rank>", else rank 0). get() polls PMIx_Get on that process
// until the key appears or the timeout passes, because a peer may commit the key after we ask
// (each read is PMIx_Get_nb with our own deadline: Open MPI's server never answers a read of a
// process that died meanwhile):
//   - each PMIx_Get carries PMIX_TIMEOUT (1 s at most): a server that holds the request until the
//     peer commits (Open MPI's, for a process on this node) wakes us as soon as it does;
//   - a server that answers "not found" at once is asked again after a short, growing sleep, with
//     PMIX_GET_REFRESH_CACHE so that data already cached for that process (fetched by direct
//     modex from another node, as srun's and mpirun's servers do) is fetched again.
// No fence is needed, so any subset of ranks can rendezvous (a group's members only), which a
// PMIx_Fence-based exchange would not allow without a fence over exactly those members.
//
// Requires PMIx_Init to have succeeded (Runtime does it) and to outlive the store.
// Thread safety: the PMIx client library is thread-safe; so is this store.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "parallel/store.h"

namespace mtnlg {

class PmixStore final : public Store {
 public:
  // `nspace` and `rank`: this process's PMIx identity (from PMIx_Init).
  PmixStore(std::string nspace, int64_t rank) : nspace_(std::move(nspace)), rank_(rank) {}

  // Throws invalid_argument when the key names another setter than this rank.
  void set(const std::string& key, const std::vector<uint8_t>& value) override;
  std::vector<uint8_t> get(const std::string& key, std::chrono::milliseconds timeout) override;
  // One PMIx_Get (PMIX_TIMEOUT 1 s, the cache refreshed) of the key in its setter's data.
  std::optional<std::vector<uint8_t>> try_get(const std::string& key) override;
  // get() of a key that rank R sets also looks once a second for R's failure (publish_failure:
  // "failed@R" in R's data) and, when R ran on this host, for its process gone (RankSigns), and
  // stops naming R (a launcher that leaves the other ranks running when one fails: srun without
  // --kill-on-bad-exit, mpirun --enable-recovery).

 private:
  std::string nspace_;
  int64_t rank_;
};

// Throws io_error "<call> failed: <PMIx_Error_string(status)>" unless status is PMIX_SUCCESS:
// the one place PMIx status codes become mtnlg::Error.
void check_pmix(int status, const char* call, const std::string& context);

}  // namespace mtnlg
