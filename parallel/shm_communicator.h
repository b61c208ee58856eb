// Shared-memory communicators: the Communicator of parallel/communicator.h for a group whose
// ranks run on one node, over one POSIX shared-memory segment per group instead of TCP.
//
// Why: over Gloo's TCP transport a small all-reduce between two processes of one machine costs
// 0.3-1 ms (socket round trips through Gloo's event-loop thread); tensor and pipeline parallelism
// make thousands of them per iteration. Here a transfer is a copy into a ring in the segment and
// a copy out: microseconds.
//
// Segment (rank 0 creates it, publishes its name and a random nonce in the Store; the others map
// it and check the nonce, so a rank on another node, or in a container without this /dev/shm,
// cannot mistake another segment for it; rank 0 unlinks the name once every rank has mapped it,
// so nothing is left behind by a crash):
//   per rank     a flag (the last step it reached), its pid and a futex word to sleep on
//   per pair     a ring buffer of kMailboxBytes from i to j, and a single-copy descriptor
// It is the link of parallel/link_communicator.h: the collectives are that file's, built from
// exchanges of transfers, which this file runs through the pairs' rings (published a 16 KiB
// piece at a time, so the peer copies one piece out while the next goes in) or single copy; the
// barrier is the flags. Every rank gets the same bits (sums in rank order). A send returns once
// its bytes are in the ring (not when the peer has received them), which only removes waiting,
// never adds it.
//
// Single copy: a broadcast's or all_gather's transfers of 8 KiB or more, and a send/recv of 1 MiB
// or more, copy once, straight from the owner's memory with process_vm_readv (Linux cross-memory
// attach), not into the ring and out again; the owner publishes the buffer's address in the pair's
// descriptor and waits for the reader's acknowledgement. Reductions stay in the rings, summed 256
// KiB a peer at a time. Used when every member could read every other's memory at creation
// (ShmOptions::single_copy; MTNLG_SHM_SINGLE_COPY=0 turns it off); the group's description then
// says "single copy".
//
// Waiting spins briefly (none when the node's ranks outnumber its cores), then sleeps on a futex
// until a peer publishes: a rank waiting out a pipeline bubble does not burn the core its
// neighbour computes on. Failures as Gloo's: past the timeout an operation throws io_error naming
// the group, the operation, the peer still missing and the time waited; a peer whose process has
// died is named as soon as it is noticed (its pid is gone), not after the timeout. After a
// failure the communicator is unusable.
//
// Ownership: a communicator owns its mapping. Thread safety: not thread-safe (one thread per
// communicator, as every Communicator); the factories are, as long as the Store is.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "parallel/communicator.h"
#include "parallel/store.h"
#include "parallel/transport.h"

namespace mtnlg {

// Builds a shared-memory communicator if every member could map the segment rank 0 created,
// else returns nullptr on every member (they agree through the Store), so the caller can fall
// back to TCP. Collective over the members, like make_gloo_communicator. The transport factory
// (parallel/transport.h) calls it.
std::unique_ptr<Communicator> try_make_shm_communicator(Store& store, const std::string& group_name,
                                                        int rank_in_group,
                                                        std::vector<int64_t> global_ranks,
                                                        const ShmOptions& options);

// How long a shared-memory wait spins before it sleeps on a futex: 250 us while the node's ranks
// (the launcher's count, at least the group's) fit its cores, none when they do not: a rank
// that spins then holds a core the rank it waits for needs (8 ranks of the tiny recipe on 2
// cores: 31 ms an iteration after 250 us spins, 5.8 ms without).
std::chrono::microseconds shm_spin(int node_ranks, int group_size, int cores);

}  // namespace mtnlg
