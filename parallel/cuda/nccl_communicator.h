// NCCL communicators: the CUDA backend of parallel/communicator.h, for tensors on one GPU.
//
// Rendezvous: the group's rank 0 creates the ncclUniqueId and publishes it through the Store
// under "nccl/<group>.<first global rank>x<size>.<generation>/unique_id@<global rank of group
// rank 0>" (the key convention of parallel/store.h; the generation is Store::next_use, as the
// Gloo groups count it); every member reads it and joins with ncclCommInitRankConfig on its
// device. A one-rank group creates no NCCL communicator.
//
// Tensors: CUDA f32, f64, i32, bf16 or f16, on this communicator's device; the collectives also
// take host tensors (all of a call's on the host), copied through a device staging buffer: the
// trainer's scalars and flags (loss sums, norms, stop votes) use the same groups.
//
// Streams: every operation runs on the communicator's own stream, ordered after its inputs'
// producer by an event: recorded on the compute stream named by set_compute_stream (the
// backend's; the trainer names it for every group), so compute and communication are separate
// streams and the host never waits for the whole device. Without one, an operation first waits
// for the whole device. Operations are blocking: they return once our stream has finished, so
// the caller may use the result on any stream. Waiting for the device is what the event avoids:
// with a communication thread (GradSync's overlap) it would wait for the other thread's
// collectives, which wait for peers that may in turn be waiting for us.
//
// Failure: NCCL operations do not time out by themselves. While waiting, the communicator polls
// ncclCommGetAsyncError; an error reported there, or the timeout passing, aborts the NCCL
// communicator (ncclCommAbort) and throws io_error naming the group, the operation and the time
// waited; later operations throw at once. NCCL does not say which peer stalled, and a peer on this
// node that dies leaves NCCL waiting: a wait (joining included) longer than 2 s asks a PeerWatch
// (parallel/peer_watch.h), which names a member that said it failed or whose process on this host
// is gone, and the wait ends then with that name instead of at the timeout. At the timeout, the
// members that did not say they reached the collective (OperationRoll: each says it at half the
// timeout) are named: hung, or in another operation.
// NCCL status codes become mtnlg::Error in nccl_communicator.cc only.
//
// Destruction finalizes the NCCL communicator (bounded by the timeout, then aborts); after a
// failure or while unwinding it aborts at once.
//
// Thread safety: a communicator is not thread-safe (one thread per communicator); the factories
// are, as long as the Store is. Operations make the communicator's device current on the calling
// thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "parallel/communicator.h"
#include "parallel/store.h"
#include "parallel/topology.h"
#include "parallel/transport.h"

namespace mtnlg {

// Builds one group on CUDA device `device`; every member calls it with the same name and
// global_ranks (in group-rank order) and its own rank_in_group. `timeout` bounds the rendezvous
// and every operation (recipe key parallel.timeout_s).
std::unique_ptr<Communicator> make_nccl_communicator(
    Store& store, const std::string& group_name, int rank_in_group,
    std::vector<int64_t> global_ranks, int device,
    std::chrono::milliseconds timeout = std::chrono::seconds(300));

// This rank's world, tensor, data, pipeline and embedding groups on `device`, created in that
// order (embedding only on the first and last stages), as make_host_groups, with
// options.timeout; the checkpoint group carries host messages of a checkpoint commit from a
// background thread: the transport factory's CPU group (make_host_communicator with `options`).
ProcessGroups make_nccl_groups(const Topology& topology, Store& store, int device,
                               const TransportOptions& options);

}  // namespace mtnlg
