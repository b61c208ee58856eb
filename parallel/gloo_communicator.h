// Gloo communicators: the CPU backend of parallel/communicator.h, over Gloo's TCP transport.
//
// Each communicator owns a Gloo TCP device (one listening socket and one event-loop thread) and a
// full mesh of connections to the other members, built through the rendezvous Store: each member
// publishes its addresses under "gloo/<group>.<first global rank>x<size>.<generation>/rank_<group
// rank>@<global rank>" (the key convention of parallel/store.h, so PmixStore knows whose data to
// read; the generation counts earlier creations of the same group, Store::next_use).
// Algorithms are Gloo's: ring all_reduce, ring all_gather, binomial-tree broadcast,
// dissemination barrier, send/recv on unbound buffers. reduce_scatter is our own ring on Gloo's
// unbound buffers: this Gloo snapshot's only reduce-scatter is the old pair-buffer
// ReduceScatterHalvingDoubling, whose buffers must be rebuilt per call.
//
// Every operation carries the communicator's timeout; Gloo's exceptions are caught here, once,
// and become io_error naming the group, operation, peer and time waited.
//
// Destroying a communicator is collective in normal flow (a barrier, so that no rank closes
// connections a peer still uses); after a failure or while unwinding it closes at once.
//
// Thread safety: a communicator is not thread-safe (one thread per communicator); the factories
// are, as long as the Store is.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "parallel/communicator.h"
#include "parallel/store.h"
#include "parallel/topology.h"

namespace mtnlg {

struct GlooOptions {
  // Every operation and the rendezvous fail after this long (recipe key parallel.timeout_s).
  std::chrono::milliseconds timeout = std::chrono::seconds(300);
  // Network interface to listen on ("eth0", "lo"); wins over hostname when set.
  std::string iface;
  // Host name or address to listen on; empty: this machine's host name.
  std::string hostname;

  // Defaults, with iface from MTNLG_GLOO_IFACE (or GLOO_SOCKET_IFNAME, as PyTorch reads it) and
  // hostname from MTNLG_GLOO_HOSTNAME when those are set.
  static GlooOptions from_env(std::chrono::milliseconds timeout);
};

// Builds one group; every member calls it with the same name and global_ranks (in group-rank
// order) and its own rank_in_group. A one-rank group opens no connections.
std::unique_ptr<Communicator> make_gloo_communicator(Store& store, const std::string& group_name,
                                                     int rank_in_group,
                                                     std::vector<int64_t> global_ranks,
                                                     const GlooOptions& options);
std::unique_ptr<Communicator> make_gloo_communicator(
    Store& store, const std::string& group_name, int rank_in_group,
    std::vector<int64_t> global_ranks,
    std::chrono::milliseconds timeout = std::chrono::seconds(300));

}  // namespace mtnlg
